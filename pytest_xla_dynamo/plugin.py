"""pytest-xla-dynamo: the pytest plugin (entry point ``xla_dynamo``; ``-p no:xla_dynamo`` turns it off).

This module imports no torch: the fixtures and hooks that need torch import it when they run.
Each concern lives in its own module (config, backends, devices, tensor_modes, patches, zoo, parity,
timing, graphs, known_issues, report, gating); this one wires them into pytest.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import backends as _backends
from pytest_xla_dynamo import config as _config
from pytest_xla_dynamo import devices, hookspecs, patches, zoo
from pytest_xla_dynamo.isolation import xla_subprocess  # noqa: F401  (fixture: a snippet in a fresh interpreter)
from pytest_xla_dynamo.records import WORKEROUTPUT_KEY, get_store

if TYPE_CHECKING:
    from pytest_xla_dynamo.backends import Backend
    from pytest_xla_dynamo.tensor_modes import TensorMode

MARKERS = (
    "xla: the test needs torch and torch_xla (skipped with a reason where they are missing)",
    "xla_backend(*names): backends for the xla_backend fixture of this test (overrides --xla-backend)",
    "xla_mode(mode): the test's mode, 'train' or 'infer': backends that do not support it are not "
    "parametrized",
    "xla_models(*names): models for the xla_model fixture of this test (overrides --xla-models)",
    "xla_tensor_mode(*modes): tensor modes for the tensor_mode fixture (overrides --xla-tensor-mode)",
    "xla_patch(*names): op patches active during this test (adds to --xla-patch)",
    "xla_tolerance(atol=None, rtol=None, tol=None): parity tolerance for this test",
    "xla_seed(seed): seed for this test (overrides --xla-seed)",
    "xla_known_issue(id, **entry): this test reproduces a known issue (strict xfail where affected)",
    "xla_isolated: run this test in a fresh interpreter (a crash is reported, not fatal)",
    "xla_shared_case: the test reuses the plugin's prepared (compiled) models: dynamo is not reset",
    "xdist_group(name): pytest-xdist's group (the plugin groups each model's tests on one worker)",
)

# Fixtures whose use makes a test an XLA test (skipped without torch_xla, isolated per test).
XLA_FIXTURES = frozenset({"xla_device", "xla_backend", "tensor_mode", "xla_parity", "xla_case",
                          "xla_model"})

_marker_errors_key = pytest.StashKey[list[str]]()
_registry_key = pytest.StashKey["_backends.BackendRegistry"]()


# --- options and configuration ---------------------------------------------------------------------


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    registry = _backends.default_registry()
    _config.add_options(parser, {"backends": ", ".join(registry.names()),
                                 "patches": ", ".join(patches.patch_names())})


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    devices.default_pjrt_device()
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    registry = _backends.default_registry()
    config.hook.pytest_xla_register_backends(registry=registry)
    config.hook.pytest_xla_register_models(register=zoo.register_model)
    config.hook.pytest_xla_register_patches(register=patches.register_patch)
    config.stash[_registry_key] = registry
    config.stash[_marker_errors_key] = []
    xcfg = _config.resolve(config, backends=registry.names(), backend_aliases=registry.aliases,
                           models=zoo.model_names(), patches=patches.patch_names())
    config.stash[_config.xla_config_key] = xcfg
    for alias in set(_config.split_list(_config.raw_value(config, _config.OPTIONS_BY_DEST["xla_backend"])[0])):
        if alias in registry.aliases:
            config.issue_config_time_warning(pytest.PytestConfigWarning(_backends.SEED_ALIAS_NOTE.format(
                alias=alias, name=registry.aliases[alias])), stacklevel=2)
    get_store(config)
    _use_loadgroup(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "xla_dynamo_xdist")
    for module_name, class_name in _SUBPLUGINS:
        module = __import__(f"pytest_xla_dynamo.{module_name}", fromlist=[class_name])
        config.pluginmanager.register(getattr(module, class_name)(config), f"xla_dynamo_{module_name}")


# Concern modules that bring hooks of their own: (module, plugin class taking the config).
_SUBPLUGINS: tuple[tuple[str, str], ...] = (
    ("known_issues", "KnownIssuesPlugin"),
    ("isolation", "IsolationPlugin"),
    ("report", "ReportPlugin"),
    ("gating", "GatingPlugin"),
)


def _use_loadgroup(config: pytest.Config) -> None:
    """Keep each model's tests on one worker: ``-n N`` without ``--dist`` schedules by xdist_group."""
    if getattr(config.option, "dist", "no") == "load" and not any(
            a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args):
        config.option.dist = "loadgroup"


def xla_config(config: pytest.Config) -> _config.XlaConfig:
    return _config.get_config(config)


def backend_registry(config: pytest.Config) -> _backends.BackendRegistry:
    return config.stash.get(_registry_key, None) or _backends.default_registry()


def pytest_report_header(config: pytest.Config) -> list[str]:
    xcfg = xla_config(config)
    versions = []
    from importlib import metadata

    for dist in ("torch", "torch_xla"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} not installed")
    return [
        f"xla-dynamo: backends={','.join(xcfg.backends)} tier={xcfg.tier} seed={xcfg.seed} "
        f"PJRT_DEVICE={os.environ.get('PJRT_DEVICE', '')} ({'; '.join(versions)})",
    ]


# --- parametrization ---------------------------------------------------------------------------------


def _marker_values(metafunc: pytest.Metafunc, name: str) -> list[str] | None:
    marker = metafunc.definition.get_closest_marker(name)
    if marker is None:
        return None
    values: list[str] = []
    for arg in marker.args:
        values.extend([arg] if isinstance(arg, str) else list(arg))
    return values


def _validated(metafunc: pytest.Metafunc, marker: str, values: list[str], valid: list[str],
               aliases: dict[str, str] | None = None) -> list[str]:
    good: list[str] = []
    bad: list[str] = []
    for value in values:
        value = (aliases or {}).get(value, value)
        (good if value in valid else bad).append(value)
    if bad:
        metafunc.config.stash[_marker_errors_key].append(
            f"{metafunc.definition.nodeid}: @pytest.mark.{marker}: invalid value "
            f"{', '.join(map(repr, bad))}; valid: {', '.join(valid)}")
    return good


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    xcfg = xla_config(config)
    registry = backend_registry(config)
    names = metafunc.fixturenames
    if "xla_model" in names:
        chosen = _marker_values(metafunc, "xla_models")
        models = (_validated(metafunc, "xla_models", chosen, zoo.model_names()) if chosen is not None
                  else list(xcfg.models))
        metafunc.parametrize("xla_model", models, ids=models, indirect=True)
    if "xla_backend" in names:
        chosen = _marker_values(metafunc, "xla_backend")
        selected = (_validated(metafunc, "xla_backend", chosen, registry.names(), registry.aliases)
                    if chosen is not None else list(xcfg.backends))
        mode = metafunc.definition.get_closest_marker("xla_mode")
        if mode is not None:
            _validated(metafunc, "xla_mode", list(mode.args), list(_config.MODES))
            selected = [b for b in selected if all(registry.get(b).supports(m) for m in mode.args
                                                   if m in _config.MODES)]
        metafunc.parametrize("xla_backend", selected, ids=selected, indirect=True)
    if "tensor_mode" in names:
        chosen = _marker_values(metafunc, "xla_tensor_mode")
        modes = (_validated(metafunc, "xla_tensor_mode", chosen, list(_config.TENSOR_MODES))
                 if chosen is not None else list(xcfg.tensor_modes))
        metafunc.parametrize("tensor_mode", modes, ids=modes, indirect=True)


def _needs_xla(item: pytest.Item) -> bool:
    return item.get_closest_marker("xla") is not None or bool(
        XLA_FIXTURES.intersection(getattr(item, "fixturenames", ())))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    errors = config.stash.get(_marker_errors_key, [])
    for item in items:
        for marker in item.iter_markers("xla_patch"):
            bad = [n for n in marker.args if n not in patches.patch_names()]
            if bad:
                errors.append(f"{item.nodeid}: @pytest.mark.xla_patch: invalid value "
                              f"{', '.join(map(repr, bad))}; valid: {', '.join(patches.patch_names())}")
    if errors:
        raise pytest.UsageError("\n".join(dict.fromkeys(errors)))
    _deselect_modes(config, items)
    _order_by_model(items)
    reason = devices.skip_reason()
    for item in items:
        params = getattr(item, "callspec", None)
        model = params.params.get("xla_model") if params is not None else None
        if model is not None:
            # all tests of one model share a worker and its prepared models
            item.add_marker(pytest.mark.xdist_group(name=f"xla-{model}"))
        if reason is not None and _needs_xla(item):
            item.add_marker(pytest.mark.skip(reason=reason))


def _deselect_modes(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect tests whose ``xla_mode`` is not in ``--xla-modes``."""
    modes = xla_config(config).modes
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("xla_mode")
        (drop if marker is not None and not set(marker.args) <= set(modes) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _order_by_model(items: list[pytest.Item]) -> None:
    """Run the shared-case tests model by model (stable otherwise), so each model's prepared cases
    are built once and freed before the next model's."""
    order = {name: i for i, name in enumerate(zoo.model_names())}

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = pair
        params = getattr(item, "callspec", None)
        model = params.params.get("xla_model") if params is not None else None
        if model is None or item.get_closest_marker("xla_shared_case") is None:
            return (-1, index)  # everything else keeps its place, first
        return (order.get(model, len(order)), index)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


# --- the runtime and per-test isolation --------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Bring the XLA runtime up before the first test that may run torch (pytorch/xla#4174: a CPU
    backward before the runtime is up breaks every later XLA backward), where torch_xla is installed.

    "May run torch": torch is already imported (by a test module, a conftest or a fixture) or the test
    uses the plugin's XLA fixtures. A session that never imports torch never pays for the runtime.
    """
    if (devices.xla_available() and not devices.runtime_up() and item.get_closest_marker("skip") is None
            and ("torch" in sys.modules or _needs_xla(item))):
        devices.ensure_runtime()


@pytest.fixture(autouse=True)
def _xla_isolation(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each XLA test starts from a known state and leaves global state as it found it."""
    item = request.node
    if not isinstance(item, pytest.Item) or not _needs_xla(item) or not devices.xla_available():
        yield
        return
    from pytest_xla_dynamo import state

    seed_marker = item.get_closest_marker("xla_seed")
    seed = int(seed_marker.args[0]) if seed_marker else xla_config(request.config).seed
    with state.clean_state(seed, reset_dynamo=item.get_closest_marker("xla_shared_case") is None):
        yield


@pytest.fixture(autouse=True)
def _xla_active_patches(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Patches from ``--xla-patch`` / ``REPLACE_MAXPOOL`` and ``@pytest.mark.xla_patch``, undone after."""
    names = list(xla_config(request.config).patches)
    for marker in request.node.iter_markers("xla_patch"):
        names.extend(marker.args)
    if not names:
        yield []
        return
    with patches.apply_patches(names) as active:
        yield active


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def xla_config_obj(request: pytest.FixtureRequest) -> _config.XlaConfig:
    """The session's resolved options (:class:`pytest_xla_dynamo.config.XlaConfig`)."""
    return xla_config(request.config)


@pytest.fixture(scope="session")
def xla_device() -> Any:
    """This process's XLA device (``torch_xla.device()``); each xdist worker has its own."""
    reason = devices.skip_reason()
    if reason:
        pytest.skip(reason)
    return devices.ensure_runtime()


@pytest.fixture
def xla_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test, parametrized from ``--xla-backend`` (ids: the backend name)."""
    name = getattr(request, "param", None) or xla_config(request.config).backends[0]
    return backend_registry(request.config).get(name)


@pytest.fixture
def tensor_mode(request: pytest.FixtureRequest) -> TensorMode:
    """The tensor mode, parametrized from ``--xla-tensor-mode`` (``eager`` or ``fake``)."""
    from pytest_xla_dynamo.tensor_modes import get_tensor_mode

    return get_tensor_mode(getattr(request, "param", None) or xla_config(request.config).tensor_modes[0])


@pytest.fixture
def xla_model(request: pytest.FixtureRequest) -> zoo.ModelSpec:
    """The model spec under test, parametrized from ``--xla-models`` (ids: the model name)."""
    spec = zoo.get_model(request.param)
    missing = spec.missing_requirements()
    if missing:
        pytest.skip(f"model {spec.name} needs {', '.join(missing)}: pip install {' '.join(missing)}")
    return spec


@pytest.fixture
def xla_patches(_xla_active_patches: list[str]) -> Iterator[patches.PatchController]:
    """Patch control for a test: ``xla_patches.apply("maxpool_to_avgpool", model=m)`` as a context
    manager, ``xla_patches.patch_model(m)`` to apply the active patches to a model built earlier."""
    controller = patches.PatchController(_xla_active_patches)
    yield controller
    controller.close()


@pytest.fixture
def xla_parity(request: pytest.FixtureRequest) -> Any:
    """The parity engine: ``xla_parity.check_case(spec, backend, mode)`` for zoo cases,
    ``xla_parity.training(model_factory, inputs)`` / ``.inference(...)`` for your own models."""
    if devices.skip_reason():
        pytest.skip(devices.skip_reason() or "")
    from pytest_xla_dynamo.parity import XlaParity

    return XlaParity(request)


# --- xdist ------------------------------------------------------------------------------------------


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class XdistHooks:
    """Hooks that exist only with pytest-xdist: the workers' records reach the controller."""

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        text = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if text:
            get_store(node.config).loads(text)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if is_worker(config):
        config.workeroutput[WORKEROUTPUT_KEY] = get_store(config).dumps()  # type: ignore[attr-defined]
