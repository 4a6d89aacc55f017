"""A model owner's case: a model factory, positional and keyword inputs, targets and a loss, as a ModelSpec.

``xla_parity.training(factory, inputs, kwargs={"mask": m}, targets=y, loss=F.cross_entropy)`` and
``xla_graphs.check(factory, inputs, ...)`` build their case here, so that the parity check and the graph check of
one's own model run the same model on the same inputs. The engines call ``model(*inputs)`` and ``loss(out)``:

* keyword inputs ride as extra positional inputs (so they are moved to the device and, floating, made fp64 for
  the reference like the others) and a forward pre-hook on the model gives them back their names, so the model's
  parameter names (and the tensors parity names) stay the model's own;
* targets stay out of the model: the loss gets them on the output's device and in its floating dtype (one copy
  per device and dtype), ``loss(out, targets)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo import zoo

if TYPE_CHECKING:
    import torch


def _frozen(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(_frozen(v) for v in value)
    return value


def _with_keywords(model: torch.nn.Module, names: Sequence[str]) -> torch.nn.Module:
    """``model`` called with ``len(names)`` extra trailing positional inputs passes them as those keywords."""
    count = len(names)
    names = list(names)

    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        # plain loops: dynamo traces this hook with the model, and counts a generator expression or a set operation
        # on dict keys as unimplemented (recovered, but reported as a partial capture)
        if len(args) < count:  # count > 0: only a case with keyword inputs gets the hook
            return args, kwargs
        for name in names:
            if name in kwargs:  # called by name (a direct call): as it is
                return args, kwargs
        named = dict(kwargs)
        for name, value in zip(names, args[len(args) - count:], strict=True):
            named[name] = value
        return args[:len(args) - count], named

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return model


def _targets_loss(loss: Callable[[Any, Any], torch.Tensor], targets: Any) -> Callable[[Any], torch.Tensor]:
    """``loss(out)`` for the engines: ``loss(out, targets)`` with the targets on ``out``'s device (floating ones in
    its floating dtype: fp64 for the fp64 reference)."""
    import torch
    import torch.utils._pytree as pytree

    copies: dict[tuple[str, str], Any] = {}

    def placed(out: Any) -> Any:
        first = next((t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)), None)
        if first is None:
            return targets
        key = (str(first.device), str(first.dtype))
        if key not in copies:
            copies[key] = pytree.tree_map(
                lambda t: t.to(first.device, dtype=first.dtype if t.is_floating_point() and
                               first.is_floating_point() else t.dtype) if isinstance(t, torch.Tensor) else t,
                targets)
        return copies[key]

    def bound(out: Any) -> torch.Tensor:
        return loss(out, placed(out))

    return bound


#: the description of every spec :func:`user_spec` makes: how the engine tells the own-model API's cases (whose
#: refusals name ``has_dropout=`` of ``xla_parity.training``) from registered specs (``ModelSpec.has_dropout``)
OWN_CASE = "a model owner's case (xla_parity.training / .inference, xla_graphs.check)"


def is_own_case(spec: zoo.ModelSpec) -> bool:
    """Whether ``spec`` is a case of the own-model API (:func:`user_spec`), not a registered model."""
    return spec.source == "user" and spec.description == OWN_CASE


def user_spec(model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor], *,
              name: str | None = None, kwargs: Mapping[str, torch.Tensor] | None = None, targets: Any = None,
              loss: Callable[..., torch.Tensor] | None = None, has_dropout: bool = False) -> zoo.ModelSpec:
    """The ModelSpec of a model owner's case (see the module docstring); both tiers build the same model and
    inputs. ``loss``: ``loss(out)``, or ``loss(out, targets)`` when ``targets`` are given (then it is required).
    ``has_dropout``: the model draws random numbers in training (dropout modules, attention dropout) that
    ``dropout_to_identity`` switches off for the case (under ``xla_dropout=identity``, the default)."""
    if targets is not None and loss is None:
        raise ValueError("targets need a loss: pass loss=lambda out, targets: ... (e.g. "
                         "torch.nn.functional.cross_entropy)")
    keywords = dict(kwargs or {})
    names = list(keywords)
    frozen = tuple(_frozen(t) for t in inputs) + tuple(_frozen(keywords[n]) for n in names)
    batch = int(frozen[0].shape[0]) if frozen and getattr(frozen[0], "dim", lambda: 0)() else 1

    def build(tier: str) -> torch.nn.Module:
        model = model_factory()
        return _with_keywords(model, names) if names else model

    spec = zoo.ModelSpec(name=name or str(getattr(model_factory, "__name__", "user_model")), source="user",
                         build_model=build, build_inputs=lambda tier, bs: frozen,
                         batch_size={"small": batch, "full": batch}, has_dropout=bool(has_dropout),
                         description=OWN_CASE)
    if targets is not None:
        assert loss is not None
        return dataclasses.replace(spec, loss=_targets_loss(loss, _frozen(targets)))
    if loss is not None:
        return dataclasses.replace(spec, loss=loss)
    return spec
