"""The parity engine: a backend's training steps (or inference outputs) against CPU eager.

Training: identical initial weights and inputs; ``steps`` of zero_grad, forward, loss, backward and
SGD step on the CPU eager reference and on the backend; per step the loss, the outputs, every
gradient, every parameter after the step and every buffer are compared with
``torch._dynamo.utils.same`` against an fp64 reference, as pytorch's benchmark harness does
(``torch.testing.assert_close`` where a test sets ``xla_tolerance(atol=, rtol=)``). Inference: the
outputs. Statuses use the harness's vocabulary; the first diverging tensor is named with its numbers.
"""

from __future__ import annotations

import copy
import dataclasses
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import metrics, zoo
from pytest_xla_dynamo.backends import Backend
from pytest_xla_dynamo.cases import CaseCache, CaseKey, PreparedCase, build_inputs, build_model
from pytest_xla_dynamo.config import DEFAULT_SEED, XlaConfig, get_config
from pytest_xla_dynamo.records import CaseRecord, record_case

if TYPE_CHECKING:
    import torch

DEFAULT_TOLERANCE = 1e-4  # pytorch benchmarks/dynamo torchbench.py default for float32
TensorSet = dict[str, "torch.Tensor"]


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


# --- collecting and comparing -------------------------------------------------------------------------


def _leaves(out: Any) -> list[torch.Tensor]:
    import torch
    import torch.utils._pytree as pytree

    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def collect(model: torch.nn.Module, out: Any, loss: Any, mode: str) -> TensorSet:
    """The tensors compared after a step, on CPU, in the harness's order:
    loss, outputs, gradients, parameters, buffers (training); outputs (inference)."""
    def snap(t: torch.Tensor) -> torch.Tensor:
        # a copy: on CPU .cpu() would alias the live parameter that the next step updates in place
        return t.detach().to("cpu", copy=True)

    tensors: TensorSet = {}
    if loss is not None:
        tensors["loss"] = snap(loss)
    for i, t in enumerate(_leaves(out)):
        tensors[f"output[{i}]"] = snap(t)
    if mode == "train":
        for name, p in model.named_parameters():
            if p.grad is not None:
                tensors[f"grad {name}"] = snap(p.grad)
        for name, p in model.named_parameters():
            tensors[f"param {name}"] = snap(p)
        for name, b in model.named_buffers():
            tensors[f"buffer {name}"] = snap(b)
    return tensors


def iter_trace(case: PreparedCase, steps: int) -> Iterator[TensorSet]:
    """Reset ``case`` to its initial weights, run ``steps`` steps and yield each one's tensors
    (a generator, so that a caller comparing step by step holds one step at a time)."""
    case.reset()
    for _ in range(steps):
        out, loss = case.step()
        yield collect(case.model, out, loss, case.mode)


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


# --- the engine ---------------------------------------------------------------------------------------


def _fp64(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    model = copy.deepcopy(model).double()
    return model, tuple(t.double() if t.is_floating_point() else t for t in inputs)


@dataclass
class Reference:
    """The eager CPU reference of a case: an fp32 model (whose two runs from the initial weights must
    agree) and its fp64 copy. Both are stepped in lock-step with the backend, one step held at a time."""

    eager: PreparedCase | None
    fp64: PreparedCase | None
    status: str = "pass"
    message: str = ""
    exception: BaseException | None = None


def repro_command(nodeid: str, xcfg: XlaConfig, backend: str) -> str:
    """A command that reproduces just this case."""
    args = ["pytest", nodeid, f"--xla-backend={backend}", f"--xla-tier={xcfg.tier}"]
    if xcfg.seed != DEFAULT_SEED:
        args.append(f"--xla-seed={xcfg.seed}")
    if xcfg.steps != 2:
        args.append(f"--xla-steps={xcfg.steps}")
    if xcfg.dropout != "identity":
        args.append(f"--xla-dropout={xcfg.dropout}")
    if xcfg.randomize_input:
        args.append("--xla-randomize-input")
    if xcfg.tolerance is not None:
        args.append(f"--xla-tolerance={xcfg.tolerance:g}")
    if xcfg.patches:
        args.append(f"--xla-patch={','.join(xcfg.patches)}")
    return shlex.join(args)


class ParityEngine:
    """Per-process engine: prepared cases and eager references, shared by the suites."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.cases = CaseCache()
        self._references: dict[tuple[Any, ...], Reference] = {}

    @property
    def xcfg(self) -> XlaConfig:
        return get_config(self.config)

    def patch_names(self, spec: zoo.ModelSpec, extra: Sequence[str] = ()) -> tuple[str, ...]:
        names = list(self.xcfg.patches) + list(extra)
        if spec.has_dropout and self.xcfg.dropout == "identity":
            names.append("dropout_to_identity")
        return tuple(dict.fromkeys(names))

    def key(self, spec: zoo.ModelSpec, backend: Backend, mode: str, extra_patches: Sequence[str] = ()) -> CaseKey:
        x = self.xcfg
        return CaseKey(spec.name, backend.name, mode, x.tier, x.seed, self.patch_names(spec, extra_patches),
                       x.randomize_input)

    def _build(self, key: CaseKey, spec: zoo.ModelSpec) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        return (build_model(spec, key.tier, key.seed, key.patches),
                build_inputs(spec, key.tier, key.seed, key.randomize_input))

    def prepared(self, spec: zoo.ModelSpec, backend: Backend, mode: str,
                 extra_patches: Sequence[str] = ()) -> PreparedCase:
        """The shared prepared case (built, placed and wrapped once per process), warmed up."""
        key = self.key(spec, backend, mode, extra_patches)

        def make() -> PreparedCase:
            model, inputs = self._build(key, spec)
            return PreparedCase(key, spec, backend, model, inputs)

        case = self.cases.get(key, make)
        case.warm_up()
        return case

    def reference(self, spec: zoo.ModelSpec, mode: str, steps: int, extra_patches: Sequence[str] = (),
                  cache: bool = True) -> Reference:
        """The eager reference models, built and checked once per (case, steps) and process (with
        ``cache``): two fp32 runs must agree (else ``eager_two_runs_differ``)."""
        from pytest_xla_dynamo.backends import BUILTIN_BACKENDS

        eager = next(b for b in BUILTIN_BACKENDS if b.name == "eager")
        key = self.key(spec, eager, mode, extra_patches)
        ref_key = (key, steps)
        if cache and ref_key in self._references:
            return self._references[ref_key]
        for old in [k for k in self._references if k[0].model != key.model]:
            del self._references[old]
        try:
            model, inputs = self._build(key, spec)
        except Exception as exc:  # recorded as the harness's status, then re-raised by the caller
            ref = Reference(None, None, "model_fail_to_load", f"building {spec.name}: {exc!r}", exc)
        else:
            ref = self._check_reference(key, spec, eager, model, inputs, steps)
        if cache:
            self._references[ref_key] = ref
        return ref

    def _check_reference(self, key: CaseKey, spec: zoo.ModelSpec, eager: Backend, model: torch.nn.Module,
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

    def tolerance(self, spec: zoo.ModelSpec, item: pytest.Item | None) -> Tolerance:
        marker = item.get_closest_marker("xla_tolerance") if item is not None else None
        if marker is not None:
            unknown = set(marker.kwargs) - {"atol", "rtol", "tol"}
            if unknown or marker.args:
                raise pytest.UsageError(f"@pytest.mark.xla_tolerance: unexpected arguments "
                                        f"{sorted(unknown) or list(marker.args)}; valid: atol=, rtol=, tol=")
            kw = marker.kwargs
            if "tol" in kw:
                return Tolerance(tol=float(kw["tol"]), source="marker")
            atol, rtol = kw.get("atol"), kw.get("rtol")
            if (atol is None) != (rtol is None):
                raise pytest.UsageError("@pytest.mark.xla_tolerance: give both atol= and rtol= (or tol=)")
            assert atol is not None and rtol is not None
            return Tolerance(atol=float(atol), rtol=float(rtol), source="marker")
        if self.xcfg.tolerance is not None:
            return Tolerance(tol=self.xcfg.tolerance, source="--xla-tolerance")
        if spec.tolerance is not None:
            return Tolerance(tol=spec.tolerance, source=f"model: {spec.tolerance_reason}")
        return Tolerance()

    def run(self, spec: zoo.ModelSpec, backend: Backend, mode: str, item: pytest.Item | None = None,
            extra_patches: Sequence[str] = (), shared: bool = True, steps: int | None = None) -> ParityResult:
        """Compare ``backend`` against eager for one case (``accuracy_runs`` times, majority vote).

        ``shared``: use (and keep) the process's prepared case and eager reference; otherwise build
        both afresh (a user's model, or a test proving that sharing changes nothing).
        """
        tol = self.tolerance(spec, item)
        steps = steps or (self.xcfg.steps if mode == "train" else 1)
        ref = self.reference(spec, mode, steps, extra_patches, cache=shared)
        if ref.status != "pass":
            return ParityResult(ref.status, ref.message, tolerance=tol, exception=ref.exception)
        before = metrics.snapshot()
        result = self._run_backend(spec, backend, mode, extra_patches, shared, steps, ref, tol)
        result.compiles = metrics.snapshot().delta(before).compiles
        return result

    def _run_backend(self, spec: zoo.ModelSpec, backend: Backend, mode: str, extra_patches: Sequence[str],
                     shared: bool, steps: int, ref: Reference, tol: Tolerance) -> ParityResult:
        try:
            if shared:
                case = self.prepared(spec, backend, mode, extra_patches)
            else:
                key = self.key(spec, backend, mode, extra_patches)
                case = PreparedCase(key, spec, backend, *self._build(key, spec))
        except Exception as exc:  # recorded as fail_to_run, then re-raised by the caller
            return ParityResult("fail_to_run", f"{backend.name}: {exc!r}", tolerance=tol, exception=exc)
        assert ref.eager is not None and ref.fp64 is not None
        return _vote([_lockstep(ref.eager, ref.fp64, case, steps, tol, backend)
                      for _ in range(self.xcfg.accuracy_runs)])


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
    from pytest_xla_dynamo.gating import vote

    status, flaky = vote([r.status for r in results])
    chosen = next(r for r in results if r.status == status)
    chosen.runs = [r.status for r in results]
    chosen.flaky = flaky
    return chosen


def engine_for(config: pytest.Config) -> ParityEngine:
    engine = config.stash.get(_engine_key, None)
    if engine is None:
        engine = config.stash[_engine_key] = ParityEngine(config)
    return engine


_engine_key = pytest.StashKey[ParityEngine]()


class XlaParity:
    """The ``xla_parity`` fixture: the parity engine for suite cases and for a user's own models."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.engine = engine_for(request.config)

    @property
    def item(self) -> pytest.Item:
        node = self.request.node
        assert isinstance(node, pytest.Item)
        return node

    def _finish(self, spec: zoo.ModelSpec, backend: Backend, mode: str, result: ParityResult,
                check: bool) -> ParityResult:
        from pytest_xla_dynamo.known_issues import applied_issue

        xcfg = self.engine.xcfg
        repro = repro_command(self.item.nodeid, xcfg, backend.name)
        applied = applied_issue(self.item)
        known = applied.entry.id if applied is not None and applied.action == "xfail" else ""
        record_case(self.item, CaseRecord(
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

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str, check: bool = True) -> ParityResult:
        """Run a zoo case (shared prepared models) and record its status; raise unless it passes."""
        if not backend.supports(mode):
            raise pytest.UsageError(f"backend {backend.name} does not support mode {mode!r}")
        result = self.engine.run(spec, backend, mode, self.item)
        return self._finish(spec, backend, mode, result, check)

    def _user(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor],
              backend: Backend | str | None, mode: str, loss: Callable[[Any], torch.Tensor] | None,
              name: str | None, check: bool, steps: int | None) -> ParityResult:
        from pytest_xla_dynamo.plugin import backend_registry

        if backend is None:
            backend = self.request.getfixturevalue("xla_backend")
        if isinstance(backend, str):
            backend = backend_registry(self.request.config).get(backend)
        assert isinstance(backend, Backend)
        frozen_inputs = tuple(t.detach().clone() for t in inputs)
        batch = int(frozen_inputs[0].shape[0]) if frozen_inputs and frozen_inputs[0].dim() else 1
        spec = zoo.ModelSpec(
            name=name or str(getattr(model_factory, "__name__", "user_model")), source="user",
            build_model=lambda tier: model_factory(), build_inputs=lambda tier, bs: frozen_inputs,
            batch_size={"small": batch, "full": batch})
        if loss is not None:
            spec = dataclasses.replace(spec, loss=loss)
        result = self.engine.run(spec, backend, mode, self.item, shared=False, steps=steps)
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
