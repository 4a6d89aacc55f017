"""What a model runs: its module calls and its ``torch.nn.functional`` calls, in execution order.

A forward of the model on the CPU under a :class:`~torch.overrides.TorchFunctionMode` that notes every call of a
``torch.nn.functional`` function (with the module whose forward made it, and its float arguments such as ``p`` or
``dropout_p``), beside forward hooks that note every module call as it finishes. The triage reads it to name what
lies between two modules (an ``F.elu`` in a parent's forward, an ``nn.ELU`` without parameters) and which random ops
a model draws (``nn.Dropout`` modules, ``F.dropout``, ``nn.MultiheadAttention``'s float ``dropout``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: the float arguments of a functional call kept with it (a dropout's probability, by name or by position)
FLOAT_ARGUMENTS = ("p", "dropout_p")
_DROPOUTS = ("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d")
#: function -> {position: argument} of the arguments kept (a float) or read (``training``) when passed by position
POSITIONS: dict[str, dict[int, str]] = {
    **{name: {1: "p", 2: "training"} for name in _DROPOUTS},
    "multi_head_attention_forward": {10: "dropout_p", 13: "training"},
    "scaled_dot_product_attention": {4: "dropout_p"},
}
#: functions that are not in torch.nn.functional's module (C functions exported there)
EXPORTED = ("scaled_dot_product_attention",)


@dataclass(frozen=True)
class Event:
    """One call: a module finishing (``kind`` "module", ``what`` its type) or a functional call (``kind`` "call",
    ``what`` the function's name, ``name`` the module whose forward made it, "" for the model itself)."""

    kind: str
    name: str
    what: str
    floats: tuple[tuple[str, float], ...] = ()
    has_params: bool = False  # a module with parameters of its own (not its children's)
    training: bool | None = None  # a functional call's ``training`` argument, where it has one


@dataclass
class Census:
    events: list[Event] = field(default_factory=list)

    def modules(self) -> list[Event]:
        return [e for e in self.events if e.kind == "module"]

    def between(self, name: str) -> list[Event]:
        """The calls that run after module ``name`` finishes and before the next module with parameters of its own
        finishes, and the calls within ``name`` (its parameterless submodules, its functional calls): what carries
        the gradient into ``name``'s parameters from the last module whose gradients match."""
        done = next((i for i, e in enumerate(self.events) if e.kind == "module" and e.name == name), None)
        if done is None:
            return []
        inside = [e for e in self.events[:done] if _within(e.name, name) and not e.has_params]
        after = []
        for e in self.events[done + 1:]:
            if e.kind == "module" and e.has_params:
                break
            after.append(e)
        return [*inside, *after]


#: functional calls that draw random numbers when their probability is > 0 (and their ``training``, if any, is on)
RANDOM_CALLS = (*_DROPOUTS, "multi_head_attention_forward", "scaled_dot_product_attention")
#: module types whose own random call ``dropout_to_identity`` switches off (the module is swapped or its rate zeroed)
PATCHED_TYPES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
                 "MultiheadAttention")


def random_calls(census: Census, *, patchable: bool = False) -> list[str]:
    """The functional calls of ``census`` that draw random numbers, as ``"module (function p=...)"``: a dropout with
    ``p > 0`` in training, attention with ``dropout_p > 0`` (in training). Without ``patchable``, only those no patch
    reaches (made in a model's own forward, not by an ``nn.Dropout*`` or ``nn.MultiheadAttention`` module)."""
    types = {e.name: e.what for e in census.modules()}
    found = []
    for event in census.events:
        if event.kind != "call" or event.what not in RANDOM_CALLS or event.training is False:
            continue
        rate = next((v for k, v in event.floats if k in FLOAT_ARGUMENTS and v > 0.0), None)
        if rate is None or (not patchable and types.get(event.name) in PATCHED_TYPES):
            continue
        argument = next(k for k, v in event.floats if v == rate)
        found.append(f"{event.name or '(model)'} ({event.what} {argument}={rate:g})")
    return list(dict.fromkeys(found))


def random_ops(model: torch.nn.Module, inputs: Sequence[Any], train: bool) -> list[str]:
    """:func:`random_calls` no patch reaches, from a census of one forward of ``model`` on ``inputs`` (``train``: in
    training, else eval), the RNG states kept. A forward that fails here is left to the case's own run to report."""
    import torch

    with torch.random.fork_rng(devices=[]):
        try:
            census = take(model, inputs, train)
        except Exception:  # the case's own run raises it again, with its stage
            return []
    return random_calls(census)


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer + ".") or not outer


def _argument(name: str, key: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    if key in kwargs:
        return kwargs[key]
    index = next((i for i, k in POSITIONS.get(name, {}).items() if k == key), None)
    return args[index] if index is not None and index < len(args) else None


def _floats(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    found = {key: _argument(name, key, args, kwargs) for key in FLOAT_ARGUMENTS}
    return tuple((k, float(v)) for k, v in found.items() if isinstance(v, int | float) and not isinstance(v, bool))


def _training(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> bool | None:
    value = _argument(name, "training", args, kwargs)
    if value is None and "training" in POSITIONS.get(name, {}).values():
        return True  # the function's default
    return value if isinstance(value, bool) else None


def _functional(func: Any) -> str:
    """The name of ``func`` where it is a function of ``torch.nn.functional``, else ""."""
    name = getattr(func, "__name__", "")
    if getattr(func, "__module__", None) == "torch.nn.functional" or name in EXPORTED:
        return str(name)
    return ""


def take(model: torch.nn.Module, inputs: Sequence[Any], train: bool) -> Census:
    """The census of one forward of ``model`` (a CPU copy's, in ``train`` or eval mode) on ``inputs``."""
    import copy

    import torch
    from torch.overrides import TorchFunctionMode

    census = Census()
    stack: list[str] = []
    model = copy.deepcopy(model).train(train)

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = _functional(func)
            if name:
                census.events.append(Event("call", stack[-1] if stack else "", name, _floats(name, args, kwargs),
                                           training=_training(name, args, kwargs)))
            return func(*args, **kwargs)

    def pre(name: str) -> Any:
        return lambda module, args: stack.append(name)

    def post(name: str) -> Any:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            stack.pop()
            own = any(True for _ in module.parameters(recurse=False))
            census.events.append(Event("module", name, type(module).__name__, has_params=own))
        return hook

    handles = [h for name, module in model.named_modules()
               for h in (module.register_forward_pre_hook(pre(name)), module.register_forward_hook(post(name)))]
    try:
        with Mode(), torch.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return census
