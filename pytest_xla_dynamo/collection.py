"""Collection: parametrization from options and markers, mode selection, model and mode order, xdist groups, skips.

``parametrize`` turns ``--xla-backend``/``--xla-models``/``--xla-tensor-mode`` (or the markers
``xla_backend``/``xla_models``/``xla_tensor_mode`` of a test) into indirect parameters with readable ids
(``test_training_parity[resnet18-trace_once]``); backends that do not support a test's ``xla_mode`` are
left out. ``arrange`` deselects tests whose mode is not in ``--xla-modes``, puts each model's tests in one
``xdist_group``, and skips XLA tests where torch or torch_xla is missing; ``order_by_model`` (called at the end of
collection, after the CPU instruction-set cap) runs the shared-case tests model by model, the largest first, and
mode by mode (so each case is built once and freed before the next (model, mode)). Nothing here touches a device;
torch is imported only to count the sizes of two or more models on the meta device
(:mod:`pytest_xla_dynamo.core.sizes`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.activation import XLA_FIXTURES as XLA_FIXTURES  # what makes an XLA test
from pytest_xla_dynamo.activation import needs_xla as needs_xla
from pytest_xla_dynamo.config import MODES, TENSOR_MODES
from pytest_xla_dynamo.core import devices, sizes
from pytest_xla_dynamo.markers import item_modes, marker_values
from pytest_xla_dynamo.session import XlaSession


def _valid(values: list[str], valid: Sequence[str], aliases: dict[str, str] | None = None) -> list[str]:
    """The valid ``values`` (aliases resolved); the invalid ones are reported by ``markers.validate_item``."""
    resolved = [(aliases or {}).get(v, v) for v in values]
    return [v for v in resolved if v in valid]


def parametrize(session: XlaSession, metafunc: pytest.Metafunc) -> None:
    """Parametrize the plugin's fixtures of one test function (see the module docstring)."""
    xcfg, registry = session.xcfg, session.backends
    names = metafunc.fixturenames
    if "xla_op" in names:  # the op suite: ops, backends and directions in one parametrization (ops/plugin.py)
        chosen = marker_values(metafunc.definition, "xla_backend")
        backends = _valid(chosen, registry.names(), registry.aliases) if chosen is not None else list(xcfg.backends)
        ops = session.config.pluginmanager.get_plugin("xla_dynamo_ops")
        assert ops is not None, "the op wing is registered with the session (plugin.CONCERNS)"
        ops.parametrize(metafunc, backends)
        return
    if "xla_model" in names:
        chosen = marker_values(metafunc.definition, "xla_models")
        models = _valid(chosen, zoo.model_names()) if chosen is not None else list(xcfg.models)
        metafunc.parametrize("xla_model", models, ids=models, indirect=True)
    if "xla_backend" in names:
        chosen = marker_values(metafunc.definition, "xla_backend")
        selected = (_valid(chosen, registry.names(), registry.aliases) if chosen is not None
                    else list(xcfg.backends))
        modes = [m for m in item_modes(metafunc.definition) if m in MODES]
        selected = [b for b in selected if all(registry.get(b).supports(m) for m in modes)]
        metafunc.parametrize("xla_backend", selected, ids=selected, indirect=True)
    if "tensor_mode" in names:
        chosen = marker_values(metafunc.definition, "xla_tensor_mode")
        tensor_modes = _valid(chosen, TENSOR_MODES) if chosen is not None else list(xcfg.tensor_modes)
        metafunc.parametrize("tensor_mode", tensor_modes, ids=tensor_modes, indirect=True)


def model_param(item: pytest.Item) -> str | None:
    """The ``xla_model`` parameter of ``item`` (None: not a zoo case)."""
    params = getattr(item, "callspec", None)
    model = params.params.get("xla_model") if params is not None else None
    return None if model is None else str(getattr(model, "name", model))


def deselect_modes(session: XlaSession, items: list[pytest.Item]) -> None:
    """Deselect tests whose ``xla_mode`` is not in ``--xla-modes``."""
    modes = session.xcfg.modes
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = item_modes(item)
        (drop if marked and not set(marked) <= set(modes) else keep).append(item)
    if drop:
        session.config.hook.pytest_deselected(items=drop)
        items[:] = keep


#: the order of a (model, mode)'s shared-case tests, by the fixture that runs them: parity first (its eager and
#: fp64 references run before the backend's case is built, never beside it), timing last (its eager baseline
#: case joins the backend's only then); everything else between
CASE_ORDER = {"xla_parity": 0, "xla_timing": 2}


def model_order(items: Sequence[pytest.Item], tier: str) -> list[str]:
    """The models of ``items``' shared-case tests, the largest first (:func:`sizes.largest_first`, counted on
    the meta device; equal and unknown sizes in the zoo's order; no torch imported for fewer than two models),
    then the zoo's other models."""
    every = zoo.model_names()
    shared = {model_param(item) for item in items if item.get_closest_marker("xla_shared_case") is not None}
    names = [n for n in every if n in shared]  # the zoo's order: kept for equal and unknown sizes
    if len(names) > 1:
        names = sizes.largest_first([zoo.get_model(n) for n in names], tier)
    return names + [n for n in every if n not in shared]


def order_by_model(items: list[pytest.Item], tier: str = "small") -> None:
    """Run the shared-case tests model by model, the largest model first (:func:`model_order`), within a model
    mode by mode, and within a mode parity first and timing last (:data:`CASE_ORDER`; stable otherwise), so
    each (model, mode)'s prepared cases are built and compiled once, freed before the next's, and never held
    beside a parity reference's runs, and what the process keeps of the models it ran never sits under the
    largest one's cases. Everything else runs after them, in its order: what a one-off test leaves in the
    process (torch_xla keeps every executable it compiled) does not sit under the zoo's largest case."""
    order = {name: i for i, name in enumerate(model_order(items, tier))}

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int, int]:
        index, item = pair
        model = model_param(item)
        if model is None or item.get_closest_marker("xla_shared_case") is None:
            return (len(order) + 1, -1, -1, index)  # everything else keeps its order, after the models
        modes = item_modes(item)
        mode = MODES.index(modes[0]) if len(modes) == 1 and modes[0] in MODES else len(MODES)
        fixtures = getattr(item, "fixturenames", ())
        rank = min((r for name, r in CASE_ORDER.items() if name in fixtures), default=1)
        return (order.get(model, len(order)), mode, rank, index)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


def arrange(session: XlaSession, items: list[pytest.Item]) -> None:
    """Mode selection, xdist groups and missing-stack skips (see the module docstring); the model order comes
    later (:func:`order_by_model`, from ``plugin.pytest_collection_finish``), once the CPU instruction-set cap is
    set: sizing the models on the meta device runs torch, which would choose its CPU kernels before the cap."""
    deselect_modes(session, items)
    reason = devices.skip_reason()
    for item in items:
        model = model_param(item)
        if model is not None:
            # all tests of one model share a worker and its prepared models
            item.add_marker(pytest.mark.xdist_group(name=f"xla-{model}"))
        if reason is not None and needs_xla(item):
            item.add_marker(pytest.mark.skip(reason=reason))
