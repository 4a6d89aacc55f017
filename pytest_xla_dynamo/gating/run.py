"""What the run measured, per case: the session's records merged into the gate's view, and the timing baseline.

The status of a case comes from its ``parity`` records, its graph status and figures from its ``graphs`` records,
its speedup from its ``timing`` records; the baseline speedups are read from a JSON report written by
an earlier run (:func:`pytest_xla_dynamo.report.read_json`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_xla_dynamo.gating.expected import GRAPH_FIELDS, CaseRow, ExpectedFileError
from pytest_xla_dynamo.gating.labels import Key
from pytest_xla_dynamo.gating.noise import baseline_noise, between_noise, record_noise
from pytest_xla_dynamo.records import PASSING, UNRELIABLE, CaseRecord, worst_status
from pytest_xla_dynamo.repro import nodeid_command
from pytest_xla_dynamo.timing.comparable import MeasuredWith, measured_with


@dataclass
class RunCase:
    """The run's merged view of one case: measured values plus where they came from."""

    row: CaseRow
    status_repro: str = ""
    graphs_repro: str = ""
    nodeids: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # the parity statuses voted on (xla_accuracy_runs)
    message: str = ""
    graphs_message: str = ""  # the first failing graphs record's message
    triage: str = ""  # the failure's triage in one line (stage, matching known issue, diverging module)

    @property
    def key(self) -> Key:
        return self.row.key


@dataclass(frozen=True)
class TimingCase:
    """The run's speedup of one case, and how to rerun its timing."""

    key: Key
    speedup: float
    repro: str = ""
    unreliable: str = ""  # why the figure is not trusted (a timing record of status ``unreliable``): never gated
    noise: float | None = None  # the speedup's noise (gating.noise.record_noise), for the noise-aware gate
    processes: int = 1  # the processes the speedup is the median of (--xla-timing-processes)
    # --xla-timing-base-python (timing.across.pair): the median of the pairs' ratios, its noise, the base's speedup
    pair_ratio: float | None = None
    pair_noise: float | None = None
    base_speedup: float | None = None


def repro_of(record: CaseRecord) -> str:
    """The record's repro command, or (for a record without one) its node id and backend."""
    if record.repro:
        return record.repro
    return nodeid_command(record.nodeid, record.backend) if record.nodeid else ""


#: the suites whose records give a case's status (the op suite's case: an op, a backend and a direction)
STATUS_SUITES = ("parity", "ops")


def merged_coverage(first: str, second: str) -> str:
    """Two records' coverage of one case as one: what either left out (``full`` only where both were full)."""
    parts = {p for c in (first, second) if c and c != "full" for p in c.split("+")}
    if not parts:
        return "full" if "full" in (first, second) else ""
    return "+".join(p for p in ("cpu_fallbacks", "partial_capture") if p in parts)


def cases_from_records(records: Iterable[CaseRecord]) -> dict[Key, RunCase]:
    """Merge the run's records into one :class:`RunCase` per case key.

    The status comes from the ``parity`` records, the graph status and figures from the ``graphs`` records;
    several records of one case (e.g. two tensor modes) combine to the worst: the first failing
    status, the largest figure. Cases with neither kind of record are not part of the result.
    """
    cases: dict[Key, RunCase] = {}
    statuses: dict[Key, list[str]] = {}
    graph_statuses: dict[Key, list[str]] = {}
    failing_seen: set[Key] = set()
    graph_failing_seen: set[Key] = set()
    for record in records:
        if record.suite not in (*STATUS_SUITES, "graphs"):
            continue
        case = cases.get(record.key)
        if case is None:
            case = cases[record.key] = RunCase(CaseRow(record.name, record.backend, record.mode))
        if record.nodeid and record.nodeid not in case.nodeids:
            case.nodeids.append(record.nodeid)
        if record.known_issue and not case.row.known_issue:
            case.row.known_issue = record.known_issue
        if record.suite in STATUS_SUITES:
            statuses.setdefault(record.key, []).append(record.status)
            case.row.flaky = case.row.flaky or bool(record.flaky)
            if record.parity is not None:
                case.runs.extend(record.parity.runs)
                case.row.coverage = merged_coverage(case.row.coverage, record.parity.coverage)
            if record.status not in PASSING and record.key not in failing_seen:
                failing_seen.add(record.key)  # the repro of the first failing record of the case
                case.status_repro = repro_of(record)
                case.message = record.message
                triage = record.parity.triage if record.parity is not None else None
                case.triage = triage.line if triage is not None else ""
            elif not case.status_repro:
                case.status_repro = repro_of(record)
        else:
            graph_statuses.setdefault(record.key, []).append(record.status)
            if record.status not in PASSING and record.key not in graph_failing_seen:
                graph_failing_seen.add(record.key)  # the message and repro of the first failing graphs record
                case.graphs_message = record.message
                case.graphs_repro = repro_of(record)
            for name in GRAPH_FIELDS:
                value = getattr(record, name)
                current = getattr(case.row, name)
                if value is not None and (current is None or value > current):
                    setattr(case.row, name, int(value))
            if not case.graphs_repro:
                case.graphs_repro = repro_of(record)
    for key, found in statuses.items():
        cases[key].row.status = worst_status(found)
    for key, found in graph_statuses.items():
        cases[key].row.graph_status = worst_status(found)
    return cases


def unreliable_reason(record: CaseRecord) -> str:
    """Why an ``unreliable`` timing record is not trusted (its interference reasons); "" for any other."""
    if record.status != UNRELIABLE:
        return ""
    stats = record.timing_stats
    reasons = stats.interference.reasons if stats is not None else None
    return "; ".join(str(r) for r in reasons) if reasons else (record.message or UNRELIABLE)


def timing_from_records(records: Iterable[CaseRecord]) -> dict[Key, TimingCase]:
    """The run's ``timing`` records with a speedup, one per case: the lowest trusted speedup if several; an
    ``unreliable`` one (kept with its reason, never gated) only where the case has no trusted one."""
    out: dict[Key, TimingCase] = {}
    for record in records:
        if record.suite != "timing" or record.speedup is None:
            continue
        why = unreliable_reason(record)
        stats = record.timing_stats
        processes = (stats.timing_processes if stats is not None else None) or 1
        found = TimingCase(record.key, float(record.speedup), repro_of(record), why, record_noise(record), processes,
                           *((stats.pair_ratio, stats.pair_noise, stats.base_speedup) if stats is not None else ()))
        current = out.get(record.key)
        if (current is None or (current.unreliable and not why)
                or (bool(current.unreliable) == bool(why) and found.speedup < current.speedup)):
            out[record.key] = found
    return out


def _read_report(path: Path) -> list[CaseRecord]:
    """The records of a JSON report (:class:`ExpectedFileError` where it is no readable report)."""
    from pytest_xla_dynamo.report import read_json

    if path.is_dir():
        raise ExpectedFileError(f"{path}: is a directory, not a JSON report")
    try:
        return read_json(path)
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # json.JSONDecodeError is a ValueError
        text = str(err)
        raise ExpectedFileError(text if text.startswith(str(path)) else f"{path}: not a JSON report: {text}") from None


def baseline_speedups(records: Iterable[CaseRecord], path: Path) -> dict[Key, float]:
    """Speedups per case from an earlier run's records (``path``, the report they came from, names it in errors).

    Records of another ``suite`` than ``timing``, records without a speedup and ``unreliable`` ones (an
    untrusted figure is no baseline) are skipped; a record without a numeric speedup is an
    :class:`ExpectedFileError`.
    """
    out: dict[Key, float] = {}
    for record in records:
        if record.suite != "timing" or record.speedup is None or record.status == UNRELIABLE:
            continue
        key = (str(record.name), str(record.backend), str(record.mode))
        try:
            out[key] = float(record.speedup)
        except (TypeError, ValueError):
            raise ExpectedFileError(f"{path}: {','.join(record.key)}: speedup {record.speedup!r} is not a number; "
                                    "valid: a number") from None
    return out


def read_timing_baseline(path: Path) -> dict[Key, float]:
    """:func:`baseline_speedups` of a JSON report (read by the report's own reader; an unreadable file is an
    :class:`ExpectedFileError`)."""
    return baseline_speedups(_read_report(path), path)


@dataclass(frozen=True)
class TimingBaseline:
    """What the speed gate takes from ``--xla-timing-baseline``, the file read once: the speedups, their noise,
    the spread between the baseline's processes (:mod:`pytest_xla_dynamo.gating.noise`) and the timing
    settings it was measured with (:mod:`pytest_xla_dynamo.timing.comparable`)."""

    speedups: dict[Key, float]
    noise: dict[Key, float]
    between: dict[Key, float]
    measured_with: MeasuredWith = field(default_factory=MeasuredWith)  # the settings that set its scale


def load_timing_baseline(path: Path) -> TimingBaseline:
    """The :class:`TimingBaseline` of a JSON report (an unreadable one: :class:`ExpectedFileError`)."""
    records = _read_report(path)
    return TimingBaseline(baseline_speedups(records, path), baseline_noise(records), between_noise(records),
                          measured_with(records))
