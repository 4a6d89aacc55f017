"""Comparing a backend's tensors with eager's: the tolerance of a case, one tensor, and a whole step.

Every tensor of a step is compared (loss, outputs, gradients, parameters, buffers, in that order) with
``torch._dynamo.utils.same`` against an fp64 reference, as pytorch's benchmark harness does
(``torch.testing.assert_close`` where a test sets ``xla_tolerance(atol=, rtol=)``). What diverges is
kept whole, as :class:`Divergence` entries, so that a known divergence (a BatchNorm buffer) cannot hide
a new one (a gradient at step 2): :func:`divergence_lines` reports them grouped, first divergence first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.config import XlaConfig

if TYPE_CHECKING:
    import torch

DEFAULT_TOLERANCE = 1e-4  # pytorch benchmarks/dynamo torchbench.py default for float32
#: the groups of a step's tensors, in the harness's order
GROUPS = ("loss", "outputs", "grads", "params", "buffers")
_PREFIXES = (("grad ", "grads"), ("param ", "params"), ("buffer ", "buffers"), ("output", "outputs"))


@dataclass(frozen=True)
class Tolerance:
    """``tol`` for ``same()``; or ``atol``/``rtol`` for ``torch.testing.assert_close``."""

    tol: float = DEFAULT_TOLERANCE
    atol: float | None = None
    rtol: float | None = None
    source: str = "default"

    def describe(self) -> str:
        if self.atol is not None or self.rtol is not None:
            return f"assert_close(atol={self.atol}, rtol={self.rtol}) [{self.source}]"
        return f"same(tol={self.tol:g}) [{self.source}]"


def tolerance_for(spec: zoo.ModelSpec, xcfg: XlaConfig, marker: Mapping[str, float] | None = None) -> Tolerance:
    """The tolerance of a case: the ``xla_tolerance`` marker's (validated at collection), else
    ``--xla-tolerance``, else the model's, else the default."""
    if marker:
        if "tol" in marker:
            return Tolerance(tol=float(marker["tol"]), source="marker")
        return Tolerance(atol=float(marker["atol"]), rtol=float(marker["rtol"]), source="marker")
    if xcfg.tolerance is not None:
        return Tolerance(tol=xcfg.tolerance, source="--xla-tolerance")
    if spec.tolerance is not None:
        return Tolerance(tol=spec.tolerance, source=f"model: {spec.tolerance_reason}")
    return Tolerance()


def group_of(tensor: str) -> str:
    """The group (one of :data:`GROUPS`) of a tensor name as :func:`pytest_xla_dynamo.core.cases.collect` names it."""
    if tensor == "loss":
        return "loss"
    return next((group for prefix, group in _PREFIXES if tensor.startswith(prefix)), "outputs")


@dataclass(frozen=True)
class Divergence:
    """One tensor of one step beyond the tolerance: ``problem`` says by how much (with the numbers)."""

    step: int
    tensor: str
    problem: str
    max_abs_err: float = math.nan

    @property
    def group(self) -> str:
        return group_of(self.tensor)

    @property
    def message(self) -> str:
        return f"step {self.step}, {self.problem}"

    def to_dict(self) -> dict[str, Any]:
        err = None if math.isnan(self.max_abs_err) else self.max_abs_err
        return {"step": self.step, "tensor": self.tensor, "group": self.group, "max_abs_err": err,
                "problem": self.problem}


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    import torch

    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


def max_abs_err(ref: torch.Tensor, res: torch.Tensor) -> float:
    """max |res - ref| (nan where shapes differ or the tensors are empty)."""
    if ref.shape != res.shape or not ref.numel():
        return math.nan
    return float((res.double() - ref.double()).abs().max())


SLICE_ELEMENTS = 2**22  # a large tensor's allclose runs over slices of this many elements


def allclose(ref: torch.Tensor, res: torch.Tensor, tol: float) -> bool:
    """``torch.allclose(ref, res, atol=tol, rtol=tol, equal_nan=True)`` (the first check ``same()`` makes),
    over slices of a large tensor: the same answer, with one slice's temporaries instead of the tensor's."""
    import torch

    a, b = ref.reshape(-1), res.reshape(-1)
    return all(torch.allclose(a[i:i + SLICE_ELEMENTS], b[i:i + SLICE_ELEMENTS], atol=tol, rtol=tol, equal_nan=True)
               for i in range(0, a.numel(), SLICE_ELEMENTS))


Fp64 = Union["torch.Tensor", Callable[[], "torch.Tensor | None"], None]


def compare_tensor(name: str, ref: torch.Tensor, res: torch.Tensor, fp64: Fp64, tol: Tolerance) -> str | None:
    """None when ``res`` matches ``ref``; else a message with the numbers. ``fp64``: the fp64 reference,
    or a function that loads it (called only where ``same()`` needs it: allclose did not pass)."""
    import torch
    from torch._dynamo.utils import same

    if ref.shape != res.shape or ref.dtype != res.dtype:
        return f"{name}: shape {tuple(res.shape)} {res.dtype}, eager has {tuple(ref.shape)} {ref.dtype}"
    if not (ref.is_floating_point() or ref.is_complex()):
        if torch.equal(ref, res):
            return None
        diff = int((ref != res).sum())
        return f"{name}: {diff} of {ref.numel()} integer elements differ"
    if tol.atol is not None or tol.rtol is not None:
        try:
            torch.testing.assert_close(res, ref, atol=tol.atol, rtol=tol.rtol, equal_nan=True)
        except AssertionError as exc:
            first = str(exc).strip().splitlines()[0]
            return (f"{name}: max abs err {_max_err(ref, res):.1e} > atol {tol.atol:.0e} (rtol {tol.rtol:.0e}): "
                    f"{first}")
        return None
    if allclose(ref, res, tol.tol):
        return None
    fp64_t = fp64() if callable(fp64) else fp64
    if same(ref, res, fp64_ref=fp64_t, tol=tol.tol, equal_nan=True, log_error=lambda *a, **k: None):
        return None
    detail = ""
    if fp64_t is not None:
        detail = (f"; rmse(fp64, res) {_rmse(fp64_t, res):.2e} vs rmse(fp64, eager) {_rmse(fp64_t, ref):.2e}")
    return f"{name}: max abs err {_max_err(ref, res):.1e} > atol {tol.tol:.0e} (rtol {tol.tol:.0e}){detail}"


def _max_err(ref: torch.Tensor, res: torch.Tensor) -> float:
    return max_abs_err(ref, res) if ref.numel() else 0.0


def compare_step(step: int, ref: Mapping[str, torch.Tensor], res: Mapping[str, torch.Tensor],
                 fp64: Mapping[str, torch.Tensor] | None, tol: Tolerance) -> list[Divergence]:
    """Every diverging tensor of one step, in the harness's order (empty when all match); the fp64
    tensors are read only where a comparison needs them."""
    found = [Divergence(step, name, f"{name}: missing in the backend's results") for name in ref if name not in res]
    for name, ref_t in ref.items():
        if name not in res:
            continue
        res_t = res[name]
        fp64_t = None if fp64 is None else (lambda n=name: fp64.get(n))
        problem = compare_tensor(name, ref_t, res_t, fp64_t, tol)
        if problem is not None:
            found.append(Divergence(step, name, problem, max_abs_err(ref_t, res_t)))
    return found


def _err(d: Divergence) -> str:
    return "?" if math.isnan(d.max_abs_err) else f"{d.max_abs_err:.1e}"


def divergence_lines(divergences: Sequence[Divergence], compared: int = 0, per_group: int = 4) -> list[str]:
    """The divergences grouped (loss, outputs, grads, params, buffers), each group's worst first, with
    the steps they were seen in, then the groups that match; ``compared``: tensors compared per step."""
    if not divergences:
        return []
    steps = sorted({d.step for d in divergences})
    where = f"step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}"
    of = f"; {compared} compared per step" if compared else ""
    first = divergences[0]
    lines = [f"diverging tensors: {len(divergences)} ({where}{of}); first: step {first.step}, {first.tensor}"]
    width = max(len(g) for g in GROUPS)
    matching = [g for g in GROUPS if not any(d.group == g for d in divergences)]
    for group in GROUPS:
        members = [d for d in divergences if d.group == group]
        if not members:
            continue
        worst = sorted(members, key=lambda d: -d.max_abs_err if not math.isnan(d.max_abs_err) else 0.0)
        names = dict.fromkeys(d.tensor for d in worst)
        shown = ", ".join(f"{n} ({_err(next(d for d in worst if d.tensor == n))})" for n in list(names)[:per_group])
        more = f", +{len(names) - per_group} more" if len(names) > per_group else ""
        at = sorted({d.step for d in members})
        lines.append(f"  {group:<{width}}  {len(members)} at step {', '.join(map(str, at))}: {shown}{more}")
    if matching:
        lines.append(f"  {'match':<{width}}  {', '.join(matching)}")
    return lines
