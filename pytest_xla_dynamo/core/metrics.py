"""Counter snapshots of dynamo and torch_xla, read as deltas (never cleared under a running case)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# torch_xla metrics whose sample count is a graph statistic (not a duration)
XLA_COUNT_METRICS = ("CompileTime", "ExecuteTime")
# torch_xla metrics whose sample count is a graph statistic but whose total is not a duration:
# TensorsGraphSize: one sample per lazy graph cut (compiled, or found in the compilation cache);
# RunCachedGraphInputData: one sample per run of a dynamo-compiled graph. Unlike the counters
# (UncachedCompile, CachedCompile, aten::*), metrics survive the dynamo bridge's clear_counters().
XLA_SAMPLE_METRICS = ("TensorsGraphSize", "RunCachedGraphInputData")
# counters that are graph statistics; aten::* (CPU fallbacks) and xla::* are taken as a family
XLA_COUNTERS = ("UncachedCompile", "CachedCompile", "DynamoExtractCompiledGraph", "MarkStep")
ITEM_FALLBACK = "aten::_local_scalar_dense"  # only .item(): listed apart from real fallbacks

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(?:[A-Za-z]:)?[/\\](?:[^\s'\"():]+[/\\])+(?=[^\s/\\'\"():]+)")


def clean_reason(reason: str) -> str:
    """A graph-break reason without what differs between machines and runs (addresses, folders)."""
    text = _HEX.sub("0x…", str(reason))
    text = _PATH.sub("…/", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class Snapshot:
    """Counter values at one moment: torch_xla counters/metric counts and dynamo counters."""

    xla: dict[str, int] = field(default_factory=dict)
    dynamo: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # total seconds of duration metrics

    def delta(self, before: Snapshot) -> Snapshot:
        """What happened between ``before`` and this snapshot (zero entries dropped).

        torch_xla's dynamo bridge clears the XLA *counters* while it compiles (to spot fallbacks);
        a counter lower than before was cleared, and counts from zero: its value is the delta.
        """
        xla: dict[str, int] = {}
        for k, v in self.xla.items():
            old = before.xla.get(k, 0)
            diff = v if v < old else v - old
            if diff:
                xla[k] = diff
        dynamo: dict[str, dict[str, int]] = {}
        for group, values in self.dynamo.items():
            prev = before.dynamo.get(group, {})
            changed = {k: v - prev.get(k, 0) for k, v in values.items() if v - prev.get(k, 0)}
            if changed:
                dynamo[group] = changed
        seconds = {k: v - before.seconds.get(k, 0.0) for k, v in self.seconds.items()}
        return Snapshot(xla, dynamo, seconds)

    def __add__(self, other: Snapshot) -> Snapshot:
        """Counts summed (for adding up per-step deltas)."""
        xla = dict(self.xla)
        for k, v in other.xla.items():
            xla[k] = xla.get(k, 0) + v
        dynamo = {g: dict(v) for g, v in self.dynamo.items()}
        for g, values in other.dynamo.items():
            group = dynamo.setdefault(g, {})
            for k, v in values.items():
                group[k] = group.get(k, 0) + v
        seconds = dict(self.seconds)
        for k, s in other.seconds.items():
            seconds[k] = seconds.get(k, 0.0) + s
        return Snapshot(xla, dynamo, seconds)

    def count(self, name: str) -> int:
        return self.xla.get(name, 0)

    @property
    def compiles(self) -> int:
        """XLA compilations: the ``CompileTime`` sample count (a metric, which the dynamo bridge's
        ``clear_counters()`` leaves alone), or the ``UncachedCompile`` counter where that is higher."""
        return max(self.count("CompileTime"), self.count("UncachedCompile"))

    @property
    def fallbacks(self) -> dict[str, int]:
        """CPU fallback ops (``aten::*`` counters) other than ``.item()``."""
        return {k: v for k, v in self.xla.items() if k.startswith("aten::") and k != ITEM_FALLBACK}

    @property
    def graph_breaks(self) -> dict[str, int]:
        return dict(self.dynamo.get("graph_break", {}))

    @property
    def clean_graph_breaks(self) -> dict[str, int]:
        """Graph breaks by :func:`clean_reason` (reasons that differ only in addresses merged), sorted."""
        out: dict[str, int] = {}
        for reason, count in self.graph_breaks.items():
            key = clean_reason(reason)
            out[key] = out.get(key, 0) + count
        return dict(sorted(out.items()))

    def as_dict(self) -> dict[str, Any]:
        return {"xla": dict(self.xla), "dynamo": {k: dict(v) for k, v in self.dynamo.items()}}


def snapshot() -> Snapshot:
    """The current counter values (torch_xla only where its runtime is up)."""
    from torch._dynamo.utils import counters

    from pytest_xla_dynamo.core import devices

    dynamo = {group: {str(k): int(v) for k, v in values.items()} for group, values in counters.items()}
    xla: dict[str, int] = {}
    seconds: dict[str, float] = {}
    if devices.runtime_up():
        import torch_xla.debug.metrics as met

        for name in met.counter_names():
            value = met.counter_value(name)
            if value is not None:
                xla[name] = int(value)
        for name in XLA_COUNT_METRICS:
            data = met.metric_data(name)
            if data is not None:
                xla[name] = int(data[0])
                seconds[name] = float(data[1]) / 1e9
        for name in XLA_SAMPLE_METRICS:
            data = met.metric_data(name)
            if data is not None:
                xla[name] = int(data[0])
    return Snapshot(xla, dynamo, seconds)
