"""Case records: the one result type that suites write and reports and gating read.

A :class:`CaseRecord` is plain data: its identity, status and the harness's figures as fields, what its
check measured beside them as typed figures (:mod:`~pytest_xla_dynamo.records.figures`). Its JSON form
(:meth:`CaseRecord.to_json`, :meth:`CaseRecord.from_json`; the figures as the ``extra`` object of
:mod:`~pytest_xla_dynamo.records.jsonform`) is what the JSON report holds, what travels from pytest-xdist
workers to the controller through ``workeroutput`` and with each test report. The session's records live
in the :class:`RecordStore` of the session object. No torch here.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from pytest_xla_dynamo.core.constants import DIRECTIONS, MODES
from pytest_xla_dynamo.core.constants import NOT_CAPTURED as NOT_CAPTURED
from pytest_xla_dynamo.core.constants import PASSING as PASSING
from pytest_xla_dynamo.core.constants import STATUSES as STATUSES
from pytest_xla_dynamo.core.constants import UNRELIABLE as UNRELIABLE
from pytest_xla_dynamo.records.figures import GraphFigures, JsonObject, ParityFigures, TimingFigures, TimingStats
from pytest_xla_dynamo.records.jsonform import extra_object, json_problem, parse_extra

#: the fields that hold a record's figures: one ``extra`` object in its JSON form
FIGURES = ("parity", "graphs", "timing", "unparsed_extra")
#: the suites whose checks write records (the parity, graphs, timing and op fixtures)
SUITES = ("parity", "graphs", "timing", "ops")
#: the count fields of a record: an integer >= 0 where given
COUNT_FIELDS = ("batch_size", "calls_captured", "unique_graphs", "graph_breaks", "unique_graph_breaks", "fallbacks",
                "recompiles", "compiles", "iterations_per_run", "repeat")


class RecordError(ValueError):
    """A JSON object that is not a record: the message names the missing field or the mistyped one."""


@dataclass
class CaseRecord:
    """What one suite case measured: parity status, timing and graph figures, and how to repro it."""

    suite: str  # "parity" | "timing" | "graphs" | "ops"
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
    # what the check measured beside (the JSON form's ``extra``): the figures of the record's suite
    parity: ParityFigures | None = None
    graphs: GraphFigures | None = None
    timing: TimingFigures | None = None
    # an ``extra`` object read in a layout this version does not write (an older report's): kept as read, so
    # that the record is written back unchanged; nothing reads it
    unparsed_extra: JsonObject = field(default_factory=dict)
    # timing context (appended for the report): what the speedup is measured against, and how
    baseline: str = ""  # the baseline backend of ``speedup`` (--xla-baseline-backend)
    iterations_per_run: int | None = None  # iterations per timed run (--xla-iterations-per-run)
    repeat: int | None = None  # timed runs per case (--xla-repeat)

    @property
    def key(self) -> tuple[str, str, str]:
        """The case key used by baselines: (model, backend, mode)."""
        return (self.name, self.backend, self.mode)

    @property
    def pinned_cpus(self) -> tuple[int, ...]:
        """The CPUs the timed runs were pinned to (``xla_timing_cpus``; ``()``: not pinned, no timed runs, or a
        record from before the option)."""
        runs = self.timing.runs if self.timing is not None else None
        return tuple(runs.timing_cpus or ()) if runs is not None else ()

    @property
    def timing_stats(self) -> TimingStats | None:
        """The timing figures' statistics (None: not a measured timing record)."""
        return self.timing.stats if self.timing is not None else None

    def to_json(self) -> JsonObject:
        """The record's JSON object: its fields in order, the figures as the one ``extra`` object."""
        out: JsonObject = {}
        for f in fields(self):
            if f.name not in FIGURES:
                out[f.name] = getattr(self, f.name)
            elif "extra" not in out:
                out["extra"] = extra_object(self.parity, self.graphs, self.timing, self.unparsed_extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseRecord:
        """The record of a JSON object (:meth:`to_json`'s; keys it does not know are ignored); RecordError
        names a missing field or one of the wrong type."""
        problem = record_problem(data)
        if problem:
            raise RecordError(problem)
        kwargs = {f.name: data[f.name] for f in fields(cls) if f.name not in FIGURES and f.name in data}
        parity, graphs, timing, unparsed = parse_extra(str(data["suite"]), dict(data.get("extra") or {}))
        return cls(**kwargs, parity=parity, graphs=graphs, timing=timing, unparsed_extra=unparsed)


def json_fields() -> list[tuple[str, str, bool]]:
    """The fields of a record's JSON object: ``(name, annotation, required)``, in order."""
    out = []
    for f in fields(CaseRecord):
        if f.name not in FIGURES:
            out.append((f.name, str(f.type), f.default is MISSING and f.default_factory is MISSING))
        elif f.name == FIGURES[0]:
            out.append(("extra", "JsonObject", False))
    return out


def record_problem(data: Mapping[str, Any]) -> str:
    """What keeps the JSON object ``data`` from being a record (``""``: nothing): a missing required field or a
    field of the wrong type."""
    found = json_fields()
    missing = [name for name, _, required in found if required and name not in data]
    if missing:
        return f"missing field(s) {', '.join(map(repr, missing))}"
    for name, annotation, _ in found:
        problem = json_problem(name, annotation, data[name]) if name in data else ""
        if problem:
            return problem
    return ""


def record_value_problem(data: Mapping[str, Any]) -> str:
    """What keeps the values of the JSON object ``data`` (a record read from a file: a timing baseline, a shard to
    merge) from being a record's (``""``: nothing; their types are :func:`record_problem`'s): a suite or a mode
    this plugin does not write, a speedup that is not a finite number > 0, a latency or a spread that is not
    finite (or negative), a negative count. Such a value would print as ``nanx`` or lose its row."""
    suite, mode = data.get("suite"), data.get("mode")
    if isinstance(suite, str) and suite not in SUITES:
        return f"field 'suite': {suite!r} is not a suite; valid: {', '.join(SUITES)}"
    if isinstance(mode, str) and mode not in (*MODES, *DIRECTIONS):
        return f"field 'mode': {mode!r} is not a mode; valid: {', '.join((*MODES, *DIRECTIONS))}"
    for name, low, valid in (("speedup", 0.0, "a finite number > 0"), ("abs_latency", 0.0, "a finite number >= 0"),
                             ("baseline_latency", 0.0, "a finite number >= 0"), ("spread", 0.0, "a finite number >= 0"),
                             ("compilation_latency", -math.inf, "a finite number")):
        value = data.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and not (
                math.isfinite(value) and (value > low if name == "speedup" else value >= low)):
            return f"field {name!r}: {value!r} is out of range; valid: {valid} or null"
    for name in COUNT_FIELDS:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            return f"field {name!r}: {value!r} is negative; valid: an integer >= 0 or null"
    return ""


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
        return json.dumps([r.to_json() for r in self._records])

    def loads(self, text: str) -> None:
        self.extend(CaseRecord.from_json(d) for d in json.loads(text))


def worst_status(statuses: Sequence[str]) -> str:
    """Combine the statuses of several records of one case: the first failing one, else the first."""
    failing = [s for s in statuses if s and s not in PASSING]
    if failing:
        return failing[0]
    return next((s for s in statuses if s), "")


def vote(statuses: Sequence[str]) -> tuple[str, bool]:
    """Majority vote over the statuses of ``xla_accuracy_runs`` runs of one case.

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
