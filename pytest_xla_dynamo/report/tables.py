"""Result tables: the seed's speedup table (with a geomean row), the parity status table, their formatting.

Pure functions over :class:`~pytest_xla_dynamo.records.CaseRecord` lists. A table is drawn from a list
of :class:`Column` (a header, the text of a model's cell, the text of the summary row's cell), so one
more column (a timing status beside the speedup, say) is one more :class:`Column`, not a new table.
tabulate is imported only when a table is drawn; no torch.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_xla_dynamo.config import MODES
from pytest_xla_dynamo.records import NOT_CAPTURED, PASSING, UNRELIABLE, CaseRecord

TIMING_SUITE = "timing"
PARITY_SUITE = "parity"
# Column titles of the seed's table (pytorch PR #88449) for the backends it had; others: their name.
SEED_LABELS = {"trace_once": "XLA (trace once)", "trace_everytime": "XLA (trace everytime)"}
MISSING = "-"  # a cell with no record at all

Cells = dict[tuple[str, str, str], CaseRecord]


# --- values --------------------------------------------------------------------------------------------


def ordered(values: Iterable[str]) -> list[str]:
    """Distinct values in first-seen order."""
    return list(dict.fromkeys(values))


def sig3(value: float) -> str:
    """``value`` with 3 significant digits, trailing zeros kept (``1.50``, ``12.3``, ``123``)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.2f}"
    text = f"{value:#.3g}"
    if "e" in text:
        return f"{value:.0f}" if abs(value) >= 1 else f"{value:.3g}"
    return text.rstrip(".")


def format_speedup(value: float) -> str:
    """A speedup as the tables show it: ``1.23x``."""
    return sig3(value) + "x"


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values (None when there are none)."""
    good = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return statistics.geometric_mean(good) if good else None


def record_speedup(record: CaseRecord) -> float | None:
    """The record's speedup, or baseline latency / backend latency when only those were stored; None for an
    ``unreliable`` timing (its figure stays in the record, never in a table cell, a geomean or a plot)."""
    if record.status == UNRELIABLE:
        return None
    if record.speedup is not None:
        return record.speedup
    if record.baseline_latency and record.abs_latency:
        return record.baseline_latency / record.abs_latency
    return None


def latest(records: Iterable[CaseRecord]) -> Cells:
    """One record per (model, backend, mode): the last one stored wins."""
    return {record.key: record for record in records}


def joined(values: Iterable[Any], fallback: Any) -> str:
    """The distinct non-empty values as ``a,b``; ``fallback`` (or ``?``) when there are none."""
    distinct = ordered(str(v) for v in values if v not in (None, ""))
    if not distinct:
        return "?" if fallback in (None, "") else str(fallback)
    return ",".join(distinct)


def timing_modes(records: Iterable[CaseRecord]) -> list[str]:
    """The modes that have timing records: train and infer first, in that order, then any other."""
    seen = ordered(r.mode for r in records if r.suite == TIMING_SUITE)
    return [m for m in MODES if m in seen] + [m for m in seen if m not in MODES]


def compared(records: Iterable[CaseRecord], baseline: str | None = None) -> tuple[str, list[CaseRecord]]:
    """The timing records that compare a backend with its baseline: (the baseline's name, the records).

    The baseline is what the records say (``baseline``, the option's value, is the fallback, then
    ``eager``); the baseline backend's own records are left out.
    """
    timing = [r for r in records if r.suite == TIMING_SUITE]
    base = joined((r.baseline for r in timing), baseline or "eager")
    return base, [r for r in timing if r.backend not in (r.baseline or baseline or "eager").split(",")]


# --- drawing -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of a results table: its header, a model's cell, and the summary row's cell."""

    header: str
    cell: Callable[[str], str]
    summary: Callable[[Sequence[str]], str] = lambda models: ""


def grid(columns: Sequence[Column], models: Sequence[str], *, summary: str | None = None) -> str:
    """A tabulate grid: a row per model (first column ``Model``), and a ``summary`` row when named."""
    from tabulate import tabulate

    rows = [[model] + [c.cell(model) for c in columns] for model in models]
    if summary is not None:
        rows.append([summary] + [c.summary(models) for c in columns])
    headers = ["Model"] + [c.header for c in columns]
    return tabulate(rows, headers=headers, tablefmt="grid", disable_numparse=True,
                    colalign=("left",) + ("right",) * (len(headers) - 1))


# --- the seed's speedup table --------------------------------------------------------------------------


def speedup_column(cells: Cells, backend: str, mode: str, *, latency: bool = False) -> Column:
    """A backend's column: ``1.23x`` (with ``latency``, also ``(12.3 ms)``), the record's status when it
    has no speedup, ``-`` without a record; summary: the geomean, ``(n/N)`` when some models lack one."""

    def cell(model: str) -> str:
        record = cells.get((model, backend, mode))
        if record is None:
            return MISSING
        value = record_speedup(record)
        if value is None:
            return record.status
        text = format_speedup(value)
        if latency and record.abs_latency is not None:
            text += f" ({sig3(record.abs_latency)} ms)"
        return text

    def summary(models: Sequence[str]) -> str:
        found = [cells.get((m, backend, mode)) for m in models]
        values = [v for v in (record_speedup(r) for r in found if r is not None) if v is not None]
        mean = geomean(values)
        if mean is None:
            return MISSING
        text = format_speedup(mean)
        return text + (f" ({len(values)}/{len(models)})" if len(values) < len(models) else "")

    return Column(SEED_LABELS.get(backend, backend), cell, summary)


def calibrated(record: CaseRecord) -> int | None:
    """The iterations per run the record's timed runs ran (``xla_min_run_time``'s calibration; None: not said)."""
    runs = record.timing.runs if record.timing is not None else None
    return runs.calibrated_iterations_per_run if runs is not None else None


def iterations_text(records: Sequence[CaseRecord], fallback: int | None = None) -> str:
    """What the title says of the iterations per run: those asked for (``--xla-iterations-per-run``, from the
    records; ``fallback`` where they do not say), and, where the calibration changed them for some case, the
    range that ran: ``iterations per run: 1-40 (calibrated by xla_min_run_time=0.2 s; asked: 1)``."""
    asked = joined((r.iterations_per_run for r in records), fallback)
    ran = [(r, n) for r in records if (n := calibrated(r)) is not None]
    if not any(n != r.iterations_per_run for r, n in ran):
        return f"iterations per run: {asked}"
    low, high = min(n for _, n in ran), max(n for _, n in ran)
    minimum = joined((r.timing.context.min_run_time for r, _ in ran if r.timing is not None), None)
    return (f"iterations per run: {low if low == high else f'{low}-{high}'} (calibrated by "
            f"xla_min_run_time={minimum} s; asked: {asked})")


def speedup_table(records: Iterable[CaseRecord], mode: str, *, baseline: str | None = None,
                  iterations_per_run: int | None = None, repeat: int | None = None,
                  latency: bool = False) -> str:
    """The seed's table for ``mode``: a row per model, a column per backend, a final ``geomean`` row.

    Only records of suite ``timing`` count; the baseline backend's own records are not a column.
    A cell is the speedup (``1.23x``; with ``latency``, also the backend's median ms per iteration), the
    record's status when it has no speedup (``fail_to_run``), or ``-`` when the case has no record. The
    geomean is over the models that have a speedup for that backend, with ``(n/N)`` when some do not.
    The title names the mode, the baseline, iterations per run (as calibrated where the calibration changed
    them: :func:`iterations_text`) and repeat (from the records; the keyword arguments are the fallback when the
    records do not say). Empty string: no such records.
    """
    base, chosen = compared([r for r in records if r.mode == mode], baseline)
    if not chosen:
        return ""
    cells = latest(chosen)
    columns = [speedup_column(cells, b, mode, latency=latency) for b in ordered(r.backend for r in chosen)]
    title = (f"{mode}: speedup over {base} ({iterations_text(chosen, iterations_per_run)}, "
             f"repeat: {joined((r.repeat for r in chosen), repeat)})")
    return title + "\n" + grid(columns, ordered(r.name for r in chosen), summary="geomean")


def speedup_tables(records: Iterable[CaseRecord], **kwargs: Any) -> str:
    """:func:`speedup_table` for every mode with timing records, separated by a blank line."""
    records = list(records)
    tables = [speedup_table(records, mode, **kwargs) for mode in timing_modes(records)]
    return "\n\n".join(t for t in tables if t)


# --- the parity status table ---------------------------------------------------------------------------


#: a failure's triage classification (triage.Triage.classification) -> its note in a parity cell
CLASSIFICATIONS = {"ill_conditioned": "ill-conditioned", "eager_fast_path": "eager's fast path", "refused": "refused",
                   "amplified_rounding": "amplified rounding"}
#: a pass's note that a known issue is present below tolerance, shortened for a table cell (the record keeps it whole)
BELOW_TOLERANCE = re.compile(r"^known issue (\S+) present below tolerance\b.*$")


def status_counts(records: Iterable[CaseRecord]) -> dict[str, int]:
    """pass / fail / xfail (a non-passing case with a known issue) / xpass (a passing one) / not captured
    (a dynamo backend's pass that compiled nothing: neither a pass nor a failure) / flaky."""
    counts = {"pass": 0, "fail": 0, "xfail": 0, "xpass": 0, "not captured": 0, "flaky": 0}
    for record in records:
        passed = record.status in PASSING
        if record.status == NOT_CAPTURED:
            counts["not captured"] += 1
        elif record.known_issue:
            counts["xpass" if passed else "xfail"] += 1
        else:
            counts["pass" if passed else "fail"] += 1
        counts["flaky"] += bool(record.flaky)
    return counts


def status_text(record: CaseRecord | None) -> str:
    """A parity cell: the status, with what it says beside it in brief (:func:`status_notes`)."""
    if record is None:
        return MISSING
    notes = status_notes(record)
    return record.status + (f" ({', '.join(notes)})" if notes else "")


def status_notes(record: CaseRecord, brief: bool = True) -> list[str]:
    """What a case's status says beside it: the known issue (``xfail``/``xpass``), CPU fallbacks, partial capture,
    a known issue present below tolerance (``brief``: its entry alone, as a table cell names it; else the record's
    note with its figures), the triage's classification and ``flaky``."""
    notes = []
    if record.known_issue:
        notes.append(("xpass " if record.status in PASSING else "xfail ") + record.known_issue)
    parity = record.parity
    if parity is not None and parity.cpu_fallbacks:
        notes.append("CPU fallbacks")
    if parity is not None and parity.capture is not None and parity.capture.partial:
        notes.append("partial capture")
    if parity is not None and parity.notes:
        notes += [BELOW_TOLERANCE.sub(r"\1 below tolerance", note) if brief else note for note in parity.notes]
    if parity is not None and parity.triage is not None and parity.triage.classification in CLASSIFICATIONS:
        notes.append(CLASSIFICATIONS[parity.triage.classification])
    if record.flaky:
        notes.append("flaky")
    return notes


def status_column(cells: Cells, backend: str, mode: str) -> Column:
    """A ``backend mode`` column of the status table."""
    return Column(f"{backend} {mode}", lambda model: status_text(cells.get((model, backend, mode))))


def status_table(records: Iterable[CaseRecord]) -> str:
    """Parity results: a row per model, a column per backend x mode, the status in each cell.

    Only records of suite ``parity`` count (the last one per case). A cell with a known issue shows it
    (``fail_accuracy (xfail 4174)``), a flaky case says so, a case without a record is ``-``. A counts
    line follows: ``pass N / fail N / xfail N`` (plus xpass and flaky when there are any).
    Empty string: no parity records.
    """
    chosen = [r for r in records if r.suite == PARITY_SUITE]
    if not chosen:
        return ""
    cells = latest(chosen)
    modes = [m for m in MODES if any(r.mode == m for r in chosen)]
    modes += [m for m in ordered(r.mode for r in chosen) if m not in modes]
    columns = [status_column(cells, b, m) for b in ordered(r.backend for r in chosen) for m in modes
               if any(r.backend == b and r.mode == m for r in chosen)]
    counts = status_counts(cells.values())
    line = " / ".join(f"{k} {v}" for k, v in counts.items() if k in ("pass", "fail", "xfail") or v)
    return grid(columns, ordered(r.name for r in chosen)) + "\n" + line
