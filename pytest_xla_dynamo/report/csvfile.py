"""The CSV report: pytorch ``benchmarks/dynamo``'s performance CSV, a row per record.

The harness's columns (:data:`HARNESS_COLUMNS`, in its order) followed by ours (:data:`EXTRA_COLUMNS`).
A value that was not measured is an empty cell (the harness writes 0 for counters it did not read; an
empty cell keeps "not measured" apart from a real 0). Floats carry 6 decimals, as the harness writes
them. ``fallbacks_to_eager`` holds the record's ``fallbacks`` (ops that left the XLA graph for a CPU
``aten::`` fallback); ``compression_ratio`` and the peak memories come from a timing record's
:class:`~pytest_xla_dynamo.records.MemoryFigures` where the device gave an honest figure; no suite counts
the autograd columns (always empty). ``notes`` says what the status says beside it, as the parity table's cell
does but whole (a known issue present below tolerance with its figures), ``; ``-separated.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_xla_dynamo.fileio import atomic_write
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.report.tables import record_speedup, status_notes

# pytorch benchmarks/dynamo/common.py, performance CSV (--performance), in its order.
HARNESS_COLUMNS = (
    "dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
    "eager_peak_mem", "dynamo_peak_mem", "calls_captured", "unique_graphs", "fallbacks_to_eager",
    "graph_breaks", "unique_graph_breaks", "autograd_captures", "autograd_compiles",
)
EXTRA_COLUMNS = ("backend", "mode", "status", "iterations_per_run", "spread", "notes")
CSV_COLUMNS = HARNESS_COLUMNS + EXTRA_COLUMNS


def csv_value(value: Any) -> Any:
    """A cell: empty for None, 6 decimals for a float, ``True``/``False`` for a bool."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6f}"
    return value


#: the columns that are not the record's field of the same name
MEMORY_COLUMNS = ("compression_ratio", "eager_peak_mem", "dynamo_peak_mem")


def csv_row(record: CaseRecord) -> dict[str, Any]:
    """The CSV row of one record (see the module docstring for what fills each column)."""
    stats = record.timing_stats
    row: dict[str, Any] = {}
    for column in CSV_COLUMNS:
        value: Any
        if column == "fallbacks_to_eager":
            value = record.fallbacks
        elif column == "speedup":
            value = record_speedup(record)
        elif column == "notes":
            value = "; ".join(status_notes(record, brief=False)) or None
        elif column in MEMORY_COLUMNS:
            value = getattr(stats.memory, column) if stats is not None else None
        else:
            value = getattr(record, column, None)  # None: a harness column no suite measures
        row[column] = csv_value(value)
    return row


def write_csv(records: Iterable[CaseRecord], path: str | os.PathLike[str]) -> Path:
    """The harness's performance CSV (:data:`CSV_COLUMNS`), a row per record, written atomically."""
    with atomic_write(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for record in records:
            writer.writerow(csv_row(record))
    return Path(path)
