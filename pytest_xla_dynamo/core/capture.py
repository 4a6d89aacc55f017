"""What dynamo captured of a case (pure): graphs, captured calls, graph breaks and skip reasons, and the verdict.

Dynamo can skip a whole frame without counting a graph break: on torch 2.9 a module holding ``nn.LSTM``
runs as plain (lazy) PyTorch, with the reason only in ``torch._dynamo.utils.counters["unimplemented"]``
("Attempted to wrap RNN, GRU, or LSTM"). A parity check of such a case passes without testing the
backend's compiled path at all. :class:`Capture` reads the counters of a case's first steps (a
:class:`~pytest_xla_dynamo.core.metrics.Snapshot` delta) and says whether dynamo captured nothing
(status :data:`NOT_CAPTURED` for a parity pass: pytorch's harness records ``calls_captured`` and
``unique_graphs`` for the same reason), only part of the model (graph breaks or skipped frames: a note),
or all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_xla_dynamo.core.constants import NOT_CAPTURED
from pytest_xla_dynamo.core.metrics import Snapshot, clean_reason

__all__ = ["NOT_CAPTURED", "Capture", "parity_status", "short_reason"]
MAX_REASONS = 5  # reasons kept per kind in a record and a message


def short_reason(reason: str) -> str:
    """A reason's first line, without addresses and folders (dynamo's messages go on with an explanation,
    a hint and a link)."""
    first = next((line for line in str(reason).splitlines() if line.strip()), "")
    return clean_reason(first)


def _merged(reasons: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for reason, count in reasons.items():
        if count > 0:
            key = short_reason(reason)
            out[key] = out.get(key, 0) + int(count)
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_REASONS])


@dataclass(frozen=True)
class Capture:
    """Dynamo's figures for a case's first steps (the compiles happen there)."""

    unique_graphs: int = 0
    calls_captured: int = 0
    graph_breaks: dict[str, int] = field(default_factory=dict)  # short reason -> count
    skipped: dict[str, int] = field(default_factory=dict)  # counters["unimplemented"]: short reason -> count

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> Capture:
        stats = snap.dynamo.get("stats", {})
        return cls(int(stats.get("unique_graphs", 0)), int(stats.get("calls_captured", 0)),
                   _merged(snap.graph_breaks), _merged(snap.dynamo.get("unimplemented", {})))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Capture:
        return cls(int(data.get("unique_graphs", 0)), int(data.get("calls_captured", 0)),
                   dict(data.get("graph_breaks", {})), dict(data.get("skipped", {})))

    @property
    def nothing(self) -> bool:
        """Dynamo compiled no graph and captured no call: the case ran uncompiled."""
        return self.unique_graphs == 0 and self.calls_captured == 0

    @property
    def partial(self) -> bool:
        """Something was captured, but dynamo broke the graph or skipped a frame on the way."""
        return not self.nothing and bool(self.graph_breaks or self.skipped)

    @property
    def verdict(self) -> str:
        return "not captured" if self.nothing else "partial" if self.partial else "captured"

    @property
    def reasons(self) -> list[str]:
        """Why dynamo did not capture everything: skip reasons first, then graph-break reasons."""
        return list(dict.fromkeys([*self.skipped, *self.graph_breaks]))

    def describe(self) -> str:
        """One line: ``dynamo captured nothing (0 graphs, 0 calls); skipped: Attempted to wrap RNN, GRU, or LSTM``."""
        figures = f"{self.unique_graphs} graph{'s' * (self.unique_graphs != 1)}, {self.calls_captured} call" \
                  f"{'s' * (self.calls_captured != 1)}"
        head = {"not captured": "dynamo captured nothing", "partial": "dynamo captured part of the model",
                "captured": "dynamo captured the model"}[self.verdict]
        parts = [f"{head} ({figures})"]
        if self.skipped:
            parts.append("skipped: " + "; ".join(self.skipped))
        if self.graph_breaks:
            breaks = sum(self.graph_breaks.values())
            parts.append(f"{breaks} graph break{'s' * (breaks != 1)}: " + "; ".join(self.graph_breaks))
        if self.nothing and not self.reasons:
            parts.append("no reason counted in its compile (dynamo remembers a frame it skipped: an earlier "
                         "compile of the same code in this process may have given it)")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "unique_graphs": self.unique_graphs, "calls_captured": self.calls_captured,
                "graph_breaks": dict(self.graph_breaks), "skipped": dict(self.skipped),
                "partial": self.partial, "nothing": self.nothing}


def parity_status(status: str, capture: Capture | None) -> str:
    """A parity status with the capture taken into account: a ``pass`` that captured nothing is
    :data:`NOT_CAPTURED`; every other status (and a backend without dynamo: ``capture`` None) is kept."""
    if status == "pass" and capture is not None and capture.nothing:
        return NOT_CAPTURED
    return status
