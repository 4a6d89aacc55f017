"""Running a parity check: the eager reference, the lock-step run of a backend against it, the vote.

Training: identical initial weights and inputs; ``steps`` of zero_grad, forward, loss, backward and
SGD step on the CPU eager reference and on the backend. Every tensor of every step is compared
(:mod:`.compare`); a divergence does not stop the run, so the result lists all of them. Inference: the
outputs. Statuses use pytorch's benchmark harness's vocabulary. A failure keeps its exception, with
the stage it surfaced in written on it (:mod:`pytest_xla_dynamo.triage.stages`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo import metrics, zoo
from pytest_xla_dynamo.backends import Backend
from pytest_xla_dynamo.cases import PreparedCase, iter_trace
from pytest_xla_dynamo.engine import CaseEngine
from pytest_xla_dynamo.parity.compare import Divergence, Tolerance, compare_step, divergence_lines
from pytest_xla_dynamo.records import vote
from pytest_xla_dynamo.triage.stages import stage

if TYPE_CHECKING:
    import torch

EAGER_PHASE = "eager reference"
PARITY_PHASE = "parity"


class ParityError(AssertionError):
    """A backend's results differ from eager beyond the tolerance (status ``fail_accuracy``);
    ``divergences`` lists every diverging tensor of every step."""

    def __init__(self, message: str, divergences: Sequence[Divergence] = ()) -> None:
        super().__init__(message)
        self.divergences = list(divergences)

    @property
    def diverging(self) -> list[str]:
        """The diverging tensors' names, each once, first divergence first."""
        return list(dict.fromkeys(d.tensor for d in self.divergences))


class EagerError(RuntimeError):
    """The eager reference itself failed (``eager_fail_to_run``, ``eager_two_runs_differ``)."""


# their public home (registry entries name ``pytest_xla_dynamo.parity.ParityError``)
ParityError.__module__ = EagerError.__module__ = "pytest_xla_dynamo.parity"


@dataclass
class ParityResult:
    status: str
    message: str = ""
    step: int | None = None
    tensor: str | None = None
    max_abs_err: float | None = None
    tolerance: Tolerance = field(default_factory=Tolerance)
    runs: list[str] = field(default_factory=list)
    flaky: bool = False
    exception: BaseException | None = None
    compiles: int | None = None  # XLA compilations this check caused (metrics.Snapshot.compiles)
    compile_seconds: float | None = None  # their summed time (torch_xla's CompileTime metric)
    divergences: list[Divergence] = field(default_factory=list)  # every diverging tensor, first first
    compared: int = 0  # tensors compared per step
    steps: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "pass"


def accuracy_result(divergences: list[Divergence], compared: int, steps: int, tol: Tolerance) -> ParityResult:
    """``pass``, or ``fail_accuracy`` naming the first divergence and listing all, grouped."""
    if not divergences:
        return ParityResult("pass", tolerance=tol, compared=compared, steps=steps)
    first = divergences[0]
    message = "\n".join([first.message, *divergence_lines(divergences, compared)])
    return ParityResult("fail_accuracy", message, first.step, first.tensor, first.max_abs_err, tol,
                        divergences=divergences, compared=compared, steps=steps)


# --- the eager reference ----------------------------------------------------------------------------------


@dataclass
class Reference:
    """The eager CPU reference of a case: an fp32 model (whose two runs from the initial weights must
    agree) and its fp64 copy. Both are stepped in lock-step with the backend, one step held at a time."""

    eager: PreparedCase | None
    fp64: PreparedCase | None
    status: str = "pass"
    message: str = ""
    exception: BaseException | None = None


def _fp64(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    model = copy.deepcopy(model).double()
    return model, tuple(t.double() if t.is_floating_point() else t for t in inputs)


def reference(engine: CaseEngine, spec: zoo.ModelSpec, mode: str, steps: int, extra_patches: Sequence[str] = (),
              cache: bool = True) -> Reference:
    """The eager reference models, built and checked once per (case, steps) and process (with
    ``cache``, in ``engine.references``): two fp32 runs must agree (else ``eager_two_runs_differ``)."""
    __tracebackhide__ = True
    eager = engine.eager
    key = engine.key(spec, eager, mode, extra_patches)
    ref_key = (key, steps)
    if cache and ref_key in engine.references:
        return engine.references[ref_key]
    for old in [k for k in engine.references if k[0].model != key.model]:
        del engine.references[old]
    try:
        model, inputs = engine.build(key, spec)
    except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
        ref = Reference(None, None, "model_fail_to_load", f"building {spec.name}: {exc!r}", exc)
    else:
        ref = _check_reference(key, spec, eager, model, inputs, steps)
    if cache:
        engine.references[ref_key] = ref
    return ref


def _check_reference(key: Any, spec: zoo.ModelSpec, eager: Backend, model: torch.nn.Module,
                     inputs: tuple[torch.Tensor, ...], steps: int) -> Reference:
    __tracebackhide__ = True
    from torch._dynamo.utils import same

    try:
        first = PreparedCase(key, spec, eager, model, inputs)
        second = PreparedCase(key, spec, eager, model, inputs)
        for step, (a, b) in enumerate(zip(iter_trace(first, steps, EAGER_PHASE),
                                          iter_trace(second, steps, EAGER_PHASE), strict=True), start=1):
            for name in a:
                if not same(a[name], b[name], tol=0, equal_nan=True, log_error=lambda *x, **k: None):
                    return Reference(None, None, "eager_two_runs_differ",
                                     f"step {step}, {name}: two eager runs differ")
    except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
        return Reference(None, None, "eager_fail_to_run", f"eager {spec.name}: {exc!r}", exc)
    del second
    fp64_model, fp64_inputs = _fp64(model, inputs)
    return Reference(first, PreparedCase(key, spec, eager, fp64_model, fp64_inputs))


# --- running a check -----------------------------------------------------------------------------------------


def run(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance, *,
        extra_patches: Sequence[str] = (), shared: bool = True, steps: int | None = None) -> ParityResult:
    """Compare ``backend`` against eager for one case (``--xla-accuracy-runs`` times, majority vote).

    ``shared``: use (and keep) the process's prepared case and eager reference; otherwise build
    both afresh (a user's model, a triage rerun, or a test proving that sharing changes nothing).
    """
    __tracebackhide__ = True
    steps = steps or (engine.xcfg.steps if mode == "train" else 1)
    ref = reference(engine, spec, mode, steps, extra_patches, cache=shared)
    if ref.status != "pass":
        return ParityResult(ref.status, ref.message, tolerance=tol, exception=ref.exception)
    before = metrics.snapshot()
    try:
        case = (engine.prepared(spec, backend, mode, extra_patches) if shared
                else engine.fresh(spec, backend, mode, extra_patches))
    except Exception as exc:  # recorded as fail_to_run, then re-raised by the caller
        result = ParityResult("fail_to_run", f"{backend.name}: {exc!r}", tolerance=tol, exception=exc)
    else:
        assert ref.eager is not None and ref.fp64 is not None
        result = _vote([_lockstep(ref.eager, ref.fp64, case, steps, tol, backend)
                        for _ in range(engine.xcfg.accuracy_runs)])
    spent = metrics.snapshot().delta(before)
    result.compiles = spent.compiles
    result.compile_seconds = round(spent.seconds.get("CompileTime", 0.0), 3) if spent.compiles else None
    return result


def _lockstep(eager: PreparedCase, fp64: PreparedCase, case: PreparedCase, steps: int, tol: Tolerance,
              backend: Backend) -> ParityResult:
    """Step eager, its fp64 copy and the backend together from the initial weights; compare every
    tensor of each step as it comes (fp64 stays float64: same() applies its RMSE rule only to a float64
    reference). A divergence does not stop the steps: the result lists every one."""
    __tracebackhide__ = True
    ref_run = iter_trace(eager, steps, EAGER_PHASE)
    fp64_run = iter_trace(fp64, steps, EAGER_PHASE)
    res_run = iter_trace(case, steps, PARITY_PHASE)
    divergences: list[Divergence] = []
    compared = 0
    for step in range(1, steps + 1):
        try:
            ref_step, fp64_step = next(ref_run), next(fp64_run)
        except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
            return ParityResult("eager_fail_to_run", f"eager: {exc!r}", step, tolerance=tol, exception=exc)
        try:
            res_step = next(res_run)
        except Exception as exc:  # recorded as fail_to_run, then re-raised by the caller
            return ParityResult("fail_to_run", f"{backend.name}: {exc!r}", step, tolerance=tol, exception=exc,
                                divergences=divergences)
        compared = len(ref_step)
        with stage("comparison", step=step, phase=PARITY_PHASE, backend=backend.name):
            divergences += compare_step(step, ref_step, res_step, fp64_step, tol)
    return accuracy_result(divergences, compared, steps, tol)


def _vote(results: list[ParityResult]) -> ParityResult:
    if len(results) == 1:
        return results[0]
    status, flaky = vote([r.status for r in results])
    chosen = next(r for r in results if r.status == status)
    chosen.runs = [r.status for r in results]
    chosen.flaky = flaky
    return chosen
