"""Running a parity check: the eager reference (stored), the backend's run compared against it step by step, the vote.

Training: identical initial weights and inputs; ``steps`` of zero_grad, forward, loss, backward and
SGD step on the CPU eager reference and on the backend, one run at a time: eager's and its fp64 copy's
steps are stored (:mod:`.store`), then the backend steps and each step is compared as it comes, so a
process never holds the three runs together. Every tensor of every step is compared
(:mod:`.compare`); a divergence does not stop the run, so the result lists all of them. Inference: the
outputs. Statuses use pytorch's benchmark harness's vocabulary. A failure keeps its exception, with
the stage it surfaced in written on it (:mod:`pytest_xla_dynamo.core.stages`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import metrics
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.cases import PreparedCase, iter_live
from pytest_xla_dynamo.core.engine import CaseEngine
from pytest_xla_dynamo.core.stages import stage
from pytest_xla_dynamo.core.state import release_memory
from pytest_xla_dynamo.parity.compare import Divergence, Tolerance, compare_step, divergence_lines
from pytest_xla_dynamo.parity.offload import saved_on_disk
from pytest_xla_dynamo.parity.plain_math import plain_math
from pytest_xla_dynamo.parity.signatures import Observed, observe
from pytest_xla_dynamo.parity.store import StepStore
from pytest_xla_dynamo.records import vote

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
    # what the run kept for the registry's exact signatures (a known issue present below tolerance): .signatures
    observed: Observed | None = None

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
    """The eager CPU reference of a case: the steps of an fp32 run (whose second run from the initial weights
    must agree) and of its fp64 copy, stored (:mod:`.store`). Each run is stepped alone and freed before
    the next, so a check holds one model at a time."""

    eager: StepStore | None
    fp64: StepStore | None
    status: str = "pass"
    message: str = ""
    exception: BaseException | None = None

    def close(self) -> None:
        """Delete the stored steps."""
        for store in (self.eager, self.fp64):
            if store is not None:
                store.close()


def reference(engine: CaseEngine, spec: zoo.ModelSpec, mode: str, steps: int, extra_patches: Sequence[str] = (),
              cache: bool = True) -> Reference:
    """The eager reference of a case, built and checked once per (case, steps) and process (with
    ``cache``, in ``engine.references``, one (model, mode) at a time): two fp32 runs must agree (else
    ``eager_two_runs_differ``)."""
    __tracebackhide__ = True
    eager = engine.eager
    key = engine.key(spec, eager, mode, extra_patches)
    ref_key = (key, steps)
    cached = engine.references.get(ref_key) if cache else None
    if isinstance(cached, Reference):
        return cached
    if cache:
        engine.focus(key.model, key.mode)
    try:
        model, inputs = engine.initial(key, spec) if cache else engine.build(key, spec)
    except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
        ref = Reference(None, None, "model_fail_to_load", f"building {spec.name}: {exc!r}", exc)
    else:
        ref = _check_reference(key, spec, eager, model, inputs, steps)
    if cache:
        engine.references[ref_key] = ref
    return ref


def _stored_run(case: PreparedCase, steps: int) -> StepStore:
    """Run ``case`` (which is freed on return) and store its steps."""
    __tracebackhide__ = True
    store = StepStore()
    try:
        for tensors in iter_live(case, steps, EAGER_PHASE):
            store.add(tensors)
    finally:
        del case
        release_memory(reset_dynamo=False)  # a case is freed by the cycle collector: before the next run is built
    return store


def _second_run_differs(first: StepStore, second: PreparedCase, steps: int) -> str | None:
    """Where a second eager run from the initial weights differs from the stored first, else None."""
    __tracebackhide__ = True
    from torch._dynamo.utils import same

    try:
        for step, b in enumerate(iter_live(second, steps, EAGER_PHASE), start=1):
            a = first.step(step)
            for name in a:
                if not same(a[name], b[name], tol=0, equal_nan=True, log_error=lambda *x, **k: None):
                    return f"step {step}, {name}: two eager runs differ"
            a.release()
        return None
    finally:
        del second
        release_memory(reset_dynamo=False)


def _check_reference(key: Any, spec: zoo.ModelSpec, eager: Backend, model: torch.nn.Module,
                     inputs: tuple[torch.Tensor, ...], steps: int) -> Reference:
    """Run eager, store its steps; run it again and compare; run the fp64 copy and store its steps, all on
    eager's plain math path (:func:`.plain_math.plain_math`), their large activations waiting on disk for the
    backward (:func:`.offload.saved_on_disk`). One model is alive at a time beside ``model`` (the initial
    weights, which every run shares)."""
    __tracebackhide__ = True
    import torch

    first: StepStore | None = None
    try:
        # eager's fast paths off: a reference XLA can be judged against
        with plain_math(), saved_on_disk():
            first = _stored_run(PreparedCase(key, spec, eager, model, inputs), steps)
            differs = _second_run_differs(first, PreparedCase(key, spec, eager, model, inputs), steps)
            if differs:
                first.close()
                return Reference(None, None, "eager_two_runs_differ", differs)
            fp64 = _stored_run(PreparedCase(key, spec, eager, model, inputs, dtype=torch.float64), steps)
    except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
        if first is not None:
            first.close()
        return Reference(None, None, "eager_fail_to_run", f"eager {spec.name}: {exc!r}", exc)
    return Reference(first, fp64)


# --- running a check -----------------------------------------------------------------------------------------


def run(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance, *,
        extra_patches: Sequence[str] = (), shared: bool = True, steps: int | None = None) -> ParityResult:
    """Compare ``backend`` against eager for one case (``xla_accuracy_runs`` times, majority vote).

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
        result = _vote([_compare_run(ref.eager, ref.fp64, case, steps, tol, backend)
                        for _ in range(engine.xcfg.accuracy_runs)])
    finally:
        if not shared:
            ref.close()
    spent = metrics.snapshot().delta(before)
    result.compiles = spent.compiles
    result.compile_seconds = round(spent.seconds.get("CompileTime", 0.0), 3) if spent.compiles else None
    return result


def _compare_run(eager: StepStore, fp64: StepStore, case: PreparedCase, steps: int, tol: Tolerance,
                 backend: Backend) -> ParityResult:
    """Step the backend from the initial weights and compare every tensor of each step as it comes with the
    stored eager and fp64 steps (fp64 stays float64: same() applies its RMSE rule only to a float64
    reference). A divergence does not stop the steps: the result lists every one. What the registry's exact
    signatures read (step 1's BatchNorm running_vars) is kept on the result (:mod:`.signatures`)."""
    __tracebackhide__ = True
    observed = observe(case.model, case.initial_state, case.mode)
    res_run = iter_live(case, steps, PARITY_PHASE)
    divergences: list[Divergence] = []
    compared = 0
    any_value = False  # whether some reference tensor of some step held a value that is not NaN
    for step in range(1, steps + 1):
        try:
            res_step = next(res_run)
        except Exception as exc:  # recorded as fail_to_run, then re-raised by the caller
            return ParityResult("fail_to_run", f"{backend.name}: {exc!r}", step, tolerance=tol, exception=exc,
                                divergences=divergences)
        ref_step, fp64_step = eager.step(step), fp64.step(step)
        compared = len(ref_step)
        with stage("comparison", step=step, phase=PARITY_PHASE, backend=backend.name):
            divergences += compare_step(step, ref_step, res_step, fp64_step, tol)
        observed.record(step, ref_step, res_step)
        any_value = any_value or _has_value(ref_step)
        ref_step.release()
        fp64_step.release()
        del res_step
    if compared and not divergences and not any_value:
        message = (f"compared nothing: every value eager computed is NaN (all {compared} tensors of all {steps} "
                   "step(s)), and NaN equals NaN in the comparison; valid: weights and inputs the model computes "
                   "finite values for")
        return ParityResult("eager_fail_to_run", message, tolerance=tol, compared=compared, steps=steps)
    result = accuracy_result(divergences, compared, steps, tol)
    result.observed = observed
    return result


def _has_value(tensors: Any) -> bool:
    """Whether one of ``tensors`` (a step's, by name) holds a value that is not NaN (an integer tensor always does,
    a floating one unless it is NaN everywhere); read only up to the first that does."""
    import torch

    for tensor in tensors.values():
        if tensor.numel() and (not (tensor.is_floating_point() or tensor.is_complex())
                               or not bool(torch.isnan(tensor).all())):
            return True
    return False


def _vote(results: list[ParityResult]) -> ParityResult:
    if len(results) == 1:
        return results[0]
    status, flaky = vote([r.status for r in results])
    chosen = next(r for r in results if r.status == status)
    chosen.runs = [r.status for r in results]
    chosen.flaky = flaky
    return chosen
