"""The ``xla_parity`` fixture's object: parity of zoo cases and of a user's own models, recorded and triaged.

Every check is recorded (a :class:`~pytest_xla_dynamo.records.CaseRecord`) and raises unless it
passes: the real exception for a case that did not run (so strict xfails with ``raises=`` match it),
:class:`~pytest_xla_dynamo.parity.run.ParityError` for an accuracy failure. Before raising, the failure
is triaged (:mod:`pytest_xla_dynamo.triage`): matched against the registry and, for an accuracy failure
the registry does not already declare, localized to a module and checked against the graph-split
diagnosis (``--xla-triage``). The triage rides on the test item to the report and into the record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import metrics
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.capture import Capture, parity_status
from pytest_xla_dynamo.core.patches import RandomOpsError
from pytest_xla_dynamo.known_issues.plugin import session_registry
from pytest_xla_dynamo.markers import item_patches
from pytest_xla_dynamo.parity import plain_math
from pytest_xla_dynamo.parity.compare import Tolerance, tolerance_for
from pytest_xla_dynamo.parity.plain_math import FastPathCheck, check_fast_path
from pytest_xla_dynamo.parity.run import PARITY_PHASE, EagerError, ParityError, ParityResult, run
from pytest_xla_dynamo.records import CaseRecord, ParityFigures, TriageNote
from pytest_xla_dynamo.session import CaseCheck, XlaSession
from pytest_xla_dynamo.triage import Triage, Where, for_item, remember, wants_deep_triage

if TYPE_CHECKING:
    import torch

    from pytest_xla_dynamo.parity.conditioning import Conditioning


MAX_RECORDED_DIVERGENCES = 200  # per record, in the JSON report
#: statuses of a case whose reference or model failed, not the backend: no known-issue entry is proposed for them
NOT_THE_BACKEND = {
    "model_fail_to_load": "the model (or its inputs) could not be built: the test's or the model's problem",
    "eager_fail_to_run": "the eager CPU reference itself failed: the model's (or eager's) problem, not the backend's",
    "eager_two_runs_differ": "two eager CPU runs from the same weights differ: the model is not deterministic on CPU",
}


def coverage_note(figures: ParityFigures) -> str:
    """A pass's message where a known issue is present below tolerance or it covered less of the backend than a
    clean pass: ``pass; known issue local:... present below tolerance (...); CPU fallbacks: aten::_embedding_bag x2
    (run on the CPU, not through XLA); dynamo captured part of the model (...)``."""
    parts = list(figures.notes or ())
    if figures.cpu_fallbacks:
        ops = ", ".join(f"{op} x{n}" for op, n in figures.cpu_fallbacks.items())
        parts.append(f"CPU fallbacks: {ops} (run on the CPU, not through XLA)")
    if figures.capture is not None and figures.capture.partial:
        parts.append(figures.capture.describe())
    return "; ".join(["pass", *parts])


class XlaParity(CaseCheck):
    """The ``xla_parity`` fixture: parity of zoo cases (``check_case``) and of a user's own models
    (``training``, ``inference``); every check is recorded and raises unless it passes."""

    suite = "parity"

    def __init__(self, session: XlaSession, item: pytest.Item, default_backend: Callable[[], Backend],
                 tolerance_marker: Mapping[str, float] | None = None) -> None:
        super().__init__(session, item)
        self.engine = session.engine
        self._default_backend = default_backend
        self._tolerance_marker = tolerance_marker
        self._plain_references = False  # the last check's references ran on the plain math path
        self._fallbacks: dict[str, int] | None = None  # the last check's CPU fallbacks (an XLA backend's run)

    def _triage(self, spec: zoo.ModelSpec, backend: Backend, mode: str, result: ParityResult, repro: str,
                error: BaseException) -> Triage:
        """The failure's triage: the registry match, and for an accuracy failure (where ``--xla-triage``
        asks) the diverging module and the graph-split diagnosis."""
        from pytest_xla_dynamo.known_issues import applied_issue
        from pytest_xla_dynamo.parity.compare import divergence_lines
        from pytest_xla_dynamo.versions import installed_versions

        applied = applied_issue(self.item)
        triage = for_item(self.item, error, model=spec.name, backend=backend.name, mode=mode, status=result.status,
                          repro=repro)
        if result.divergences:
            first = result.divergences[0]
            triage.where = Where("comparison", first.step, PARITY_PHASE, backend.name)
            triage.divergence = divergence_lines(result.divergences, result.compared)
        if result.status in NOT_THE_BACKEND:  # the model or eager failed: nothing the backend's registry can hold
            triage.verdict, triage.classification = [NOT_THE_BACKEND[result.status]], "harness"
            triage.no_proposal = "the case failed before the backend was compared (not an upstream problem of it)"
        if isinstance(result.exception, RandomOpsError):
            triage.refuse("its model draws random numbers eager and XLA draw differently (see the error)")
        xcfg = self.session.xcfg
        deep = result.status == "fail_accuracy" and wants_deep_triage(xcfg.triage, applied)
        notes: list[str] = []  # the diagnoses' outcomes that decided nothing, listed after the localization
        if deep and not self._plain_references:  # references on eager's fast paths: are they what differs?
            fast = self._fast_path(spec, mode, result)
            if fast.explains(triage.diverging):
                triage.verdict, triage.classification = fast.verdict(), "eager_fast_path"
                triage.no_proposal = "eager's fast path differs, not the backend (not an upstream problem of it)"
                deep = False  # the reruns would compare against the same fast path
            notes += [f"eager's fast-path check did not run: {fast.error}"] if fast.error else []
        loaded = session_registry(self.session.config)
        registry = loaded if loaded is not None else ()
        if deep and result.divergences:
            self._diagnose(spec, backend, mode, result, triage, registry, notes)
        return triage.analyze(registry, installed_versions())

    def _diagnose(self, spec: zoo.ModelSpec, backend: Backend, mode: str, result: ParityResult, triage: Triage,
                  registry: Any, notes: list[str]) -> None:
        """The reruns of an undeclared accuracy failure: the sign-flip causal check, the localization (and the
        op-level entries of what it names), the graph split; their verdicts and lines go on ``triage``."""
        from pytest_xla_dynamo.parity.conditioning import MECHANISM, check_conditioning
        from pytest_xla_dynamo.parity.graph_split import diagnose
        from pytest_xla_dynamo.parity.localize import Suspect, localize
        from pytest_xla_dynamo.triage.matching import not_yet_explained

        # the step and tensors the registry does not explain yet (a known step-1 running_var aside)
        todo = set(not_yet_explained(registry, triage.failure()))
        focus = next((d for d in result.divergences if d.tensor in todo), result.divergences[0])
        patches = self.engine.patch_names(spec)
        if mode == "train" and (focus.step > 1 or focus.group == "grads"):  # a sign flip's symptoms
            at_step = [d.tensor for d in result.divergences if d.step == focus.step and d.tensor in todo]
            found = check_conditioning(self.engine, spec, backend, mode, result.tolerance, focus.step, patches,
                                       at_step)
            if found.explains:
                triage.verdict, triage.classification = found.lines(backend.name), "ill_conditioned"
                triage.no_proposal = "ill-conditioned (an activation's sign flip), not a backend bug"
                return
            if self._amplified(spec, backend, mode, result, triage, found, todo, at_step, patches, notes):
                return
            notes += found.lines(backend.name)
            if found.disproves:
                triage.ruled_out[MECHANISM] = "no activation sign flip explains it (checked)"
            elif found.failed:  # undecided: no rule matches the mechanism's entries on the message alone
                triage.ruled_out[MECHANISM] = "its causal check failed (diagnosis failed above): not matched " \
                    "on the message alone"
        buffers = [t for t in triage.diverging if t.startswith("buffer ")]
        where = f"localized at step {focus.step}, {focus.tensor} (not yet explained)" \
            if focus is not result.divergences[0] else ""
        suspects: list[Suspect] = []
        triage.localization = [*([where] if where else []), *localize(
            self.engine, spec, backend, mode, result.tolerance, focus.step, buffers, patches, suspects), *notes]
        self._explain_by_ops(triage, registry, suspects, focus.group)
        triage.graph_split = diagnose(self.engine, spec, backend, mode, result.tolerance, result)

    def _amplified(self, spec: zoo.ModelSpec, backend: Backend, mode: str, result: ParityResult, triage: Triage,
                   found: Conditioning, todo: set[str], at_step: list[str], patches: Sequence[str],
                   notes: list[str]) -> bool:
        """Whether the first unexplained divergence, at a step > 1, is amplification of earlier rounding (its rerun
        from eager's weights matches, see :mod:`.amplification`): the verdict goes on ``triage``, and no new entry is
        proposed. A check that ran and found otherwise, or failed, adds its line to ``notes``."""
        from pytest_xla_dynamo.parity.amplification import CLASSIFICATION, check_amplification

        step = found.step
        if step < 2 or found.rerun_diverging is None:  # step 1, or the conditioning check did not compare
            return False
        earlier = [d.tensor for d in result.divergences if d.step < step and d.tensor in todo]
        amp = check_amplification(self.engine, spec, backend, mode, result.tolerance, step, found.rerun_diverging,
                                  earlier, at_step, patches)
        if amp.holds:
            triage.verdict, triage.classification = amp.lines(backend.name), CLASSIFICATION
            triage.no_proposal = (f"amplification of earlier rounding (step {step} from eager's weights matches), "
                                  "not a backend bug")
            return True
        notes += amp.lines(backend.name)
        return False

    @staticmethod
    def _explain_by_ops(triage: Triage, registry: Any, suspects: Sequence[Any], group: str) -> None:
        """An op-level entry covering an op the localization names, in the direction of the first unexplained
        divergence (a gradient: backward): the verdict, and no new entry proposed."""
        from pytest_xla_dynamo.triage.mechanisms import op_explanations

        direction = "backward" if group == "grads" else "forward"
        found = op_explanations(registry, [(k, w, at) for k, w, at, d in suspects if d == direction], direction)
        if found:
            triage.verdict = [line for explanation in found for line in explanation.lines()]
            triage.classification = "known_op"
            triage.no_proposal = f"explained by the op-level entry {found[0].entry.id}"

    def _below_tolerance(self, backend: Backend, mode: str, result: ParityResult) -> list[str]:
        """The notes of the registry's entries whose exact signature holds in a passing run (:mod:`.signatures`)."""
        from pytest_xla_dynamo.parity.signatures import present

        loaded = session_registry(self.session.config)
        return present(loaded if loaded is not None else (), result.observed, backend.name, mode)

    def _fast_path(self, spec: zoo.ModelSpec, mode: str, result: ParityResult) -> FastPathCheck:
        """Eager's first step on its fast paths against its plain math path, on a fresh CPU model of the case."""
        try:
            model, inputs = self.engine.build(self.engine.key(spec, self.engine.eager, mode), spec)
        except Exception as exc:  # a diagnosis: reported as not run, the case's own failure stays
            return FastPathCheck(error=f"{type(exc).__name__}: {exc}")
        return check_fast_path(model, inputs, mode, spec.loss, result.tolerance)

    def _run(self, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance, *, shared: bool,
             steps: int | None = None) -> tuple[ParityResult, Capture | None]:
        """:func:`run`, and what dynamo captured of the case (None for a backend without dynamo): the
        warm-up's counters of a shared case (compiled once per process), else the counters of this check."""
        __tracebackhide__ = True
        before, plain = metrics.snapshot(), plain_math.entered()
        result = run(self.engine, spec, backend, mode, tol, shared=shared, steps=steps)
        # whether the references ran with eager's fast paths off (parity.run calls plain_math() around them)
        self._plain_references = plain_math.entered() > plain
        captured = metrics.snapshot().delta(before)
        fallbacks = captured.fallbacks
        if shared:
            key = self.engine.key(spec, backend, mode)
            case = next((c for c in self.engine.cases if c.key == key), None)
            if case is not None and case.warmup is not None:  # compiled (its fallbacks first counted) in the warm-up
                captured = case.warmup.total
                # the warm-up ran in this check or an earlier one: the larger count of each op, not their sum
                fallbacks = {op: max(n, fallbacks.get(op, 0)) for op, n in captured.fallbacks.items()} | {
                    op: n for op, n in fallbacks.items() if op not in captured.fallbacks}
        self._fallbacks = dict(sorted(fallbacks.items())) if "xla" in backend.stats else None
        return result, Capture.from_snapshot(captured) if backend.dynamo_backend is not None else None

    def _finish(self, spec: zoo.ModelSpec, backend: Backend, mode: str, result: ParityResult,
                check: bool, capture: Capture | None = None) -> ParityResult:
        __tracebackhide__ = True
        from pytest_xla_dynamo.known_issues import applied_issue

        xcfg = self.session.xcfg
        applied = applied_issue(self.item)
        declared = applied if applied is not None and applied.action == "xfail" else None
        repro = self._repro(backend, registry_off=declared is not None)
        figures = ParityFigures(result.tolerance.describe(), result.runs, result.tensor, result.max_abs_err,
                                result.step, result.compile_seconds)
        error = None if result.ok else self._error(result, repro)
        counts: dict[str, Any] = {}
        if capture is not None:  # a pass that compiled nothing is not a plain pass (records.NOT_CAPTURED)
            figures.capture = capture
            counts = {"calls_captured": capture.calls_captured, "unique_graphs": capture.unique_graphs,
                      "graph_breaks": sum(capture.graph_breaks.values())}
            status = parity_status(result.status, capture)
            if status != result.status:
                result = dataclasses.replace(result, status=status, message=capture.describe())
        figures.cpu_fallbacks = self._fallbacks
        if result.status == "pass":  # a known mechanism at work below the tolerance; less covered than it says
            figures.notes = self._below_tolerance(backend, mode, result) or None
            if figures.notes or figures.coverage not in ("", "full"):
                result = dataclasses.replace(result, message=coverage_note(figures))
        # the record names the entry only when this failure is the one it records (else the judge fails the test)
        known = declared.entry.id if declared is not None and error is not None and declared.explains(error) else ""
        if error is not None and xcfg.triage != "off":
            triage = self._triage(spec, backend, mode, result, repro, error)
            remember(self.item, triage)
            figures.triage = TriageNote(triage.to_dict())
        if result.divergences:
            figures.divergences = [d.to_dict() for d in result.divergences[:MAX_RECORDED_DIVERGENCES]]
            figures.divergences_total = len(result.divergences)
        self.session.record(self.item, CaseRecord(
            **self._fields(spec, backend, mode, repro), status=result.status, message=result.message,
            flaky=result.flaky, compiles=result.compiles, known_issue=known, parity=figures, **counts))
        if check and error is not None:
            raise error  # for a case that did not run, the real error, so strict xfail raises= can match it
        return result

    @staticmethod
    def _error(result: ParityResult, repro: str) -> BaseException:
        """What a failing check raises: the backend's (or eager's) own exception, else EagerError or
        ParityError with the status, the divergences and the repro command."""
        if result.exception is not None:
            return result.exception
        text = f"{result.status}: {result.message}\nreproduce: {repro}"
        if result.status.startswith("eager"):
            return EagerError(text)
        return ParityError(text, result.divergences)

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str | None = None,
                   check: bool = True) -> ParityResult:
        """Run a zoo case (shared prepared models) and record its status; raise unless it passes.
        ``mode`` defaults to the test's ``xla_mode`` marker."""
        __tracebackhide__ = True
        mode = self._mode(mode)
        self._supports(mode, backend)
        tol = tolerance_for(spec, self.session.xcfg, self._tolerance_marker)
        result, capture = self._run(spec, backend, mode, tol, shared=True)
        return self._finish(spec, backend, mode, result, check, capture)

    def _user(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor],
              backend: Backend | str | None, mode: str, name: str | None, check: bool, steps: int | None,
              **case: Any) -> ParityResult:
        __tracebackhide__ = True
        from pytest_xla_dynamo.core.user_case import user_spec

        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ValueError(f"xla_parity.{'training' if mode == 'train' else 'inference'}: steps={steps!r} would "
                             "compare nothing; valid: an integer >= 1, or None (--xla-steps)")
        if backend is None:
            backend = self._default_backend()
        if isinstance(backend, str):
            backend = self.session.backends.get(backend)
        # the test's xla_patch("dropout_to_identity") reaches the case's model at instance level too (attention
        # dropout, the Dropout modules nn.Transformer* layers build), like has_dropout=True
        case["has_dropout"] = bool(case.get("has_dropout")) or "dropout_to_identity" in item_patches(self.item)
        spec = user_spec(model_factory, inputs, name=name, **case)
        tol = tolerance_for(spec, self.session.xcfg, self._tolerance_marker)
        result, capture = self._run(spec, backend, mode, tol, shared=False, steps=steps)
        return self._finish(spec, backend, mode, result, check, capture)

    def training(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor], *,
                 backend: Backend | str | None = None, loss: Callable[..., torch.Tensor] | None = None,
                 targets: Any = None, kwargs: Mapping[str, torch.Tensor] | None = None,
                 name: str | None = None, steps: int | None = None, check: bool = True,
                 has_dropout: bool = False) -> ParityResult:
        """Training parity of ``model_factory()`` on ``inputs`` (raises ParityError unless it passes).

        ``kwargs``: keyword inputs of the model (a padding mask); ``targets`` with ``loss(out, targets)`` (else
        ``loss(out)``, default: the harness's reduce-to-scalar loss); ``has_dropout``: switch the model's dropout
        (modules, attention dropout) off for the check, as ``xla_patch("dropout_to_identity")`` on the test does
        (a model that draws random numbers in training is refused otherwise); see
        :mod:`pytest_xla_dynamo.core.user_case`."""
        __tracebackhide__ = True
        return self._user(model_factory, inputs, backend, "train", name, check, steps, loss=loss, targets=targets,
                          kwargs=kwargs, has_dropout=has_dropout)

    def inference(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor], *,
                  backend: Backend | str | None = None, kwargs: Mapping[str, torch.Tensor] | None = None,
                  name: str | None = None, check: bool = True, has_dropout: bool = False) -> ParityResult:
        """Inference parity of ``model_factory()`` on ``inputs`` (and keyword inputs ``kwargs``); eval draws no
        random numbers for dropout, so ``has_dropout`` is needed only by a forward that draws in eval too."""
        __tracebackhide__ = True
        return self._user(model_factory, inputs, backend, "infer", name, check, None, kwargs=kwargs,
                          has_dropout=has_dropout)
