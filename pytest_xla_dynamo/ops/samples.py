"""An OpInfo sample as a call: its tensors as flat leaves, moved between devices, and the gradients of a case.

A sample is ``op(sample.input, *sample.args, **sample.kwargs)`` with tensors anywhere in that structure;
:func:`call_of` flattens it (``torch.utils._pytree``) into the tensor leaves and a function of them, so
that the same function runs on CPU eager, lazy tensors and under ``torch.compile`` (which then sees the
tensors as its inputs and the rest of the sample as constants).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Call:
    """``fn(*leaves)`` calls the op on the sample with ``leaves`` in place of its tensors."""

    fn: Callable[..., Any]
    leaves: list[torch.Tensor]


def call_of(op: Callable[..., Any] | None, sample: Any, device: Any = None) -> Call:
    """The call of ``op`` on ``sample``; ``device``: where it runs, for the sample's device arguments (a sample
    built for the CPU names ``cpu`` in ``to``, ``new_*`` and the like: on XLA they name the XLA device)."""
    import torch
    from torch.utils import _pytree as pytree

    flat, spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
    if device is not None and str(device) != "cpu":
        flat = [torch.device(device) if is_cpu_device(v) else v for v in flat]
    positions = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
    leaves = [flat[i] for i in positions]

    def fn(*tensors: torch.Tensor) -> Any:
        values = list(flat)
        for i, t in zip(positions, tensors, strict=False):
            values[i] = t
        inp, args, kwargs = pytree.tree_unflatten(values, spec)
        assert op is not None
        return op(inp, *args, **kwargs)

    return Call(fn, leaves)


def is_cpu_device(value: Any) -> bool:
    """Whether a non-tensor argument names the CPU device (``"cpu"`` or ``torch.device("cpu")``)."""
    import torch

    return (isinstance(value, torch.device) and value.type == "cpu") or (isinstance(value, str) and value == "cpu")


def moved(leaves: Sequence[torch.Tensor], device: Any) -> list[torch.Tensor]:
    """Fresh copies of ``leaves`` on ``device``, each a leaf that requires grad where the original did (copies on the
    CPU too: an in-place op must not change the sample the next run takes)."""
    return [copied(t, device).requires_grad_(t.requires_grad) for t in leaves]


def copied(t: torch.Tensor, device: Any) -> torch.Tensor:
    """A copy of ``t`` on ``device``; on the CPU a view keeps its place in a copy of its base (a sample such as
    ``as_strided.partial_views`` indexes the base's storage), which lazy tensors, having no storage, cannot."""
    if str(device) == "cpu" and t._base is not None:
        return t._base.detach().clone().as_strided(t.size(), t.stride(), t.storage_offset())
    return t.detach().clone().to(device)


def as_fp64(sample: Any) -> Any:
    """The sample with its float32 tensors as float64 (requires_grad kept)."""
    import torch

    return sample.transform(lambda t: t.detach().double().requires_grad_(t.requires_grad)
                            if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t)


def tensors(output: Any) -> list[torch.Tensor]:
    """The tensors of an op's output, in order (a tuple, a named tuple, a list, one tensor)."""
    import torch
    from torch.utils import _pytree as pytree

    return [v for v in pytree.tree_leaves(output) if isinstance(v, torch.Tensor)]


def to_cpu(outputs: Sequence[torch.Tensor], device: Any) -> list[torch.Tensor]:
    """The outputs on the CPU, detached; on XLA after one sync (one graph for the whole sample)."""
    if str(device) != "cpu":
        import torch_xla

        torch_xla.sync()
    return [t.detach().cpu() for t in outputs]


def cotangent(t: torch.Tensor, seed: int) -> torch.Tensor:
    """A seeded random cotangent for the real output ``t`` (on the CPU, its shape and dtype; fp64 runs get the
    same values)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.dtype)


def as_real(t: torch.Tensor) -> torch.Tensor:
    """A complex output as its real and imaginary parts (``view_as_real``); a real one as it is."""
    import torch

    return torch.view_as_real(t) if t.is_complex() else t


def gradients(outputs: Sequence[torch.Tensor], leaves: Sequence[torch.Tensor], seed: int,
              device: Any) -> list[torch.Tensor] | None:
    """The gradients of ``sum(output * cotangent)`` w.r.t. the floating leaves that require grad (zeros for an
    input the outputs do not depend on; a complex output counts by its real and imaginary parts); None where no
    output requires grad."""
    import torch

    wanted = [as_real(t) for t in outputs if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    inputs = [t for t in leaves if t.requires_grad]
    if not wanted or not inputs:
        return None
    loss = torch.stack([(o * cotangent(o, seed + i).to(device)).sum() for i, o in enumerate(wanted)]).sum()
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    found = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs, strict=False)]
    return to_cpu(found, device)
