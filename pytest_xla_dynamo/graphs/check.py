"""The graph check: measure a warmed-up case's steady steps, build its signature, compare with its snapshot.

:class:`GraphCheck` is the ``xla_graphs`` fixture's object. A compilation in steady state (XLA or dynamo)
fails the test with its own message (:class:`RecompileError`), apart from the snapshot diff
(:class:`GraphSignatureError`); a backend that does not build the graphs it is defined by fails with
:class:`GraphConformanceError`. The cases come from the case engine, so this compiles nothing of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import metrics
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.capture import Capture
from pytest_xla_dynamo.core.patches import RandomOpsError
from pytest_xla_dynamo.core.stages import Where, mark
from pytest_xla_dynamo.graphs.signature import (
    STEADY_STEPS,
    build_signature,
    causes,
    conformance_problems,
    recompiles,
)
from pytest_xla_dynamo.graphs.snapshots import compare, snapshot_missing, snapshot_stem
from pytest_xla_dynamo.records import CaseRecord, GraphFigures
from pytest_xla_dynamo.session import CaseCheck, XlaSession

if TYPE_CHECKING:
    import torch
    from syrupy.assertion import SnapshotAssertion

    from pytest_xla_dynamo.core.cases import PreparedCase


class GraphSignatureError(AssertionError):
    """A case's graph signature differs from its snapshot (status ``fail_graph``)."""


class RecompileError(AssertionError):
    """A case compiled something after its warm-up (status ``fail_graph``)."""


class GraphConformanceError(AssertionError):
    """A backend does not build the graphs it is defined by (status ``fail_graph``)."""


def measure_steady(case: PreparedCase, steps: int = STEADY_STEPS) -> list[metrics.Snapshot]:
    """Counter deltas of ``steps`` more steps of a warmed-up case, each waited for (executions run
    asynchronously: their counts land only once the device is done)."""
    case.warm_up()
    out = []
    case.backend.wait()
    for index in range(1, steps + 1):
        case.phase, case.step_index = "steady", index  # named in a failure's stage
        before = metrics.snapshot()
        case.step()
        case.backend.wait()
        out.append(metrics.snapshot().delta(before))
    return out


def _record_fields(case: PreparedCase, signature: Mapping[str, Any],
                   steady: Sequence[metrics.Snapshot]) -> dict[str, Any]:
    """The record's graph figures: the warm-up's (:meth:`Warmup.figures`, the one definition shared with
    timing) and, from the steady steps, fallbacks and recompiles."""
    assert case.warmup is not None
    fields: dict[str, Any] = {k: v for k, v in case.warmup.figures(case.backend).items() if v is not None}
    xla = signature.get("xla")
    if xla is not None:
        fields.update(fallbacks=sum(xla["steady_step"]["fallbacks"].values()),
                      recompiles=sum(s.compiles for s in steady))
    return fields


class GraphCheck(CaseCheck):
    """The ``xla_graphs`` fixture: ``xla_graphs.check_case(spec, backend)`` measures a zoo case
    (the shared prepared case), records it and compares its signature with the test's snapshot."""

    suite = "graphs"

    def __init__(self, session: XlaSession, item: pytest.Item, snapshot: SnapshotAssertion) -> None:
        super().__init__(session, item)
        self.snapshot = snapshot

    def _record(self, spec: zoo.ModelSpec, backend: Backend, mode: str, status: str, message: str,
                repro: str, **fields: Any) -> None:
        self.session.record(self.item, CaseRecord(
            **self._fields(spec, backend, mode, repro), status=status, message=message, **fields))

    def _remember(self, exc: BaseException, spec: zoo.ModelSpec, backend: Backend, mode: str, status: str,
                  repro: str, harness: str = "", evidence: tuple[str, ...] = ()) -> None:
        """The failure's triage, naming the case (model, backend, mode); ``harness``: why it is not a
        backend problem (a missing snapshot), so that no known-issue entry is proposed for it."""
        from pytest_xla_dynamo.triage import for_item, remember

        triage = for_item(self.item, exc, model=spec.name, backend=backend.name, mode=mode, status=status, repro=repro,
                          evidence=evidence)
        if harness:
            triage.verdict, triage.classification = [harness], "harness"
            triage.no_proposal = "a harness artefact, not an upstream problem"
        if isinstance(exc, RandomOpsError):  # as parity says it: the test's to fix
            triage.refuse("its model draws random numbers eager and XLA draw differently (see the error)")
        remember(self.item, triage)

    def check(self, model_factory: Callable[[], torch.nn.Module], inputs: Sequence[torch.Tensor], *,
              backend: Backend | str, mode: str | None = None, name: str | None = None,
              kwargs: Mapping[str, torch.Tensor] | None = None, targets: Any = None,
              loss: Callable[..., torch.Tensor] | None = None, has_dropout: bool = False) -> dict[str, Any]:
        """The graph check of one's own model, from the same factory and inputs (keyword inputs, targets and loss)
        as ``xla_parity.training`` / ``.inference`` take (:mod:`pytest_xla_dynamo.core.user_case`); its snapshot is the
        test's own. ``mode`` defaults to the test's ``xla_mode`` marker. ``has_dropout`` (or the test's
        ``xla_patch("dropout_to_identity")``): the model's dropout switched off, as in parity."""
        __tracebackhide__ = True
        from pytest_xla_dynamo.core.user_case import user_spec
        from pytest_xla_dynamo.markers import item_patches

        if isinstance(backend, str):
            backend = self.session.backends.get(backend)
        has_dropout = has_dropout or "dropout_to_identity" in item_patches(self.item)
        spec = user_spec(model_factory, inputs, name=name, kwargs=kwargs, targets=targets, loss=loss,
                         has_dropout=has_dropout)
        return self.check_case(spec, backend, mode)

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str | None = None) -> dict[str, Any]:
        """Measure, record and check one case; returns its signature. ``mode`` defaults to the
        test's ``xla_mode`` marker."""
        __tracebackhide__ = True
        mode = self._mode(mode)
        self._supports(mode, backend)
        if not backend.stats:
            pytest.skip(f"backend {backend.name} exposes no graph statistics (no dynamo, no XLA)")
        session = self.session
        repro = self._repro(backend)
        label = f"{spec.name} / {backend.name} / {mode}"
        try:
            case = session.engine.prepared(spec, backend, mode)
            steady = measure_steady(case)
        except Exception as exc:
            session.unchecked_snapshots.add(snapshot_stem(self.snapshot))
            self._record(spec, backend, mode, "fail_to_run", f"{backend.name}: {exc!r}", repro)
            self._remember(exc, spec, backend, mode, "fail_to_run", repro)
            raise
        assert case.warmup is not None
        warmup = case.warmup.per_step
        signature = build_signature(backend, mode, warmup, steady)
        snapshot_failure = compare(self.snapshot, signature, label, repro)
        recompiled = recompiles(steady)
        nonconforming = conformance_problems(backend, mode, signature)
        capture = Capture.from_snapshot(case.warmup.total) if backend.dynamo_backend is not None else None
        if capture is not None and capture.nothing:  # the reason, in inference too (no graph to check)
            nonconforming = [*nonconforming, capture.describe()]
        error: AssertionError | None = None
        if recompiled:
            error = RecompileError(f"{label}: compiled after warm-up ({len(case.warmup.per_step)} steps), "
                                   "every steady step must reuse the compiled graphs:\n  " + "\n  ".join(recompiled))
        elif nonconforming:
            error = GraphConformanceError(f"{label}: " + "\n".join([*nonconforming, *causes(signature)[0]]))
        elif snapshot_failure is not None:
            error = GraphSignatureError(snapshot_failure)
        message = str(error).splitlines()[0] if error is not None else ""
        self._record(spec, backend, mode, "pass" if error is None else "fail_graph", message, repro,
                     graphs=GraphFigures(signature, capture, [s.count("CompileTime") for s in warmup],
                                         [s.count("UncachedCompile") for s in warmup]),
                     **_record_fields(case, signature, steady))
        if error is not None:
            extra = f"\n{snapshot_failure}" if snapshot_failure is not None and not isinstance(
                error, GraphSignatureError) else ""
            raised = type(error)(f"{error}{extra}\nreproduce: {repro}")
            # the triage names the check: the first steady step that compiled, else the signature's comparison
            first = next((i for i, s in enumerate(steady, 1) if recompiles([s])), None)
            mark(raised, Where("comparison", first, "steady" if first else "graph signature", backend.name))
            harness = ""
            if isinstance(error, GraphSignatureError) and snapshot_missing(self.snapshot):
                harness = ("the case has no snapshot yet (not a backend problem): create it with --snapshot-update "
                           "and review it")
            self._remember(raised, spec, backend, mode, "fail_graph", repro, harness, causes(signature)[1])
            raise raised
        return signature
