"""Op patches: named, undoable rewrites of ``torch.nn`` modules (the seed's hand-made workarounds).

A patch works at two levels: at class level, models built while it is active get the replacement
(``torch.nn.MaxPool2d`` is swapped in the ``torch.nn`` namespace); at instance level, an existing
model's submodules are swapped in place. Both are undone on exit, also when the body raises.
Built in: ``maxpool_to_avgpool`` and ``dropout_to_identity``, in :data:`PATCHES` (the process's
:class:`~pytest_xla_dynamo.registries.NamedRegistry` of patches). Register more with :func:`register_patch` or
the ``pytest_xla_register_patches`` hook. No torch at import, no pytest: a test's
patches are activated by :func:`pytest_xla_dynamo.markers.for_test`.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.registries import NamedRegistry

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Patch:
    """A named patch.

    ``replacements()`` returns ``{class name in torch.nn: replacement class}`` for the class level;
    ``rewrite(module)`` returns the replacement for one submodule, or None to keep it.
    """

    name: str
    description: str
    replacements: Callable[[], dict[str, type]]
    rewrite: Callable[[Any], Any | None]


class UnknownPatchError(ValueError):
    pass


#: the process's patches: the built-ins below and a project's (``pytest_xla_register_patches``)
PATCHES: NamedRegistry[Patch] = NamedRegistry(
    "patch", Patch, unknown=lambda name, valid: UnknownPatchError(f"unknown patch {name!r}; valid: {', '.join(valid)}"))


def register_patch(patch: Patch, *, replace: bool = False) -> None:
    """Add a patch to the registry (ValueError when another patch has the name, unless ``replace``)."""
    PATCHES.register(patch, replace=replace)


def patch_names() -> list[str]:
    return PATCHES.names()


def get_patch(name: str) -> Patch:
    return PATCHES.get(name)


# --- maxpool_to_avgpool ----------------------------------------------------------------------------


@cache
def _avgpool_classes() -> dict[str, type]:
    """``MaxPoolNd`` look-alikes that are ``AvgPoolNd`` (same kernel, stride, padding, ceil_mode)."""
    from torch import nn

    def make(dim: int) -> type:
        base = getattr(nn, f"AvgPool{dim}d")

        def __init__(self: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                     return_indices: bool = False, ceil_mode: bool = False) -> None:
            if return_indices or dilation not in (1, (1,) * dim):
                raise ValueError(f"maxpool_to_avgpool: MaxPool{dim}d(dilation={dilation}, "
                                 f"return_indices={return_indices}) has no AvgPool{dim}d equivalent")
            base.__init__(self, kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode)

        return type(f"AvgPool{dim}d", (base,), {"__init__": __init__, "__module__": __name__,
                                                "__qualname__": f"AvgPool{dim}d"})

    return {f"MaxPool{d}d": make(d) for d in (1, 2, 3)}


def _maxpool_rewrite(module: Any) -> Any | None:
    from torch.nn.modules import pooling  # the original classes, also while the class level is patched

    for dim in (1, 2, 3):
        if isinstance(module, getattr(pooling, f"MaxPool{dim}d")):
            cls = _avgpool_classes()[f"MaxPool{dim}d"]
            return cls(module.kernel_size, module.stride, module.padding, module.dilation,
                       module.return_indices, module.ceil_mode)
    return None


# --- dropout_to_identity ---------------------------------------------------------------------------


@cache
def _identity_dropout() -> type:
    """``nn.Identity`` that still answers ``.p`` (0.0) and ``.inplace``: transformers' BERT reads
    ``self.dropout.p`` at run time."""
    from torch import nn

    class DropoutIdentity(nn.Identity):
        p = 0.0
        inplace = False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

    DropoutIdentity.__module__ = __name__
    return DropoutIdentity


_DROPOUT_NAMES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")


# stochastic depth drops whole residual branches at random in training (torchvision's StochasticDepth,
# timm's DropPath): the same RNG problem as dropout, so the same patch switches it off
_STOCHASTIC_DEPTH = {"StochasticDepth": "p", "DropPath": "drop_prob"}


def is_stochastic_depth(module: Any) -> bool:
    """Whether ``module`` is torchvision's ``StochasticDepth`` or timm's ``DropPath`` with a drop rate > 0
    (recognised by class name: neither library is imported)."""
    attr = _STOCHASTIC_DEPTH.get(type(module).__name__)
    return attr is not None and float(getattr(module, attr, 0.0) or 0.0) > 0.0


# layer drop skips whole layers at random in training: torchaudio's wav2vec2/WavLM/HuBERT encoder
# (``components.Transformer``) draws ``torch.rand(1).item()`` per layer, at every rate (a graph break under
# dynamo even at 0), so the patch runs its layers without the draw
_LAYER_DROP_CLASS = ("torchaudio.models.wav2vec2.components", "Transformer")


def is_layer_drop(module: Any) -> bool:
    """Whether ``module`` is torchaudio's wav2vec2 encoder stack (recognised by class, torchaudio not imported)."""
    cls = type(module)
    return (cls.__module__, cls.__name__) == _LAYER_DROP_CLASS


class RandomOpsError(ValueError):
    """A case refused before it ran: its model draws random numbers that eager and XLA draw differently (a test's
    or a spec's problem, never an upstream one: the triage proposes no known-issue entry for it)."""


def is_attention_dropout(module: Any) -> bool:
    """Whether ``module`` is an ``nn.MultiheadAttention`` whose attention dropout (a float, not a module) is > 0."""
    from torch.nn.modules.activation import MultiheadAttention  # the original class

    return isinstance(module, MultiheadAttention) and float(module.dropout or 0.0) > 0.0


def random_modules(model: torch.nn.Module) -> list[str]:
    """The submodules of ``model`` that draw random numbers in training, as ``"name (Class p=...)"``: every
    ``nn.Dropout*`` with ``p > 0`` (also those ``nn.Transformer*`` layers build), every ``nn.MultiheadAttention``
    with an attention dropout > 0, every stochastic depth with a drop rate > 0 and every torchaudio layer drop
    (what ``dropout_to_identity`` switches off; dropout and stochastic depth with a rate of 0 are deterministic;
    layer drop draws at every rate). In eval none of them draws."""
    from torch.nn.modules.dropout import _DropoutNd

    found = []
    for name, module in model.named_modules():
        if isinstance(module, _DropoutNd) and float(module.p) > 0.0:
            found.append(f"{name or '(model)'} ({type(module).__name__} p={module.p:g})")
        elif is_attention_dropout(module):
            found.append(f"{name or '(model)'} ({type(module).__name__} dropout={float(module.dropout):g})")
        elif is_stochastic_depth(module):
            rate = float(getattr(module, _STOCHASTIC_DEPTH[type(module).__name__]))
            found.append(f"{name or '(model)'} ({type(module).__name__} p={rate:g})")
        elif is_layer_drop(module):
            found.append(f"{name or '(model)'} ({type(module).__name__} layer_drop={float(module.layer_drop):g})")
    return found


_NO_LAYER_DROP: dict[type, type] = {}


def _without_layer_drop(cls: type) -> type:
    """A subclass of torchaudio's encoder stack whose forward runs every layer, drawing nothing: its
    ``forward`` at ``layer_drop=0`` without the ``torch.rand(1).item()`` (torchaudio 2.9's code); one per class."""
    if cls in _NO_LAYER_DROP:
        return _NO_LAYER_DROP[cls]

    def forward(self: Any, x: Any, attention_mask: Any = None, position_bias: Any = None) -> Any:
        x = self._preprocess(x)
        for layer in self.layers:
            x, position_bias = layer(x, attention_mask, position_bias=position_bias)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        return x

    sub = _NO_LAYER_DROP[cls] = type(f"{cls.__name__}WithoutLayerDrop", (cls,),
                                     {"forward": forward, "__module__": __name__})
    return sub


def _no_layer_drop(module: Any) -> Any:
    """``module`` as a :func:`_without_layer_drop` instance sharing its submodules and parameters (``layer_drop``
    0), so that undoing the swap gives the original back."""
    new: Any = object.__new__(_without_layer_drop(type(module)))
    new.__dict__.update(module.__dict__)  # the same _modules and _parameters dicts: patches inside apply to both
    new.layer_drop = 0.0
    return new


def _no_attention_dropout(module: Any) -> Any:
    """``module`` (an ``nn.MultiheadAttention``) as an instance of its class sharing its submodules and parameters,
    with attention dropout 0, so that undoing the swap gives the original (and its rate) back."""
    new: Any = object.__new__(type(module))
    new.__dict__.update(module.__dict__)  # the same _modules and _parameters dicts
    new.dropout = 0.0
    return new


def _dropout_rewrite(module: Any) -> Any | None:
    from torch.nn.modules import dropout  # the original classes, also while the class level is patched

    if isinstance(module, tuple(getattr(dropout, n) for n in _DROPOUT_NAMES)) or is_stochastic_depth(module):
        return _identity_dropout()()
    if is_layer_drop(module):
        return _no_layer_drop(module)
    if is_attention_dropout(module):
        return _no_attention_dropout(module)
    return None


register_patch(Patch(
    "maxpool_to_avgpool",
    "every nn.MaxPool1d/2d/3d becomes the matching nn.AvgPool* (same kernel, stride, padding, ceil_mode)",
    _avgpool_classes, _maxpool_rewrite))
register_patch(Patch(
    "dropout_to_identity",
    "every nn.Dropout*, torchvision StochasticDepth and timm DropPath becomes nn.Identity (answering .p == 0.0); "
    "nn.MultiheadAttention's attention dropout becomes 0 (instance level: also inside nn.Transformer* layers); "
    "torchaudio's wav2vec2 encoder runs every layer (no layer drop)",
    lambda: {n: _identity_dropout() for n in _DROPOUT_NAMES}, _dropout_rewrite))


# --- applying --------------------------------------------------------------------------------------


def patch_module(model: torch.nn.Module, names: Sequence[str], stack: contextlib.ExitStack) -> int:
    """Swap ``model``'s submodules in place for the patches ``names``; undone when ``stack`` closes.

    Returns the number of submodules swapped.
    """
    patches = [get_patch(n) for n in names]
    swapped = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            new = None
            for patch in patches:
                new = patch.rewrite(child)
                if new is not None:
                    break
            if new is None:
                continue
            new.train(child.training)
            setattr(parent, child_name, new)
            stack.callback(setattr, parent, child_name, child)
            swapped += 1
    return swapped


@contextlib.contextmanager
def apply_patches(names: Iterable[str], models: Iterable[torch.nn.Module] = ()) -> Iterator[list[str]]:
    """Activate patches: class level for models built inside, instance level for ``models``."""
    names = list(dict.fromkeys(names))
    patches = [get_patch(n) for n in names]  # validate before touching anything
    with contextlib.ExitStack() as stack:
        if patches:
            from torch import nn

            for patch in patches:
                for attr, replacement in patch.replacements().items():
                    stack.callback(setattr, nn, attr, getattr(nn, attr))
                    setattr(nn, attr, replacement)
            for model in models:
                patch_module(model, names, stack)
        yield names


TORCH_HINT = "pip install torch==2.9.0 (or run the README's set-up command)"


def torch_missing() -> bool:
    """Whether torch is not installed (checked without importing it)."""
    return importlib.util.find_spec("torch") is None


class PatchController:
    """What the ``xla_patches`` fixture gives a test: the active patch names, and ways to apply more.

    Everything applied through it is undone when the test ends, also when it fails.
    """

    def __init__(self, active: Sequence[str]) -> None:
        self.active = list(active)
        self._stack = contextlib.ExitStack()

    def apply(self, *names: str, model: torch.nn.Module | None = None) -> contextlib.AbstractContextManager[list[str]]:
        """A context manager activating ``names`` (class level, and on ``model`` if given)."""
        return apply_patches(names, [model] if model is not None else [])

    def patch_model(self, model: torch.nn.Module, *names: str) -> torch.nn.Module:
        """Apply ``names`` (default: the active patches) to a model built earlier, until the test ends."""
        patch_module(model, list(names) or self.active, self._stack)
        return model

    def close(self) -> None:
        self._stack.close()
