"""Parity: a backend's training steps (or inference outputs) compared with CPU eager.

Training: identical initial weights and inputs; ``steps`` of zero_grad, forward, loss, backward and
SGD step on the CPU eager reference and on the backend; per step the loss, the outputs, every
gradient, every parameter after the step and every buffer are compared with
``torch._dynamo.utils.same`` against an fp64 reference, as pytorch's benchmark harness does
(``torch.testing.assert_close`` where a test sets ``xla_tolerance(atol=, rtol=)``). Inference: the
outputs. Statuses use the harness's vocabulary; the first diverging tensor is named with its numbers.
:class:`XlaParity` is the ``xla_parity`` fixture's object; the cases come from the case engine.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import metrics, zoo
from pytest_xla_dynamo.backends import Backend
from pytest_xla_dynamo.cases import PreparedCase, TensorSet, iter_trace
from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.engine import CaseEngine, case_mode
from pytest_xla_dynamo.records import CaseRecord, vote
from pytest_xla_dynamo.repro import repro_command

if TYPE_CHECKING:
    import torch

    from pytest_xla_dynamo.session import XlaSession

DEFAULT_TOLERANCE = 1e-4  # pytorch benchmarks/dynamo torchbench.py default for float32


class ParityError(AssertionError):
    """A backend's results differ from eager beyond the tolerance (status ``fail_accuracy``)."""


class EagerError(RuntimeError):
    """The eager reference itself failed (``eager_fail_to_run``, ``eager_two_runs_differ``)."""


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

    @property
    def ok(self) -> bool:
        return self.status == "pass"


# --- comparing ------------------------------------------------------------------------------------------


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    import torch

    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


def compare_tensor(name: str, ref: torch.Tensor, res: torch.Tensor, fp64: torch.Tensor | None,
                   tol: Tolerance) -> str | None:
    """None when ``res`` matches ``ref``; else a message with the numbers."""
    import torch
    from torch._dynamo.utils import same

    if ref.shape != res.shape or ref.dtype != res.dtype:
        return f"{name}: shape {tuple(res.shape)} {res.dtype}, eager has {tuple(ref.shape)} {ref.dtype}"
    if not (ref.is_floating_point() or ref.is_complex()):
        if torch.equal(ref, res):
            return None
        diff = int((ref != res).sum())
        return f"{name}: {diff} of {ref.numel()} integer elements differ"
    err = float((res.double() - ref.double()).abs().max()) if ref.numel() else 0.0
    if tol.atol is not None or tol.rtol is not None:
        try:
            torch.testing.assert_close(res, ref, atol=tol.atol, rtol=tol.rtol, equal_nan=True)
        except AssertionError as exc:
            first = str(exc).strip().splitlines()[0]
            return f"{name}: max abs err {err:.1e} > atol {tol.atol:.0e} (rtol {tol.rtol:.0e}): {first}"
        return None
    if same(ref, res, fp64_ref=fp64, tol=tol.tol, equal_nan=True, log_error=lambda *a, **k: None):
        return None
    detail = ""
    if fp64 is not None:
        detail = (f"; rmse(fp64, res) {_rmse(fp64, res):.2e} vs rmse(fp64, eager) {_rmse(fp64, ref):.2e}")
    return f"{name}: max abs err {err:.1e} > atol {tol.tol:.0e} (rtol {tol.tol:.0e}){detail}"


def compare_step(step: int, ref: TensorSet, res: TensorSet, fp64: TensorSet | None,
                 tol: Tolerance) -> tuple[str, str, float] | None:
    """The first diverging tensor of one step: (name, message, max abs err), or None when all match."""
    missing = [n for n in ref if n not in res]
    if missing:
        return missing[0], f"step {step}, {missing[0]}: missing in the backend's results", float("nan")
    for name, ref_t in ref.items():
        problem = compare_tensor(name, ref_t, res[name], fp64.get(name) if fp64 is not None else None, tol)
        if problem is not None:
            res_t = res[name]
            err = (float((res_t.double() - ref_t.double()).abs().max())
                   if ref_t.shape == res_t.shape and ref_t.numel() else float("nan"))
            return name, f"step {step}, {problem}", err
    return None


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
    from torch._dynamo.utils import same

    try:
        first = PreparedCase(key, spec, eager, model, inputs)
        second = PreparedCase(key, spec, eager, model, inputs)
        for step, (a, b) in enumerate(zip(iter_trace(first, steps), iter_trace(second, steps), strict=True),
                                      start=1):
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
    both afresh (a user's model, or a test proving that sharing changes nothing).
    """
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
    result.compiles = metrics.snapshot().delta(before).compiles
    return result


def _lockstep(eager: PreparedCase, fp64: PreparedCase, case: PreparedCase, steps: int, tol: Tolerance,
              backend: Backend) -> ParityResult:
    """Step eager, its fp64 copy and the backend together from the initial weights; compare each step
    as it comes (fp64 stays float64: same() applies its RMSE rule only to a float64 reference)."""
    ref_run, fp64_run, res_run = iter_trace(eager, steps), iter_trace(fp64, steps), iter_trace(case, steps)
    for step in range(1, steps + 1):
        try:
            ref_step, fp64_step = next(ref_run), next(fp64_run)
        except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
            return ParityResult("eager_fail_to_run", f"eager: {exc!r}", tolerance=tol, exception=exc)
        try:
            res_step = next(res_run)
        except Exception as exc:  # recorded as fail_to_run, then re-raised by the caller
            return ParityResult("fail_to_run", f"{backend.name}: {exc!r}", tolerance=tol, exception=exc)
        diff = compare_step(step, ref_step, res_step, fp64_step, tol)
        if diff is not None:
            name, message, err = diff
            return ParityResult("fail_accuracy", message, step, name, err, tol)
    return ParityResult("pass", tolerance=tol)


def _vote(results: list[ParityResult]) -> ParityResult:
    if len(results) == 1:
        return results[0]
    status, flaky = vote([r.status for r in results])
    chosen = next(r for r in results if r.status == status)
    chosen.runs = [r.status for r in results]
    chosen.flaky = flaky
    return chosen


# --- the fixture's object ----------------------------------------------------------------------------------


class XlaParity:
    """The ``xla_parity`` fixture: parity of zoo cases (``check_case``) and of a user's own models
    (``training``, ``inference``); every check is recorded and raises unless it passes."""

    def __init__(self, session: XlaSession, item: pytest.Item, default_backend: Callable[[], Backend],
                 tolerance_marker: Mapping[str, float] | None = None) -> None:
        self.session = session
        self.item = item
        self.engine = session.engine
        self._default_backend = default_backend
        self._tolerance_marker = tolerance_marker

    def _finish(self, spec: zoo.ModelSpec, backend: Backend, mode: str, result: ParityResult,
                check: bool) -> ParityResult:
        from pytest_xla_dynamo.known_issues import applied_issue

        xcfg = self.session.xcfg
        applied = applied_issue(self.item)
        known = applied.entry.id if applied is not None and applied.action == "xfail" else ""
        repro = repro_command(self.item.nodeid, xcfg, backend.name, registry_off=bool(known),
                              prefix=self.session.repro_prefix)
        self.session.record(self.item, CaseRecord(
            suite="parity", name=spec.name, backend=backend.name, mode=mode, status=result.status,
            repro=repro, message=result.message, dev=backend.device_kind, batch_size=spec.batch(xcfg.tier),
            tier=xcfg.tier, flaky=result.flaky, compiles=result.compiles, known_issue=known,
            extra={"tolerance": result.tolerance.describe(), "runs": result.runs, "tensor": result.tensor,
                   "max_abs_err": result.max_abs_err, "step": result.step}))
        if check and not result.ok:
            text = f"{result.status}: {result.message}\nreproduce: {repro}"
            if result.exception is not None:
                raise result.exception  # the real error, so strict xfail raises= can match it
            if result.status.startswith("eager"):
                raise EagerError(text)
            raise ParityError(text)
        return result

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str | None = None,
                   check: bool = True) -> ParityResult:
        """Run a zoo case (shared prepared models) and record its status; raise unless it passes.
        ``mode`` defaults to the test's ``xla_mode`` marker."""
        mode = case_mode(self.item, mode)
        if not backend.supports(mode):
            raise pytest.UsageError(f"backend {backend.name} does not support mode {mode!r}")
        tol = tolerance_for(spec, self.session.xcfg, self._tolerance_marker)
        result = run(self.engine, spec, backend, mode, tol)
        return self._finish(spec, backend, mode, result, check)

    def _user(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor],
              backend: Backend | str | None, mode: str, loss: Callable[[Any], torch.Tensor] | None,
              name: str | None, check: bool, steps: int | None) -> ParityResult:
        if backend is None:
            backend = self._default_backend()
        if isinstance(backend, str):
            backend = self.session.backends.get(backend)
        frozen_inputs = tuple(t.detach().clone() for t in inputs)
        batch = int(frozen_inputs[0].shape[0]) if frozen_inputs and frozen_inputs[0].dim() else 1
        spec = zoo.ModelSpec(
            name=name or str(getattr(model_factory, "__name__", "user_model")), source="user",
            build_model=lambda tier: model_factory(), build_inputs=lambda tier, bs: frozen_inputs,
            batch_size={"small": batch, "full": batch})
        if loss is not None:
            spec = dataclasses.replace(spec, loss=loss)
        tol = tolerance_for(spec, self.session.xcfg, self._tolerance_marker)
        result = run(self.engine, spec, backend, mode, tol, shared=False, steps=steps)
        return self._finish(spec, backend, mode, result, check)

    def training(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor], *,
                 backend: Backend | str | None = None, loss: Callable[[Any], torch.Tensor] | None = None,
                 name: str | None = None, steps: int | None = None, check: bool = True) -> ParityResult:
        """Training parity of ``model_factory()`` on ``inputs`` (raises ParityError unless it passes)."""
        return self._user(model_factory, inputs, backend, "train", loss, name, check, steps)

    def inference(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor], *,
                  backend: Backend | str | None = None, name: str | None = None,
                  check: bool = True) -> ParityResult:
        """Inference parity of ``model_factory()`` on ``inputs``."""
        return self._user(model_factory, inputs, backend, "infer", None, name, check, None)
