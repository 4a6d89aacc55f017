"""Graph signatures (pure): what one model x backend x mode does to the graph machinery, as a plain dict.

A *signature* is a plain, deterministic dict of what one model x backend x mode does to the graph
machinery: dynamo's captured graphs and graph breaks, the XLA graphs built and executed per
warm-up step and per steady step, the dynamo graphs the bridge extracted and runs, and the CPU
fallbacks (``aten::*`` counters) per steady step. It is built from the figures of the case's
warm-up (measured when the shared prepared case was first compiled, see
:mod:`pytest_xla_dynamo.core.cases`) and from steady steps measured by the graph suite, which compile
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

Built from per-step counter deltas (:class:`pytest_xla_dynamo.core.metrics.Snapshot`); no torch here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_xla_dynamo.core import metrics
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.metrics import clean_reason

__all__ = ["SIGNATURE_VERSION", "STEADY_STEPS", "build_signature", "clean_reason", "conformance_problems",
           "diff_signatures", "recompiles"]

STEADY_STEPS = 2  # steps measured after warm-up; every one must compile nothing, the last is the signature's
SIGNATURE_VERSION = 1

# torch_xla counters and metrics the signature reads (see pytest_xla_dynamo.core.metrics)
GRAPHS_BUILT = "TensorsGraphSize"  # sample count: lazy graphs cut (compiled or found in the cache)
DYNAMO_GRAPH_RUNS = "RunCachedGraphInputData"  # sample count: runs of dynamo-compiled graphs
DYNAMO_INPUT_SYNCS = "DynamoSyncInputExecuteTime"  # counter: pending inputs executed before a dynamo graph
DYNAMO_EXTRACTED = "DynamoExtractCompiledGraph"  # counter: dynamo graphs the bridge compiled


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
        signature["dynamo"] = {
            "calls_captured": stats.get("calls_captured", 0),
            "unique_graphs": stats.get("unique_graphs", 0),
            "graph_breaks": total.clean_graph_breaks,
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


def causes(signature: Mapping[str, Any]) -> tuple[list[str], tuple[str, ...]]:
    """What the recorded steady step ran beside its graphs, where a conformance failure comes from: its CPU
    fallbacks (each cuts a lazy step), host reads (``.item()``), inputs executed before a dynamo graph; as lines,
    and the fallback ops (for the triage: an entry naming one has its mechanism in the case)."""
    steady = signature.get("xla", {}).get("steady_step", {})
    fallbacks = {op: n for op, n in steady.get("fallbacks", {}).items() if op != metrics.ITEM_FALLBACK}
    lines = []
    if fallbacks:
        lines.append("CPU fallbacks in a steady step (each cuts the lazy graph): "
                     + ", ".join(f"{op} x{n}" for op, n in fallbacks.items()))
    if steady.get("item_calls"):
        lines.append(f"host reads in a steady step: {steady['item_calls']} .item() call(s) "
                     f"({metrics.ITEM_FALLBACK})")
    if steady.get("dynamo_input_syncs"):
        lines.append(f"pending inputs executed before a dynamo graph: {steady['dynamo_input_syncs']}")
    if not lines:
        lines.append("no CPU fallback and no .item() in a steady step: the extra executions are host reads of "
                     "another kind (bool() or a Python branch on a tensor, .cpu(), .tolist())")
    return lines, tuple(fallbacks)


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
