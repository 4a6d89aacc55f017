"""Graph and fallback conformance: each case's XLA graph signature, checked against a syrupy snapshot.

A *signature* is a plain, deterministic dict of what one model x backend x mode does to the graph
machinery: dynamo's captured graphs and graph breaks, the XLA graphs built and executed per
warm-up step and per steady step, the dynamo graphs the bridge extracted and runs, and the CPU
fallbacks (``aten::*`` counters) per steady step. It is built from the figures of the case's
warm-up (measured when the shared prepared case was first compiled, see
:mod:`pytest_xla_dynamo.cases`) and from steady steps measured by the graph suite, which compile
nothing. Numbers that depend on timing or on the process's history are never part of it:

* compilations during warm-up (``UncachedCompile``, the ``CompileTime`` count) depend on what the
  process compiled before: XLA's compilation cache is per process and graphs are shared across
  cases and models (the loss-gradient graph of two models with the same output shape is one
  graph), so the ``-n 2`` workers and a model run alone see other numbers. The signature holds
  ``compile_requests`` instead: graphs cut and compiled *or* found in the cache
  (``UncachedCompile + CachedCompile``), read as the sample count of the ``TensorsGraphSize``
  metric because the dynamo bridge clears torch_xla's counters while it compiles (its
  ``UnsupportedNodesCollector`` calls ``metrics.clear_counters()``; only ``UncachedCompile`` and
  ``DynamoExtractCompiledGraph`` are restored). The compilations themselves go to the case
  record (``compiles``) and to reports.
* CPU fallbacks are taken from steady steps only, for the same reason: the counters of a step
  that compiles a dynamo graph are cleared part-way.

A compilation in steady state (XLA or dynamo) fails the test with its own message, apart from the
snapshot diff. The snapshots live in the repository's top-level ``snapshots/`` folder (installed:
``pytest_xla_dynamo/snapshots``), one JSON file per test, keys sorted, indent 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from pytest_xla_dynamo import metrics, zoo
from pytest_xla_dynamo.backends import Backend
from pytest_xla_dynamo.config import XlaConfig, get_config
from pytest_xla_dynamo.records import CaseRecord, record_case

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion
    from syrupy.location import PyTestLocation

    from pytest_xla_dynamo.cases import PreparedCase

__all__ = [
    "STEADY_STEPS",
    "GraphCheck",
    "GraphConformanceError",
    "GraphSignatureError",
    "GraphSnapshotExtension",
    "RecompileError",
    "build_signature",
    "conformance_problems",
    "diff_signatures",
    "measure_steady",
    "recompiles",
    "snapshot_root",
    "xla_graphs",
    "xla_snapshot",
]

STEADY_STEPS = 2  # steps measured after warm-up; every one must compile nothing, the last is the signature's
SIGNATURE_VERSION = 1

# torch_xla counters and metrics the signature reads (see pytest_xla_dynamo.metrics)
GRAPHS_BUILT = "TensorsGraphSize"  # sample count: lazy graphs cut (compiled or found in the cache)
DYNAMO_GRAPH_RUNS = "RunCachedGraphInputData"  # sample count: runs of dynamo-compiled graphs
DYNAMO_INPUT_SYNCS = "DynamoSyncInputExecuteTime"  # counter: pending inputs executed before a dynamo graph
DYNAMO_EXTRACTED = "DynamoExtractCompiledGraph"  # counter: dynamo graphs the bridge compiled


class GraphSignatureError(AssertionError):
    """A case's graph signature differs from its snapshot (status ``fail_graph``)."""


class RecompileError(AssertionError):
    """A case compiled something after its warm-up (status ``fail_graph``)."""


class GraphConformanceError(AssertionError):
    """A backend does not build the graphs it is defined by (status ``fail_graph``)."""


# --- the signature (pure) ---------------------------------------------------------------------------

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(?:[A-Za-z]:)?[/\\](?:[^\s'\"():]+[/\\])+(?=[^\s/\\'\"():]+)")


def clean_reason(reason: str) -> str:
    """A graph-break reason without what differs between machines and runs (addresses, folders)."""
    text = _HEX.sub("0x…", str(reason))
    text = _PATH.sub("…/", text)
    return " ".join(text.split())


def _steady_step(snap: metrics.Snapshot) -> dict[str, Any]:
    return {
        "compile_requests": snap.count(GRAPHS_BUILT),
        "executions": snap.count("ExecuteTime"),
        "dynamo_graph_runs": snap.count(DYNAMO_GRAPH_RUNS),
        "dynamo_input_syncs": snap.count(DYNAMO_INPUT_SYNCS),
        "fallbacks": dict(sorted(snap.fallbacks.items())),
        "item_calls": snap.count(metrics.ITEM_FALLBACK),
    }


def build_signature(backend: Backend, mode: str, warmup: Sequence[metrics.Snapshot],
                    steady: Sequence[metrics.Snapshot]) -> dict[str, Any]:
    """The signature of one case: ``warmup`` and ``steady`` are per-step counter deltas
    (:meth:`metrics.Snapshot.delta`); the last steady step stands for every steady step."""
    if not steady:
        raise ValueError("build_signature needs at least one steady step")
    total = metrics.Snapshot()
    for snap in warmup:
        total = total + snap
    signature: dict[str, Any] = {
        "version": SIGNATURE_VERSION,
        "backend": {"name": backend.name, "device": backend.device_kind,
                    "dynamo_backend": backend.dynamo_backend},
        "mode": mode,
        "warmup_steps": len(warmup),
    }
    if backend.dynamo_backend is not None:
        stats = total.dynamo.get("stats", {})
        breaks: dict[str, int] = {}
        for reason, count in total.graph_breaks.items():
            key = clean_reason(reason)
            breaks[key] = breaks.get(key, 0) + count
        signature["dynamo"] = {
            "calls_captured": stats.get("calls_captured", 0),
            "unique_graphs": stats.get("unique_graphs", 0),
            "graph_breaks": dict(sorted(breaks.items())),
        }
    if backend.is_xla:
        signature["xla"] = {
            "warmup": [{"step": i, "compile_requests": s.count(GRAPHS_BUILT), "executions": s.count("ExecuteTime"),
                        "dynamo_graph_runs": s.count(DYNAMO_GRAPH_RUNS)}
                       for i, s in enumerate(warmup, start=1)],
            "dynamo_graphs_extracted": total.count(DYNAMO_EXTRACTED),
            "steady_step": _steady_step(steady[-1]),
        }
    return signature


def recompiles(steady: Sequence[metrics.Snapshot]) -> list[str]:
    """What compiled during the steady steps (empty when nothing did)."""
    problems = []
    for i, snap in enumerate(steady, start=1):
        xla = snap.compiles
        if xla:
            problems.append(f"steady step {i}: {xla} XLA compilation(s) (CompileTime count "
                            f"{snap.count('CompileTime')}, UncachedCompile {snap.count('UncachedCompile')})")
        graphs = snap.dynamo.get("stats", {}).get("unique_graphs", 0)
        if graphs:
            problems.append(f"steady step {i}: dynamo captured {graphs} new graph(s) (a recompilation: guards failed)")
        extracted = snap.count(DYNAMO_EXTRACTED)
        if extracted:
            problems.append(f"steady step {i}: the dynamo bridge extracted {extracted} graph(s)")
    return problems


def conformance_problems(backend: Backend, mode: str, signature: Mapping[str, Any]) -> list[str]:
    """The seed's first point, checked both ways (training only): without dynamo, lazy tensors run
    one combined XLA graph per step; dynamo on XLA runs separate forward, backward and optimizer
    graphs (the forward and backward graphs compiled by dynamo, the optimizer's lazy graph)."""
    if mode != "train" or not backend.is_xla or "xla" not in signature:
        return []
    steady = signature["xla"]["steady_step"]
    executions, runs = steady["executions"], steady["dynamo_graph_runs"]
    if backend.dynamo_backend is None:
        if executions != 1:
            return [f"{backend.name} (lazy tensors, no dynamo) should execute one combined XLA graph per "
                    f"training step (forward, backward and optimizer cut by one torch_xla.sync()); it executed "
                    f"{executions}"]
        return []
    if executions < 3 or runs < 2:
        return [f"{backend.name} (dynamo on XLA) should execute separate forward, backward and optimizer graphs "
                f"per training step (>= 3 XLA executions, >= 2 of them dynamo-compiled graphs); it executed "
                f"{executions}, {runs} dynamo-compiled"]
    return []


def _flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and (value or not path):
        for key in sorted(value, key=str):
            yield from _flatten(value[key], f"{path}.{key}" if path else str(key))
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) and "step" in v for v in value):
        for item in value:
            step = {k: v for k, v in item.items() if k != "step"}
            yield from _flatten(step, f"{path}[step {item['step']}]")
    else:
        yield path, value


_MISSING = object()


def diff_signatures(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Which counters changed, from what to what: ``"xla.steady_step.executions: 4 -> 5"``."""
    before, after = dict(_flatten(old)), dict(_flatten(new))
    keys = set(before) | set(after)
    changes = []
    for key in sorted(keys):
        a, b = before.get(key, _MISSING), after.get(key, _MISSING)
        if a == b:
            continue
        if {} in (a, b) and _MISSING in (a, b) and any(k.startswith(f"{key}.") for k in keys):
            continue  # an empty mapping that gained (or lost) entries: the entries say it
        if a is _MISSING:
            changes.append(f"{key}: (new) {json.dumps(b, sort_keys=True)}")
        elif b is _MISSING:
            changes.append(f"{key}: {json.dumps(a, sort_keys=True)} -> (gone)")
        else:
            changes.append(f"{key}: {json.dumps(a, sort_keys=True)} -> {json.dumps(b, sort_keys=True)}")
    return changes


# --- the measurement (torch) --------------------------------------------------------------------------


def measure_steady(case: PreparedCase, steps: int = STEADY_STEPS) -> list[metrics.Snapshot]:
    """Counter deltas of ``steps`` more steps of a warmed-up case, each waited for (executions run
    asynchronously: their counts land only once the device is done)."""
    case.warm_up()
    out = []
    case.backend.wait()
    for _ in range(steps):
        before = metrics.snapshot()
        case.step()
        case.backend.wait()
        out.append(metrics.snapshot().delta(before))
    return out


# --- snapshots -----------------------------------------------------------------------------------------


def snapshot_root(test_file: str | Path) -> Path:
    """The snapshot folder of a test file: for the bundled suites the top-level ``snapshots/``
    (installed: the ``pytest_xla_dynamo.snapshots`` package), else ``snapshots/`` next to the
    test file's folder (``<root>/tests/test_x.py`` -> ``<root>/snapshots``)."""
    from pytest_xla_dynamo.__main__ import snapshots_dir, suites_dir

    test_dir = Path(test_file).resolve().parent
    try:
        if test_dir == suites_dir():
            return snapshots_dir()
    except RuntimeError:  # a folder not installed (a partial copy of the package)
        pass
    return test_dir.parent / "snapshots"


def variant(xcfg: XlaConfig) -> str:
    """The sub-folder for options that change signatures ('' for the defaults the committed
    snapshots are made with): tier, op patches, dropout policy."""
    parts = []
    if xcfg.tier != "small":
        parts.append(f"tier-{xcfg.tier}")
    if xcfg.patches:
        parts.append("patch-" + ",".join(sorted(xcfg.patches)))
    if xcfg.dropout != "identity":
        parts.append(f"dropout-{xcfg.dropout}")
    return "+".join(parts)


_unchecked_key = pytest.StashKey[set[str]]()
_PARAM_ID = re.compile(r"\[(?P<id>[^\[\]]*)\](?:\[[^\[\]]*\]|\.\d+)?$")


def _unchecked(config: pytest.Config) -> set[str]:
    found = config.stash.get(_unchecked_key, None)
    if found is None:
        found = config.stash[_unchecked_key] = set()
    return found


class GraphSnapshotExtension(JSONSnapshotExtension):
    """JSON snapshots (keys sorted, indent 2) under :func:`snapshot_root`, one file per test:
    ``snapshots/test_graphs/test_graph_signature_train[resnet18-trace_once].json``.

    Only the snapshots of cases this session selects are discovered (so running a few models
    reports no other model's snapshot as unused, and ``--snapshot-update`` deletes none of them);
    snapshots of cases that failed before their comparison are neither used nor unused.
    """

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        root = snapshot_root(test_location.filepath)
        sub = variant(get_config(test_location.item.config))
        return str((root / sub if sub else root) / test_location.basename)

    def owns_snapshot_collection(self, *, filepath: str, test_location: PyTestLocation) -> bool:
        if not super().owns_snapshot_collection(filepath=filepath, test_location=test_location):
            return False
        config = test_location.item.config
        stem = Path(filepath).name[: -len(".json")]
        if stem in _unchecked(config):
            return False
        match = _PARAM_ID.search(stem)
        if match is None:
            return True
        xcfg = get_config(config)
        selected = {f"{m}-{b}" for m in xcfg.models for b in xcfg.backends}
        ids = match.group("id")
        # a case of another model or backend than this session's: not this session's business
        return ids in selected or not any(ids.startswith(f"{m}-") for m in zoo.model_names())


def _snapshot_stem(snapshot: SnapshotAssertion) -> str:
    return str(snapshot.extension.get_snapshot_name(test_location=snapshot.test_location, index=snapshot.index))


def compare(snapshot: SnapshotAssertion, signature: Mapping[str, Any], label: str,
            command: str = "pytest ...") -> str | None:
    """Compare ``signature`` with its snapshot (written instead with ``--snapshot-update``);
    None when it matches, else the failure text: the counters that changed, then syrupy's diff."""
    from syrupy.terminal import disable_color

    if snapshot == dict(signature):
        return None
    result = snapshot.executions[snapshot.num_executions - 1]
    location = result.snapshot_location
    update = f"{command} --snapshot-update"
    if result.exception is not None:
        return f"{label}: cannot compare with {location}: {result.exception!r}"
    if result.recalled_data is None:
        return f"{label}: no snapshot at {location}\ncreate it with: {update}"
    try:
        old = json.loads(str(result.recalled_data))
    except ValueError:
        old = None
    changes = diff_signatures(old, signature) if isinstance(old, Mapping) else ["(the snapshot is not JSON)"]
    with disable_color():
        diff = snapshot.get_assert_diff()
    lines = [f"{label}: graph signature changed: " + "; ".join(changes),
             f"snapshot: {location}", "[- snapshot] [+ received]", *diff,
             f"if the change is intended, rewrite the snapshot with: {update}"]
    return "\n".join(lines)


# --- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture
def xla_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's ``snapshot`` with :class:`GraphSnapshotExtension` (sorted JSON under ``snapshots/``)."""
    return snapshot.use_extension(GraphSnapshotExtension)


def _record_fields(signature: Mapping[str, Any], warmup: Sequence[metrics.Snapshot],
                   steady: Sequence[metrics.Snapshot]) -> dict[str, Any]:
    dynamo = signature.get("dynamo")
    xla = signature.get("xla")
    fields: dict[str, Any] = {}
    if dynamo is not None:
        fields.update(calls_captured=dynamo["calls_captured"], unique_graphs=dynamo["unique_graphs"],
                      graph_breaks=sum(dynamo["graph_breaks"].values()),
                      unique_graph_breaks=len(dynamo["graph_breaks"]))
    if xla is not None:
        last = xla["steady_step"]
        fields.update(fallbacks=sum(last["fallbacks"].values()),
                      recompiles=sum(s.compiles for s in steady), compiles=sum(s.compiles for s in warmup))
    return fields


class GraphCheck:
    """The ``xla_graphs`` fixture: ``xla_graphs.check_case(spec, backend, mode)`` measures a zoo case
    (the shared prepared case), records it and compares its signature with the test's snapshot."""

    def __init__(self, request: pytest.FixtureRequest, snapshot: SnapshotAssertion) -> None:
        self.request = request
        self.snapshot = snapshot

    @property
    def item(self) -> pytest.Item:
        node = self.request.node
        assert isinstance(node, pytest.Item)
        return node

    def _record(self, spec: zoo.ModelSpec, backend: Backend, mode: str, status: str, message: str,
                repro: str, **fields: Any) -> None:
        xcfg = get_config(self.request.config)
        record_case(self.item, CaseRecord(
            suite="graphs", name=spec.name, backend=backend.name, mode=mode, status=status, repro=repro,
            message=message, dev=backend.device_kind, batch_size=spec.batch(xcfg.tier), tier=xcfg.tier,
            **fields))

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str) -> dict[str, Any]:
        """Measure, record and check one case; returns its signature."""
        __tracebackhide__ = True
        from pytest_xla_dynamo.parity import engine_for, repro_command

        if not backend.supports(mode):
            raise pytest.UsageError(f"backend {backend.name} does not support mode {mode!r}")
        if not backend.stats:
            pytest.skip(f"backend {backend.name} exposes no graph statistics (no dynamo, no XLA)")
        config = self.request.config
        repro = repro_command(self.item.nodeid, get_config(config), backend.name)
        label = f"{spec.name} / {backend.name} / {mode}"
        try:
            case = engine_for(config).prepared(spec, backend, mode)
            steady = measure_steady(case)
        except Exception as exc:
            _unchecked(config).add(_snapshot_stem(self.snapshot))
            self._record(spec, backend, mode, "fail_to_run", f"{backend.name}: {exc!r}", repro)
            raise
        assert case.warmup is not None
        warmup = case.warmup.per_step
        signature = build_signature(backend, mode, warmup, steady)
        snapshot_failure = compare(self.snapshot, signature, label, repro)
        recompiled = recompiles(steady)
        nonconforming = conformance_problems(backend, mode, signature)
        error: AssertionError | None = None
        if recompiled:
            error = RecompileError(f"{label}: compiled after warm-up ({len(case.warmup.per_step)} steps), "
                                   "every steady step must reuse the compiled graphs:\n  " + "\n  ".join(recompiled))
        elif nonconforming:
            error = GraphConformanceError(f"{label}: " + "\n".join(nonconforming))
        elif snapshot_failure is not None:
            error = GraphSignatureError(snapshot_failure)
        message = str(error).splitlines()[0] if error is not None else ""
        self._record(spec, backend, mode, "pass" if error is None else "fail_graph", message, repro,
                     extra={"signature": signature,
                            "warmup_compile_time_count": [s.count("CompileTime") for s in warmup],
                            "warmup_uncached_compile": [s.count("UncachedCompile") for s in warmup]},
                     **_record_fields(signature, warmup, steady))
        if error is not None:
            extra = f"\n{snapshot_failure}" if snapshot_failure is not None and not isinstance(
                error, GraphSignatureError) else ""
            raise type(error)(f"{error}{extra}\nreproduce: {repro}")
        return signature


@pytest.fixture
def xla_graphs(request: pytest.FixtureRequest, xla_snapshot: SnapshotAssertion) -> GraphCheck:
    """Graph conformance of zoo cases against their snapshots (see :class:`GraphCheck`)."""
    from pytest_xla_dynamo import devices

    reason = devices.skip_reason()
    if reason:
        pytest.skip(reason)
    return GraphCheck(request, xla_snapshot)
