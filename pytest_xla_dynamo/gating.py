"""CI gating: expected results, regression rules, flaky votes, speedup gate, sharding, CI summary.

The gate reads the session's :class:`~pytest_xla_dynamo.records.CaseRecord` s (merged on the xdist
controller before ``pytest_sessionfinish``) and compares them with an expected-results CSV, in the
spirit of pytorch's ``benchmarks/dynamo/ci_expected_accuracy/*.csv`` and ``check_accuracy.py``:

* the file has one row per case ``(name, backend, mode)``, columns :data:`COLUMNS`, sorted;
* the run's records are merged per case: the status from the ``parity`` suite, the graph figures
  (graph breaks, unique graphs, fallbacks, steady-state recompiles) from the ``graphs`` suite;
* each rule is a pure function returning a :class:`Finding` labelled as in ``check_accuracy.py``:
  PASS, XFAIL, REGRESSION (pytorch's FAIL), IMPROVED, MISSING, PASS_BUT_FLAKY, FAIL_BUT_FLAKY, plus
  SLOWER for the optional speedup gate;
* a REGRESSION or SLOWER finding makes the session fail (exit status 1, pytest's TESTS_FAILED) even
  when every test passed; IMPROVED fails it only with ``--xla-strict-improved``; MISSING is reported.

Everything here is pure Python (no torch): the rules, the file format and the sharding are plain
functions, and :class:`GatingPlugin` wires them into pytest.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo.config import get_config
from pytest_xla_dynamo.records import PASSING, STATUSES, CaseRecord, get_store

Key = tuple[str, str, str]  # (model name, backend, mode)

# --- labels ------------------------------------------------------------------------------------------

PASS = "PASS"
XFAIL = "XFAIL"
REGRESSION = "REGRESSION"
SLOWER = "SLOWER"
IMPROVED = "IMPROVED"
MISSING = "MISSING"
PASS_BUT_FLAKY = "PASS_BUT_FLAKY"
FAIL_BUT_FLAKY = "FAIL_BUT_FLAKY"

#: Most severe first: a case's overall label is the most severe label of its findings.
SEVERITY = (REGRESSION, SLOWER, FAIL_BUT_FLAKY, IMPROVED, PASS_BUT_FLAKY, MISSING, XFAIL, PASS)
#: Labels that fail the session (IMPROVED too with ``--xla-strict-improved``).
FAILING = frozenset({REGRESSION, SLOWER})
FLAKY_LABELS = frozenset({PASS_BUT_FLAKY, FAIL_BUT_FLAKY})

#: Exit status of a session the gate failed: pytest's ``ExitCode.TESTS_FAILED``.
GATE_FAILED_EXIT = int(pytest.ExitCode.TESTS_FAILED)

# --- the expected-results file -----------------------------------------------------------------------

COLUMNS = ("name", "backend", "mode", "status", "graph_breaks", "unique_graphs", "fallbacks", "recompiles",
           "flaky", "known_issue")
GRAPH_FIELDS = ("graph_breaks", "unique_graphs", "fallbacks", "recompiles")
KEY_COLUMNS = ("name", "backend", "mode")


class ExpectedFileError(ValueError):
    """A malformed expected-results file (the message names the file, the line and the bad value)."""


@dataclass
class CaseRow:
    """One case of the expected-results file, or what this run measured for one case.

    Unmeasured values are ``""`` (status) or ``None`` (graph figures): they are not compared.
    """

    name: str
    backend: str
    mode: str
    status: str = ""
    graph_breaks: int | None = None
    unique_graphs: int | None = None
    fallbacks: int | None = None
    recompiles: int | None = None
    flaky: bool = False
    known_issue: str = ""

    @property
    def key(self) -> Key:
        return (self.name, self.backend, self.mode)

    def to_csv(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for column in COLUMNS:
            value = getattr(self, column)
            if isinstance(value, bool):
                out[column] = "true" if value else "false"
            else:
                out[column] = "" if value is None else str(value)
        return out


def _parse_count(text: str, column: str, where: str) -> int | None:
    text = text.strip()
    if text == "":
        return None
    try:
        number = int(text)
    except ValueError:
        raise ExpectedFileError(f"{where}: column {column}: invalid value {text!r}; valid: an integer >= 0 "
                                "or empty (not measured)") from None
    if number < 0:
        raise ExpectedFileError(f"{where}: column {column}: invalid value {text!r}; valid: an integer >= 0")
    return number


def _parse_flag(text: str, where: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "y"):
        return True
    if low in ("", "0", "false", "no", "n"):
        return False
    raise ExpectedFileError(f"{where}: column flaky: invalid value {text!r}; valid: true, false, 1, 0, empty")


def parse_expected(text: str, source: str = "<expected>") -> dict[Key, CaseRow]:
    """Parse the CSV text of an expected-results file into rows keyed by ``(name, backend, mode)``.

    ``name``, ``backend`` and ``mode`` are required columns; the others may be absent (not compared);
    unknown columns are ignored; pytorch's ``accuracy`` column is read as ``status``.
    """
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in KEY_COLUMNS if c not in header]
    if missing:
        raise ExpectedFileError(f"{source}: missing column(s) {', '.join(missing)}; the header must include "
                                f"{','.join(COLUMNS)}")
    status_column = "status" if "status" in header or "accuracy" not in header else "accuracy"
    rows: dict[Key, CaseRow] = {}
    for number, raw in enumerate(reader, start=2):
        cells = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if isinstance(v, str)}
        if not any(cells.values()):
            continue
        where = f"{source}:{number}"
        for column in KEY_COLUMNS:
            if not cells.get(column):
                raise ExpectedFileError(f"{where}: empty {column}")
        status = cells.get(status_column, "")
        if status and status not in STATUSES:
            raise ExpectedFileError(f"{where}: column status: invalid value {status!r}; valid: "
                                    f"{', '.join(STATUSES)} or empty (not measured)")
        row = CaseRow(
            name=cells["name"], backend=cells["backend"], mode=cells["mode"], status=status,
            **{f: _parse_count(cells.get(f, ""), f, where) for f in GRAPH_FIELDS},
            flaky=_parse_flag(cells.get("flaky", ""), where), known_issue=cells.get("known_issue", ""),
        )
        if row.key in rows:
            raise ExpectedFileError(f"{where}: duplicate case {','.join(row.key)}")
        rows[row.key] = row
    return rows


def read_expected(path: Path) -> dict[Key, CaseRow]:
    """Read an expected-results CSV (:func:`parse_expected`); a missing file reads as no rows."""
    if not path.exists():
        return {}
    return parse_expected(path.read_text(encoding="utf-8"), str(path))


def format_expected(rows: Iterable[CaseRow]) -> str:
    """The CSV text of ``rows``: header :data:`COLUMNS`, one row per case, sorted by case key."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: r.key):
        writer.writerow(row.to_csv())
    return out.getvalue()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_expected(path: Path, rows: Iterable[CaseRow]) -> None:
    """Write the expected-results file atomically (readers never see a half-written file)."""
    atomic_write_text(path, format_expected(rows))


# --- what the run measured ---------------------------------------------------------------------------


@dataclass
class RunCase:
    """The run's merged view of one case: measured values plus where they came from."""

    row: CaseRow
    status_repro: str = ""
    graphs_repro: str = ""
    nodeids: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # the parity statuses voted on (--xla-accuracy-runs)
    message: str = ""

    @property
    def key(self) -> Key:
        return self.row.key


def worst_status(statuses: Sequence[str]) -> str:
    """Combine the statuses of several records of one case: the first failing one, else the first."""
    failing = [s for s in statuses if s and s not in PASSING]
    if failing:
        return failing[0]
    return next((s for s in statuses if s), "")


def _fallback_repro(record: CaseRecord) -> str:
    if record.repro:
        return record.repro
    if record.nodeid:
        return shlex.join(["pytest", record.nodeid, f"--xla-backend={record.backend}"])
    return ""


def cases_from_records(records: Iterable[CaseRecord]) -> dict[Key, RunCase]:
    """Merge the run's records into one :class:`RunCase` per case key.

    The status comes from the ``parity`` records, the graph figures from the ``graphs`` records;
    several records of one case (e.g. two tensor modes) combine to the worst: the first failing
    status, the largest figure. Cases with neither kind of record are not part of the result.
    """
    cases: dict[Key, RunCase] = {}
    statuses: dict[Key, list[str]] = {}
    failing_seen: set[Key] = set()
    for record in records:
        if record.suite not in ("parity", "graphs"):
            continue
        case = cases.get(record.key)
        if case is None:
            case = cases[record.key] = RunCase(CaseRow(record.name, record.backend, record.mode))
        if record.nodeid and record.nodeid not in case.nodeids:
            case.nodeids.append(record.nodeid)
        if record.known_issue and not case.row.known_issue:
            case.row.known_issue = record.known_issue
        if record.suite == "parity":
            statuses.setdefault(record.key, []).append(record.status)
            case.row.flaky = case.row.flaky or bool(record.flaky)
            runs = record.extra.get("runs") if isinstance(record.extra, dict) else None
            if isinstance(runs, list):
                case.runs.extend(str(r) for r in runs)
            if record.status not in PASSING and record.key not in failing_seen:
                failing_seen.add(record.key)  # the repro of the first failing record of the case
                case.status_repro = _fallback_repro(record)
                case.message = record.message
            elif not case.status_repro:
                case.status_repro = _fallback_repro(record)
        else:
            for name in GRAPH_FIELDS:
                value = getattr(record, name)
                current = getattr(case.row, name)
                if value is not None and (current is None or value > current):
                    setattr(case.row, name, int(value))
            if not case.graphs_repro:
                case.graphs_repro = _fallback_repro(record)
    for key, found in statuses.items():
        cases[key].row.status = worst_status(found)
    return cases


@dataclass(frozen=True)
class TimingCase:
    key: Key
    speedup: float
    repro: str = ""


def timing_from_records(records: Iterable[CaseRecord]) -> dict[Key, TimingCase]:
    """The run's ``timing`` records with a speedup, one per case (the lowest speedup if several)."""
    out: dict[Key, TimingCase] = {}
    for record in records:
        if record.suite != "timing" or record.speedup is None:
            continue
        current = out.get(record.key)
        if current is None or record.speedup < current.speedup:
            out[record.key] = TimingCase(record.key, float(record.speedup), _fallback_repro(record))
    return out


def read_timing_baseline(path: Path) -> dict[Key, float]:
    """Speedups per case from a JSON report (one JSON object per line, as ``report.write_json``).

    Reads ``name``, ``backend``, ``mode`` and ``speedup``; objects of another ``suite`` than
    ``timing`` and objects without a speedup are skipped. A JSON array of such objects is accepted too.
    """
    text = path.read_text(encoding="utf-8")
    objects: list[tuple[int, Any]] = []
    if text.lstrip().startswith("["):
        try:
            objects = [(1, o) for o in json.loads(text)]
        except json.JSONDecodeError as err:
            raise ExpectedFileError(f"{path}: not JSON: {err}") from None
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                objects.append((number, json.loads(line)))
            except json.JSONDecodeError as err:
                raise ExpectedFileError(f"{path}:{number}: not a JSON object: {err}") from None
    out: dict[Key, float] = {}
    for number, obj in objects:
        if not isinstance(obj, dict):
            raise ExpectedFileError(f"{path}:{number}: expected a JSON object per line, got {type(obj).__name__}")
        if obj.get("suite", "timing") != "timing" or obj.get("speedup") is None:
            continue
        try:
            key = (str(obj["name"]), str(obj["backend"]), str(obj["mode"]))
            out[key] = float(obj["speedup"])
        except (KeyError, TypeError, ValueError) as err:
            raise ExpectedFileError(f"{path}:{number}: needs name, backend, mode and a numeric speedup "
                                    f"({err})") from None
    return out


# --- flaky voting ------------------------------------------------------------------------------------


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


# --- the rules (pure functions) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """What one rule found for one case."""

    label: str
    what: str  # "status", a graph field, "speedup" or "case"
    detail: str
    expected: str = ""
    actual: str = ""
    repro: str = ""


def is_pass(status: str) -> bool:
    return status in PASSING


def status_rule(expected: str, actual: str, flaky: bool = False) -> Finding | None:
    """Expected vs. run status (``check_accuracy.py``): equal -> PASS or XFAIL; pass -> fail ->
    REGRESSION; fail -> pass -> IMPROVED; a change of a flaky case -> PASS_BUT_FLAKY or
    FAIL_BUT_FLAKY (by the run's status) instead of flipping the gate. ``None`` if either is unknown."""
    if not expected or not actual:
        return None
    if is_pass(expected) == is_pass(actual):
        if is_pass(actual):
            return Finding(PASS, "status", f"status {actual}", expected, actual)
        detail = f"status {actual}" if actual == expected else f"status {expected} -> {actual} (still failing)"
        return Finding(XFAIL, "status", detail, expected, actual)
    change = f"status {expected} -> {actual}"
    if flaky:
        return Finding(PASS_BUT_FLAKY if is_pass(actual) else FAIL_BUT_FLAKY, "status", f"{change} (flaky)",
                       expected, actual)
    return Finding(IMPROVED if is_pass(actual) else REGRESSION, "status", change, expected, actual)


def count_rule(what: str, expected: int | None, actual: int | None) -> Finding | None:
    """A graph figure that must not grow: more than expected -> REGRESSION, fewer -> IMPROVED,
    equal or unknown -> ``None``."""
    if expected is None or actual is None or expected == actual:
        return None
    label = REGRESSION if actual > expected else IMPROVED
    noun = {"graph_breaks": "graph breaks", "unique_graphs": "unique graphs", "fallbacks": "fallbacks",
            "recompiles": "steady-state recompiles"}.get(what, what)
    return Finding(label, what, f"{noun} {expected} -> {actual}", str(expected), str(actual))


def graph_break_rule(expected: int | None, actual: int | None) -> Finding | None:
    """A new graph break is a REGRESSION; fewer breaks are IMPROVED."""
    return count_rule("graph_breaks", expected, actual)


def fallback_rule(expected: int | None, actual: int | None) -> Finding | None:
    """A new CPU fallback (``aten::*`` counter) is a REGRESSION; fewer are IMPROVED."""
    return count_rule("fallbacks", expected, actual)


def recompile_rule(expected: int | None, actual: int | None) -> Finding | None:
    """A steady-state recompile beyond the expected count is a REGRESSION."""
    return count_rule("recompiles", expected, actual)


def unique_graphs_rule(expected: int | None, actual: int | None) -> Finding | None:
    """More unique graphs than expected is a REGRESSION; fewer are IMPROVED."""
    return count_rule("unique_graphs", expected, actual)


GRAPH_RULES = {"graph_breaks": graph_break_rule, "unique_graphs": unique_graphs_rule,
               "fallbacks": fallback_rule, "recompiles": recompile_rule}


def missing_rule(in_file: bool, in_run: bool) -> Finding | None:
    """A case in the expected file but not in the run, or the other way round: MISSING (reported)."""
    if in_file and not in_run:
        return Finding(MISSING, "case", "in the expected file, not run in this session")
    if in_run and not in_file:
        return Finding(MISSING, "case", "run, but not in the expected file (add it with --xla-update-expected)")
    return None


def speedup_rule(baseline: float | None, actual: float | None, ratio: float) -> Finding | None:
    """The speedup gate: a speedup below ``ratio`` x the baseline speedup is SLOWER (a regression)."""
    if baseline is None or actual is None:
        return None
    floor = ratio * baseline
    if actual < floor:
        return Finding(SLOWER, "speedup", f"speedup {actual:.2f}x < {ratio:g} x baseline {baseline:.2f}x "
                       f"= {floor:.2f}x", f"{baseline:.3g}", f"{actual:.3g}")
    return None


# --- comparing a run -----------------------------------------------------------------------------------


def overall_label(findings: Iterable[Finding]) -> str:
    labels = {f.label for f in findings}
    return next((label for label in SEVERITY if label in labels), PASS)


@dataclass
class CaseVerdict:
    key: Key
    label: str
    findings: list[Finding]
    expected: CaseRow | None = None
    run: RunCase | None = None
    speedup: float | None = None

    def has(self, *labels: str) -> bool:
        return any(f.label in labels for f in self.findings)

    @property
    def flaky(self) -> bool:
        return bool(self.run and self.run.row.flaky) or bool(self.expected and self.expected.flaky)


@dataclass
class GateResult:
    verdicts: list[CaseVerdict]
    compared: bool = True  # an expected file was compared (not only the speedup gate)

    def with_label(self, *labels: str) -> list[CaseVerdict]:
        """Cases with a finding of one of ``labels`` (a case can be listed under several labels)."""
        return [v for v in self.verdicts if v.has(*labels)]

    def counts(self) -> Counter[str]:
        return Counter(v.label for v in self.verdicts)

    def failed(self, strict_improved: bool = False) -> bool:
        labels = FAILING | ({IMPROVED} if strict_improved else set())
        return any(v.has(*labels) for v in self.verdicts)


def compare_case(expected: CaseRow | None, run: RunCase | None, *, compare_rows: bool = True) -> list[Finding]:
    """Every row rule on one case (status, graph figures, missing), with the repro of its source."""
    findings: list[Finding] = []
    if compare_rows:
        missing = missing_rule(expected is not None, run is not None)
        if missing is not None:
            findings.append(missing)
    if expected is None or run is None or not compare_rows:
        return findings
    flaky = expected.flaky or run.row.flaky
    status = status_rule(expected.status, run.row.status, flaky)
    if status is not None:
        if flaky and status.label in (PASS, XFAIL) and run.row.flaky:
            status = replace(status, detail=f"{status.detail} (flaky vote: {', '.join(run.runs) or 'not unanimous'})")
        findings.append(replace(status, repro=run.status_repro))
    for name, rule in GRAPH_RULES.items():
        found = rule(getattr(expected, name), getattr(run.row, name))
        if found is not None:
            findings.append(replace(found, repro=run.graphs_repro or run.status_repro))
    return findings


def compare(expected: Mapping[Key, CaseRow] | None, run: Mapping[Key, RunCase], *,
            timing: Mapping[Key, TimingCase] | None = None, baseline: Mapping[Key, float] | None = None,
            min_speedup_ratio: float | None = None) -> GateResult:
    """Apply every rule to every case of the expected file, the run and (with a ratio) the timing."""
    compare_rows = expected is not None
    expected = expected or {}
    timing = timing or {}
    speed_gate = min_speedup_ratio is not None and baseline is not None
    keys = set(run) | set(expected) | (set(timing) if speed_gate else set())
    verdicts = []
    for key in sorted(keys):
        findings = compare_case(expected.get(key), run.get(key), compare_rows=compare_rows)
        tcase = timing.get(key)
        if speed_gate and tcase is not None:
            assert baseline is not None and min_speedup_ratio is not None
            found = speedup_rule(baseline.get(key), tcase.speedup, min_speedup_ratio)
            if found is not None:
                findings.append(replace(found, repro=tcase.repro))
        verdicts.append(CaseVerdict(key, overall_label(findings), findings, expected.get(key), run.get(key),
                                    tcase.speedup if tcase else None))
    return GateResult(verdicts, compared=compare_rows)


# --- updating the expected file ------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateStats:
    updated: int  # rows written from this run (including new ones)
    added: int  # of which new
    kept: int  # rows of the old file whose cases were not run in this session, kept as they were


def merge_update(old: Mapping[Key, CaseRow], run: Mapping[Key, RunCase]) -> tuple[list[CaseRow], UpdateStats]:
    """The rows of the updated file: the old rows, with each case of this run rewritten from it.

    Only measured values replace old ones (a run without the graphs suite keeps the old graph
    figures); ``flaky`` is sticky (old or voted flaky); rows of cases not run are kept unchanged.
    """
    rows = {key: replace(row) for key, row in old.items()}
    added = 0
    for key, case in run.items():
        base = rows.get(key)
        if base is None:
            added += 1
            base = CaseRow(*key)
        measured = case.row
        rows[key] = replace(
            base,
            status=measured.status or base.status,
            **{f: (getattr(measured, f) if getattr(measured, f) is not None else getattr(base, f))
               for f in GRAPH_FIELDS},
            flaky=base.flaky or measured.flaky,
            known_issue=measured.known_issue or base.known_issue,
        )
    kept = sum(1 for key in old if key not in run)
    return sorted(rows.values(), key=lambda r: r.key), UpdateStats(len(run), added, kept)


# --- sharding ------------------------------------------------------------------------------------------


def shard_group_key(item: pytest.Item) -> str:
    """The sharding group of a test: its model (``xla_model`` parameter) when it has one, else its
    module path and function name (all parametrizations of one test function stay together)."""
    callspec = getattr(item, "callspec", None)
    params = getattr(callspec, "params", None) or {}
    model = params.get("xla_model")
    if model is not None:
        return f"model:{getattr(model, 'name', model)}"
    return "test:" + item.nodeid.split("[", 1)[0]


def assign_shards(group_sizes: Mapping[str, int], total: int) -> dict[str, int]:
    """Assign groups to ``total`` shards (0-based), balanced by test count, deterministically.

    Greedy longest-first: groups sorted by (size descending, key), each to the least loaded shard
    (lowest index on ties). Depends only on the group keys and sizes, so every xdist worker and
    every CI shard that collects the same tests computes the same split.
    """
    if total < 1:
        raise ValueError("total must be >= 1")
    loads = [0] * total
    out: dict[str, int] = {}
    for key in sorted(group_sizes, key=lambda k: (-group_sizes[k], k)):
        index = min(range(total), key=lambda s: (loads[s], s))
        out[key] = index
        loads[index] += group_sizes[key]
    return out


def shard_items(items: Sequence[pytest.Item], index: int, total: int) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """Split ``items`` for shard ``index`` of ``total`` (1-based, as ``--xla-shard=I/N``):
    ``(selected, deselected)``, both in collection order."""
    keys = [shard_group_key(item) for item in items]
    shards = assign_shards(Counter(keys), total)
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item, key in zip(items, keys, strict=True):
        (selected if shards[key] == index - 1 else deselected).append(item)
    return selected, deselected


# --- rendering ---------------------------------------------------------------------------------------


def _case_name(key: Key) -> str:
    return " · ".join(key)


def _fmt(value: object) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def headline(result: GateResult | None, *, failed_tests: int, strict_improved: bool) -> tuple[bool, str]:
    """``(ok, text)``: the session verdict as the gate sees it."""
    problems = []
    if result is not None:
        regressions = result.with_label(*FAILING)
        if regressions:
            problems.append(f"{len(regressions)} regression{'s' if len(regressions) != 1 else ''}")
        if strict_improved and result.with_label(IMPROVED):
            problems.append(f"{len(result.with_label(IMPROVED))} improved (--xla-strict-improved)")
    gate_failed = bool(problems)
    if failed_tests:
        problems.append(f"{failed_tests} failed test{'s' if failed_tests != 1 else ''}")
    notes = []
    if result is not None:
        counts = result.counts()
        same = counts[PASS] + counts[XFAIL]
        notes.append(f"{same} case{'s' if same != 1 else ''} as expected")
        for label in (IMPROVED, PASS_BUT_FLAKY, FAIL_BUT_FLAKY, MISSING):
            if counts[label]:
                notes.append(f"{counts[label]} {label.lower().replace('_', ' ')}")
    if problems:  # when only tests failed, say what the gate found
        gate = "" if gate_failed or not notes else "; gate: " + ", ".join(notes)
        return False, "FAILED: " + ", ".join(problems) + gate
    return True, "PASSED" + (": " + ", ".join(notes) if notes else "")


def _repro_of(verdict: CaseVerdict, labels: Iterable[str]) -> str:
    wanted = set(labels)
    return next((f.repro for f in verdict.findings if f.label in wanted and f.repro), "")


def render_markdown(result: GateResult | None, run: Mapping[Key, RunCase], *, failed_tests: int = 0,
                    strict_improved: bool = False, expected_path: Path | None = None,
                    shard_line: str = "", update_line: str = "", repro_prefix: str = "pytest",
                    gating: bool = True) -> str:
    """The Markdown summary (fit for ``$GITHUB_STEP_SUMMARY``): verdict, regressions with their
    repro commands, improved, missing, flaky, then a compact table of all cases.

    ``gating=False`` (``--xla-update-expected``): the verdict is the tests' alone and the sections
    list the changes written to the expected file."""
    ok, text = headline(result if gating else None, failed_tests=failed_tests, strict_improved=strict_improved)
    lines = [f"## {'✅' if ok else '❌'} xla-dynamo: {text}", ""]
    facts = []
    if expected_path is not None:
        facts.append(f"expected file `{expected_path}`")
    facts.append(f"{len(run)} cases run")
    if shard_line:
        facts.append(shard_line)
    lines += [" · ".join(facts), ""]
    if update_line:
        lines += [update_line, ""]
    if not gating and result is not None:
        lines += ["Not gating (`--xla-update-expected`): the sections below are the changes against the "
                  "previous expected file.", ""]
    verdicts = result.verdicts if result is not None else []

    def findings_text(verdict: CaseVerdict, labels: Iterable[str]) -> str:
        wanted = set(labels)
        return "; ".join(f.detail for f in verdict.findings if f.label in wanted)

    if result is not None:
        regressions = result.with_label(*FAILING)
        if regressions:
            lines += [f"### Regressions ({len(regressions)})", ""]
            for v in regressions:
                why = ""
                if v.run is not None and v.run.message and any(f.what == "status" for f in v.findings
                                                               if f.label in FAILING):
                    first = v.run.message.strip().splitlines()[0] if v.run.message.strip() else ""
                    why = f" — {first[:200]}" if first else ""
                lines.append(f"- **{_case_name(v.key)}**: {findings_text(v, FAILING)}{why}")
                repro = _with_prefix(_repro_of(v, FAILING), repro_prefix)
                if repro:
                    lines += ["", "  ```bash", f"  {repro}", "  ```"]
            lines.append("")
        improved = result.with_label(IMPROVED)
        if improved:
            lines += [f"### Improved ({len(improved)})", ""]
            lines += [f"- **{_case_name(v.key)}**: {findings_text(v, [IMPROVED])}" for v in improved]
            lines += ["", "Update the expected file with `--xla-update-expected` if the change is intended.", ""]
        missing = result.with_label(MISSING)
        if missing:
            lines += [f"### Missing ({len(missing)})", ""]
            body = [f"- {_case_name(v.key)}: {findings_text(v, [MISSING])}" for v in missing]
            if len(body) > 10:
                lines += ["<details><summary>cases in only one of the expected file and the run</summary>", ""]
                lines += [*body, "", "</details>"]
            else:
                lines += body
            lines.append("")
        flaky = [v for v in verdicts if v.has(*FLAKY_LABELS) or (v.run is not None and v.run.row.flaky)]
        if flaky:
            lines += [f"### Flaky ({len(flaky)})", ""]
            for v in flaky:
                runs = f" (runs: {', '.join(v.run.runs)})" if v.run is not None and v.run.runs else ""
                detail = "; ".join(f.detail for f in v.findings if f.what == "status") or "flaky"
                lines.append(f"- {_case_name(v.key)}: {v.label}: {detail}{runs}")
            lines.append("")
    by_key = {v.key: v for v in verdicts}
    keys = sorted(set(run) | set(by_key))
    if keys:
        lines += ["### All cases", "",
                  "| model | backend | mode | status | breaks | graphs | fallbacks | recompiles | speedup | verdict |",
                  "|---|---|---|---|--:|--:|--:|--:|--:|---|"]
        for key in keys:
            case = run.get(key)
            verdict = by_key.get(key)
            row = case.row if case is not None else None
            if row is None:  # not run: show what the expected file says, in parentheses
                exp = verdict.expected if verdict is not None else None
                cells = [*key] + [f"({_fmt(getattr(exp, f))})" if exp is not None else "–"
                                  for f in ("status", *GRAPH_FIELDS)]
            else:
                cells = [*key, _fmt(row.status)] + [_fmt(getattr(row, f)) for f in GRAPH_FIELDS]
            cells.append(_fmt(verdict.speedup if verdict else None))
            cells.append(verdict.label if verdict is not None and result is not None else "–")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _with_prefix(repro: str, prefix: str) -> str:
    """Rewrite a ``pytest ...`` repro for a session launched another way (``python -m pytest_xla_dynamo``)."""
    if repro and prefix != "pytest" and repro.startswith("pytest "):
        return prefix + repro[len("pytest"):]
    return repro


# --- the pytest plugin ---------------------------------------------------------------------------------

SHARD_WORKEROUTPUT_KEY = "xla_dynamo_shard"


class _GatingXdist:
    """xdist-only hook (registered only with xdist): a worker's shard counts reach the controller."""

    def __init__(self, plugin: GatingPlugin) -> None:
        self.plugin = plugin

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        counts = getattr(node, "workeroutput", {}).get(SHARD_WORKEROUTPUT_KEY)
        if counts and self.plugin.shard_counts is None:
            self.plugin.shard_counts = (int(counts[0]), int(counts[1]))


class GatingPlugin:
    """Expected-results gate, speedup gate, ``--xla-shard`` and the Markdown summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.xcfg = get_config(config)
        self.worker = hasattr(config, "workerinput")
        self.expected: dict[Key, CaseRow] | None = None
        self.baseline: dict[Key, float] | None = None
        self.shard_counts: tuple[int, int] | None = None
        self._failed_nodeids: set[str] = set()
        self.result: GateResult | None = None
        self.run_cases: dict[Key, RunCase] = {}
        self.update_line = ""
        self.notes: list[str] = []
        if not self.worker:
            try:
                if self.xcfg.expected is not None:
                    self.expected = read_expected(self.xcfg.expected)
                if self.xcfg.min_speedup_ratio is not None and self.xcfg.timing_baseline is not None:
                    self.baseline = read_timing_baseline(self.xcfg.timing_baseline)
            except (ExpectedFileError, OSError) as err:
                raise pytest.UsageError(f"xla-dynamo gate: {err}") from None
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_GatingXdist(self), "xla_dynamo_gating_xdist")

    # header and sharding

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        if self.xcfg.expected is not None:
            rows = len(self.expected or {})
            mode = "updating" if self.xcfg.update_expected else "gating against"
            lines.append(f"xla-dynamo gate: {mode} {self.xcfg.expected} ({rows} rows)"
                         + (", strict improved" if self.xcfg.strict_improved else ""))
        if self.xcfg.min_speedup_ratio is not None:
            lines.append(f"xla-dynamo gate: speedup >= {self.xcfg.min_speedup_ratio:g} x {self.xcfg.timing_baseline}")
        if self.xcfg.shard is not None:
            lines.append(f"xla-dynamo: shard {self.xcfg.shard[0]}/{self.xcfg.shard[1]}")
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """``--xla-shard=I/N``: keep this shard's tests (after ``-k``/``-m`` deselection)."""
        if self.xcfg.shard is None:
            return
        index, total = self.xcfg.shard
        selected, deselected = shard_items(items, index, total)
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = selected
        self.shard_counts = (len(selected), len(selected) + len(deselected))
        if self.worker:
            config.workeroutput[SHARD_WORKEROUTPUT_KEY] = list(self.shard_counts)  # type: ignore[attr-defined]

    @property
    def shard_line(self) -> str:
        if self.xcfg.shard is None:
            return ""
        index, total = self.xcfg.shard
        if self.shard_counts is None:
            return f"shard {index}/{total}"
        return f"shard {index}/{total}: {self.shard_counts[0]} of {self.shard_counts[1]} tests"

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        return [self.shard_line] if self.xcfg.shard is not None and self.shard_counts is not None else []

    # results

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.worker and report.failed:
            self._failed_nodeids.add(report.nodeid)

    @property
    def failed_tests(self) -> int:
        return len(self._failed_nodeids)

    @property
    def repro_prefix(self) -> str:
        from pytest_xla_dynamo import __main__ as entry

        return entry.REPRO_PREFIX if entry.launched_by_main(self.config) else "pytest"

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.worker:
            return
        xcfg = self.xcfg
        store = list(get_store(self.config))
        self.run_cases = cases_from_records(store)
        timing = timing_from_records(store)
        if self.expected is not None or self.baseline is not None:
            self.result = compare(self.expected, self.run_cases, timing=timing, baseline=self.baseline,
                                  min_speedup_ratio=xcfg.min_speedup_ratio)
        if xcfg.update_expected and xcfg.expected is not None:
            self._update(int(session.exitstatus))
        elif self.result is not None and self.result.failed(xcfg.strict_improved):
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = GATE_FAILED_EXIT
        self._junit_property()
        if xcfg.summary is not None:
            self._write_summary(xcfg.summary)

    def _update(self, exitstatus: int) -> None:
        path = self.xcfg.expected
        assert path is not None
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            self.update_line = f"xla-dynamo: {path} not updated: the session did not finish (exit status {exitstatus})"
            return
        rows, stats = merge_update(self.expected or {}, self.run_cases)
        write_expected(path, rows)
        self.update_line = (f"xla-dynamo: updated {stats.updated} rows, kept {stats.kept} rows not run in this "
                            f"session ({stats.added} new) in {path}")

    def _junit_property(self) -> None:
        if self.result is None or self.xcfg.update_expected:
            return
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - pytest internals moved
            return
        xml = self.config.stash.get(xml_key, None)
        if xml is None:
            return
        _, text = headline(self.result, failed_tests=self.failed_tests, strict_improved=self.xcfg.strict_improved)
        xml.add_global_property("xla_gate", text)
        for label, count in sorted(self.result.counts().items()):
            xml.add_global_property(f"xla_gate_{label.lower()}", count)

    def _write_summary(self, path: Path) -> None:
        text = render_markdown(self.result, self.run_cases, failed_tests=self.failed_tests,
                               strict_improved=self.xcfg.strict_improved, expected_path=self.xcfg.expected,
                               shard_line=self.shard_line, update_line=self.update_line,
                               repro_prefix=self.repro_prefix, gating=not self.xcfg.update_expected)
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if step_summary and Path(step_summary).resolve() == path.resolve():
            # GitHub's job summary file is appended to by every step (`>> $GITHUB_STEP_SUMMARY`)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(text + "\n")
        else:
            atomic_write_text(path, text + "\n")

    # terminal

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.worker:
            return
        tr = terminalreporter
        result = self.result
        if result is None and not self.update_line and self.xcfg.shard is None:
            return
        tr.section("xla-dynamo gate")
        if self.xcfg.shard is not None:
            tr.write_line(self.shard_line)
        updating = self.xcfg.update_expected
        if result is not None and updating:
            changed = result.with_label(*FAILING, IMPROVED, *FLAKY_LABELS)
            tr.write_line("changes against the previous expected file (written, not gating):" if changed else
                          "no changes against the previous expected file")
        if result is not None:
            counts = result.counts()
            if not updating:
                tr.write_line("cases: " + ", ".join(f"{counts[label]} {label}" for label in SEVERITY
                                                    if counts[label]))
            prefix = self.repro_prefix
            for title, labels in (("REGRESSION", FAILING), ("IMPROVED", (IMPROVED,)),
                                  ("FLAKY", tuple(FLAKY_LABELS))):
                for v in result.with_label(*labels):
                    detail = "; ".join(f.detail for f in v.findings if f.label in labels)
                    label = next(f.label for f in v.findings if f.label in labels)
                    tr.write_line(f"{label:<15} {_case_name(v.key)}: {detail}", red=title == "REGRESSION",
                                  green=title == "IMPROVED", yellow=title == "FLAKY")
                    repro = _with_prefix(_repro_of(v, labels), prefix)
                    if repro and title == "REGRESSION":
                        tr.write_line(f"    reproduce: {repro}")
            missing = result.with_label(MISSING)
            if missing and not updating:
                shown = ", ".join(_case_name(v.key) for v in missing[:5])
                more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
                noun = "case" if len(missing) == 1 else "cases"
                tr.write_line(f"MISSING         {len(missing)} {noun} ({shown}{more}); reported, not failing")
        if self.update_line:
            tr.write_line(self.update_line)
        if self.xcfg.summary is not None:
            tr.write_line(f"xla-dynamo: summary written to {self.xcfg.summary}")
        if result is not None and not updating:
            failed = result.failed(self.xcfg.strict_improved)
            text = headline(result, failed_tests=0, strict_improved=self.xcfg.strict_improved)[1]
            if failed:
                tr.write_line(f"xla-dynamo gate {text} (exit status {GATE_FAILED_EXIT})", red=True, bold=True)
            else:
                tr.write_line(f"xla-dynamo gate {text}", green=True)
        elif result is not None:
            tr.write_line("xla-dynamo gate: not gating (--xla-update-expected)")
