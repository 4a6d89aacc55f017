"""Case records: the one result type that suites write and reports and gating read.

A :class:`CaseRecord` is plain data (JSON-safe through :meth:`CaseRecord.to_dict`), so it travels
from pytest-xdist workers to the controller through ``workeroutput``. The session's records live in
the :class:`RecordStore` of the session object. No torch here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pytest_xla_dynamo.core.constants import MODES
from pytest_xla_dynamo.core.constants import NOT_CAPTURED as NOT_CAPTURED
from pytest_xla_dynamo.core.constants import PASSING as PASSING
from pytest_xla_dynamo.core.constants import STATUSES as STATUSES
from pytest_xla_dynamo.core.constants import UNRELIABLE as UNRELIABLE


@dataclass
class CaseRecord:
    """What one suite case measured: parity status, timing and graph figures, and how to repro it."""

    suite: str  # "parity" | "timing" | "graphs" | "known_issues" | user-defined
    name: str  # model name
    backend: str
    mode: str  # "train" | "infer"
    status: str = "pass"
    nodeid: str = ""
    repro: str = ""
    message: str = ""
    dev: str = "cpu"
    batch_size: int | None = None
    tier: str = "small"
    # timing (seconds unless named otherwise)
    speedup: float | None = None
    abs_latency: float | None = None  # median ms per iteration of the backend, as the harness
    baseline_latency: float | None = None  # median ms per iteration of the baseline
    compilation_latency: float | None = None  # s: first backend call minus first baseline call
    spread: float | None = None  # (max - min) / median of the backend's runs
    # graphs
    calls_captured: int | None = None
    unique_graphs: int | None = None
    graph_breaks: int | None = None
    unique_graph_breaks: int | None = None
    fallbacks: int | None = None  # aten::* CPU fallbacks, without aten::_local_scalar_dense
    recompiles: int | None = None  # XLA compilations in steady state (must be 0)
    compiles: int | None = None  # XLA compilations during warm-up
    known_issue: str = ""
    flaky: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # timing context (appended for the report): what the speedup is measured against, and how
    baseline: str = ""  # the baseline backend of ``speedup`` (--xla-baseline-backend)
    iterations_per_run: int | None = None  # iterations per timed run (--xla-iterations-per-run)
    repeat: int | None = None  # timed runs per case (--xla-repeat)

    @property
    def key(self) -> tuple[str, str, str]:
        """The case key used by baselines: (model, backend, mode)."""
        return (self.name, self.backend, self.mode)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class RecordStore:
    """The session's records, in arrival order; one merged store on the xdist controller."""

    def __init__(self) -> None:
        self._records: list[CaseRecord] = []

    def add(self, record: CaseRecord) -> CaseRecord:
        self._records.append(record)
        return record

    def extend(self, records: Iterable[CaseRecord]) -> None:
        self._records.extend(records)

    def __iter__(self) -> Iterator[CaseRecord]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def by_suite(self, suite: str) -> list[CaseRecord]:
        return [r for r in self._records if r.suite == suite]

    def dumps(self) -> str:
        return json.dumps([r.to_dict() for r in self._records])

    def loads(self, text: str) -> None:
        self.extend(CaseRecord.from_dict(d) for d in json.loads(text))




def worst_status(statuses: Sequence[str]) -> str:
    """Combine the statuses of several records of one case: the first failing one, else the first."""
    failing = [s for s in statuses if s and s not in PASSING]
    if failing:
        return failing[0]
    return next((s for s in statuses if s), "")


def vote(statuses: Sequence[str]) -> tuple[str, bool]:
    """Majority vote over the statuses of ``--xla-accuracy-runs`` runs of one case.

    Returns ``(status, flaky)``: the most common status, and whether the runs disagreed. A tie goes
    to a failing status (a case that fails half of its runs is not passing), then to the earliest.
    """
    if not statuses:
        raise ValueError("vote() needs at least one status")
    counts = Counter(statuses)
    best = max(counts.values())
    tied = [s for s in dict.fromkeys(statuses) if counts[s] == best]
    failing = [s for s in tied if s not in PASSING]
    return (failing[0] if failing else tied[0]), len(counts) > 1


def sort_records(records: Iterable[CaseRecord], models: Sequence[str], backends: Sequence[str]) -> list[CaseRecord]:
    """``records`` in a stable order: models in ``models``'s order, backends in ``backends``'s, then modes
    (train, infer); names not listed after the listed ones, by name."""
    model_index = {name: i for i, name in enumerate(models)}
    backend_index = {name: i for i, name in enumerate(backends)}
    def key(r: CaseRecord) -> tuple[int, str, int, str, int]:
        return (model_index.get(r.name, len(model_index)), r.name, backend_index.get(r.backend, len(backend_index)),
                r.backend, MODES.index(r.mode) if r.mode in MODES else len(MODES))

    return sorted(records, key=key)
