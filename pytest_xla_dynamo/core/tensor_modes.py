"""Tensor modes: run a model's forward and backward with real XLA tensors or under FakeTensorMode.

``eager`` runs real tensors on the XLA device (lazy, executed at ``torch_xla.sync()``); ``fake``
runs the same forward and backward under ``torch._subclasses.FakeTensorMode`` with XLA-device fake
parameters and inputs, so nothing executes on XLA: it checks shapes, dtypes and devices without a
compile (the seed's "Check failed: xtensor != nullptr" class of bugs, and a fast zoo smoke check).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.core.constants import TENSOR_MODES

if TYPE_CHECKING:
    import torch

# (name, shape, dtype, device) of each output and gradient
Signature = list[tuple[str, tuple[int, ...], str, str]]


def _flatten(out: Any) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _signature(outputs: Any, grads: dict[str, Any]) -> Signature:
    sig: Signature = []
    for i, t in enumerate(_flatten(outputs)):
        sig.append((f"output[{i}]", tuple(t.shape), str(t.dtype), t.device.type))
    for name, g in grads.items():
        if g is not None:
            sig.append((f"grad {name}", tuple(g.shape), str(g.dtype), g.device.type))
    return sig


def forward_backward(model: torch.nn.Module, inputs: Sequence[torch.Tensor],
                     loss_fn: Callable[[Any], torch.Tensor]) -> tuple[Any, dict[str, Any]]:
    """One forward, loss and backward; returns the outputs and the gradients by parameter name."""
    import torch

    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    out = model(*inputs)
    grads = torch.autograd.grad(loss_fn(out), list(params.values()), allow_unused=True)
    return out, dict(zip(params, grads, strict=True))


@dataclass(frozen=True)
class TensorMode:
    """A way to run tensors: ``eager`` (real XLA tensors) or ``fake`` (FakeTensorMode, no execution)."""

    name: str

    @property
    def executes(self) -> bool:
        return self.name == "eager"

    def run(self, model: torch.nn.Module, inputs: Sequence[torch.Tensor],
            loss_fn: Callable[[Any], torch.Tensor], device: torch.device) -> Signature:
        """Forward and backward of a copy of ``model`` on ``device`` in this mode; its signature."""
        import torch

        from pytest_xla_dynamo.core.cases import place

        model = place(copy.deepcopy(model), device)
        xla_inputs = [t.to(device) for t in inputs]
        if self.name == "eager":
            out, grads = forward_backward(model, xla_inputs, loss_fn)
            if device.type == "xla":
                import torch_xla

                torch_xla.sync()
            return _signature(out, grads)
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=False) as mode:
            state = {n: mode.from_tensor(t) for n, t in [*model.named_parameters(), *model.named_buffers()]}
            fake_inputs = [mode.from_tensor(t) for t in xla_inputs]
            params = {n: state[n] for n, p in model.named_parameters() if p.requires_grad}
            fake_out = torch.func.functional_call(model, dict[str, torch.Tensor](state), tuple(fake_inputs))
            fake_grads = torch.autograd.grad(loss_fn(fake_out), list(params.values()), allow_unused=True)
            return _signature(fake_out, dict(zip(params, fake_grads, strict=True)))


def get_tensor_mode(name: str) -> TensorMode:
    if name not in TENSOR_MODES:
        raise ValueError(f"unknown tensor mode {name!r}; valid: {', '.join(TENSOR_MODES)}")
    return TensorMode(name)


def compare_signatures(reference: Signature, got: Signature, device: torch.device) -> list[str]:
    """Differences between the CPU eager signature and the one on ``device`` (empty when equal)."""
    problems = []
    ref = {name: (shape, dtype) for name, shape, dtype, _ in reference}
    seen = {name for name, *_ in got}
    for name in ref.keys() - seen:
        problems.append(f"{name}: missing (eager has shape {ref[name][0]}, dtype {ref[name][1]})")
    for name, shape, dtype, dev in got:
        if name not in ref:
            problems.append(f"{name}: unexpected (not in the eager run)")
            continue
        if (shape, dtype) != ref[name]:
            problems.append(f"{name}: shape {shape} dtype {dtype}, eager has {ref[name][0]} {ref[name][1]}")
        if dev != device.type:
            problems.append(f"{name}: on device {dev}, expected {device.type}")
    return sorted(problems)


def check_model(model: torch.nn.Module, inputs: Sequence[torch.Tensor], loss_fn: Callable[[Any], torch.Tensor],
                mode: TensorMode, device: torch.device) -> list[str]:
    """Run ``model`` in ``mode`` on ``device`` and compare its signature with a CPU eager run."""
    import torch

    reference = TensorMode("eager").run(model, inputs, loss_fn, torch.device("cpu"))
    return compare_signatures(reference, mode.run(model, inputs, loss_fn, device), device)
