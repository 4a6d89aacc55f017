"""The session's results: the speedup and status tables, and the CSV, JSON Lines and PNG files.

One module per artefact, all working from :class:`~pytest_xla_dynamo.records.CaseRecord` lists, so
every writer is a pure function (unit-testable with hand-made records):

- :mod:`.tables`: the seed's speedup table (a column per backend, a ``geomean`` row), the parity
  status table, number formatting;
- :mod:`.csvfile`: pytorch ``benchmarks/dynamo``'s performance CSV plus our columns;
- :mod:`.jsonl`: JSON Lines (a record and its environment per line), :func:`read_json`, :func:`read_report`
  (the records and their environment), :func:`environment_info`;
- :mod:`.png`: grouped speedup bars (matplotlib, imported only there);
- :mod:`.writer`: the set of files, written whole or not at all (staged, then moved in), and
  :func:`check_report_dir`, the start-up check of ``--xla-report-dir``;
- :mod:`.plugin`: :class:`ReportPlugin`, which writes the set at the end of a session that finished
  (an interrupted one writes nothing and says so) and prints the ``xla-dynamo results`` section.

No torch is imported here.
"""

from __future__ import annotations

from pytest_xla_dynamo.report.csvfile import CSV_COLUMNS, EXTRA_COLUMNS, HARNESS_COLUMNS, csv_row, write_csv
from pytest_xla_dynamo.report.jsonl import (
    ENV_DISTRIBUTIONS,
    THREAD_VARIABLES,
    environment_info,
    read_json,
    read_report,
    write_json,
)
from pytest_xla_dynamo.report.plugin import SECTION, ReportPlugin
from pytest_xla_dynamo.report.png import write_png
from pytest_xla_dynamo.report.tables import (
    MISSING,
    PARITY_SUITE,
    SEED_LABELS,
    TIMING_SUITE,
    Column,
    format_speedup,
    geomean,
    record_speedup,
    speedup_table,
    speedup_tables,
    status_counts,
    status_table,
    timing_modes,
)
from pytest_xla_dynamo.report.writer import (
    BASENAME,
    FILE_FORMATS,
    FILE_SUFFIX,
    ReportSet,
    Terminated,
    check_report_dir,
    report_path,
    write_reports,
)

__all__ = [
    "BASENAME", "CSV_COLUMNS", "ENV_DISTRIBUTIONS", "EXTRA_COLUMNS", "FILE_FORMATS", "FILE_SUFFIX",
    "HARNESS_COLUMNS", "MISSING", "PARITY_SUITE", "SECTION", "SEED_LABELS", "THREAD_VARIABLES", "TIMING_SUITE",
    "Column", "ReportPlugin", "ReportSet", "Terminated", "check_report_dir", "csv_row", "environment_info",
    "format_speedup", "geomean", "read_json", "read_report", "record_speedup", "report_path", "speedup_table",
    "speedup_tables",
    "status_counts", "status_table", "timing_modes", "write_csv", "write_json", "write_png", "write_reports",
]
