"""The expected-results file: one CSV row per case ``(name, backend, mode)``, parsed, formatted, read and written.

In the spirit of pytorch's ``benchmarks/dynamo/ci_expected_accuracy/*.csv``: columns :data:`COLUMNS`,
rows sorted by case key, so that an updated file diffs cleanly. Written atomically with ordinary
permissions (:mod:`pytest_xla_dynamo.fileio`).

A file may open with ``# key: value`` comment lines, its metadata (:data:`METADATA_KEYS`): the kernel setting
its rows were recorded with (``kernels``, :func:`pytest_xla_dynamo.workers.cpu_isa.kernel_setting`) and the CPU
(``cpu``), so that a gate run under another setting is told so. Files without them read as before.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_xla_dynamo.config import MODES
from pytest_xla_dynamo.core.constants import DIRECTIONS
from pytest_xla_dynamo.fileio import MAX_FIELD_CHARS, TextFileError, atomic_write_text, read_text
from pytest_xla_dynamo.gating.labels import Key
from pytest_xla_dynamo.options import BOOL_VALID, parse_bool
from pytest_xla_dynamo.records import STATUSES
from pytest_xla_dynamo.records.figures import COVERAGES

METADATA_KEYS = ("kernels", "cpu")  # what a file written by the gate records about its rows (see the docstring)
COLUMNS = ("name", "backend", "mode", "status", "graph_status", "graph_breaks", "unique_graphs", "fallbacks",
           "recompiles", "flaky", "known_issue", "coverage")
GRAPH_FIELDS = ("graph_breaks", "unique_graphs", "fallbacks", "recompiles")
KEY_COLUMNS = ("name", "backend", "mode")
GRAPH_STATUSES = ("pass", "fail_graph", "fail_to_run")  # what a graphs-suite record can say
#: a row's mode: a model case's (train, infer) or an op case's direction (forward, backward)
CASE_MODES = (*MODES, *DIRECTIONS)
_EXTRA = "\x00extra"  # where csv.DictReader puts the cells of a row beyond the header's columns


class ExpectedFileError(ValueError):
    """A malformed gate input file (the message names the file, the line and the bad value)."""


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
    graph_status: str = ""  # the graphs suite's outcome: pass or fail_graph (a changed signature, a recompile)
    # what a parity case covered of the backend (records COVERAGES: full, cpu_fallbacks, partial_capture, both);
    # "" not measured (a file written before the column: not compared)
    coverage: str = ""

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
    flag = parse_bool(text)
    if flag is None:
        raise ExpectedFileError(f"{where}: column flaky: invalid value {text!r}; valid: {BOOL_VALID}")
    return flag


def _parse_status(text: str, column: str, valid: tuple[str, ...], where: str) -> str:
    if text and text not in valid:
        raise ExpectedFileError(f"{where}: column {column}: invalid value {text!r}; valid: "
                                f"{', '.join(valid)} or empty (not measured)")
    return text


def parse_expected(text: str, source: str = "<expected>", *, columns_kept: bool = False) -> dict[Key, CaseRow]:
    """Parse the CSV text of an expected-results file into rows keyed by ``(name, backend, mode)``.

    ``name``, ``backend`` and ``mode`` are required columns; the others may be absent (not compared);
    unknown columns are ignored, except where the file is to be rewritten (``columns_kept``: the update writes
    :data:`COLUMNS` only, so another column would be dropped unsaid); pytorch's ``accuracy`` column is read as
    ``status``. A column named twice, a row with more cells than the header has columns, a cell over
    :data:`~pytest_xla_dynamo.fileio.MAX_FIELD_CHARS` characters and what is not CSV are errors.
    """
    skipped, text = _skip_metadata(text.removeprefix("\ufeff"))  # a spreadsheet's BOM
    reader = csv.DictReader(io.StringIO(text), restkey=_EXTRA)
    try:
        return _parse_rows(reader, source, skipped, columns_kept)
    except csv.Error as err:
        raise ExpectedFileError(f"{source}:{reader.line_num + 1 + skipped}: {_csv_problem(err)}") from None


def _csv_problem(err: csv.Error) -> str:
    """What the ``csv`` module's error means, said with the valid form."""
    text = str(err)
    if "field larger than field limit" in text:
        return f"a cell longer than {MAX_FIELD_CHARS:,} characters; valid: shorter cells"
    if "new-line character seen in unquoted field" in text:
        return ("a line that ends in a lone CR (carriage return) outside quotes; valid: LF or CRLF line ends "
                "(save the file with Unix or Windows line ends)")
    return f"not CSV: {text}"


def _check_header(header: list[str], source: str, line: int, columns_kept: bool) -> None:
    missing = [c for c in KEY_COLUMNS if c not in header]
    if missing:
        raise ExpectedFileError(f"{source}: missing column(s) {', '.join(missing)}; the header must include "
                                f"{','.join(COLUMNS)}")
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ExpectedFileError(f"{source}:{line}: column(s) {', '.join(map(repr, twice))} named twice in the header; "
                                f"valid: each column once, of {','.join(COLUMNS)}")
    dropped = [h for h in header if h not in COLUMNS and h != "accuracy"]
    if columns_kept and dropped:
        raise ExpectedFileError(f"{source}:{line}: column(s) {', '.join(map(repr, dropped))} would be dropped by the "
                                f"update, which writes the columns {','.join(COLUMNS)}; valid: those columns (remove "
                                "the others, or gate without updating)")


def _parse_rows(reader: csv.DictReader[str], source: str, skipped: int, columns_kept: bool) -> dict[Key, CaseRow]:
    header = [h.strip() for h in (reader.fieldnames or [])]
    _check_header(header, source, skipped + 1, columns_kept)
    status_column = "status" if "status" in header or "accuracy" not in header else "accuracy"
    rows: dict[Key, CaseRow] = {}
    for raw in reader:
        where = f"{source}:{reader.line_num + skipped}"
        extra = raw.pop(_EXTRA, None)
        if extra:
            raise ExpectedFileError(f"{where}: {len(header) + len(extra)} cells, but the header has {len(header)} "
                                    f"columns (extra: {','.join(extra)!r})")
        cells = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if isinstance(v, str)}
        if not any(cells.values()):
            continue
        for column in KEY_COLUMNS:
            if not cells.get(column):
                raise ExpectedFileError(f"{where}: empty {column}")
        if cells["mode"] not in CASE_MODES:
            raise ExpectedFileError(f"{where}: column mode: invalid value {cells['mode']!r}; valid: "
                                    f"{', '.join(CASE_MODES)}")
        status = _parse_status(cells.get(status_column, ""), "status", STATUSES, where)
        graph_status = _parse_status(cells.get("graph_status", ""), "graph_status", GRAPH_STATUSES, where)
        row = CaseRow(
            name=cells["name"], backend=cells["backend"], mode=cells["mode"], status=status,
            graph_status=graph_status,
            **{f: _parse_count(cells.get(f, ""), f, where) for f in GRAPH_FIELDS},
            flaky=_parse_flag(cells.get("flaky", ""), where), known_issue=cells.get("known_issue", ""),
            coverage=_parse_status(cells.get("coverage", ""), "coverage", COVERAGES, where),
        )
        if row.key in rows:
            raise ExpectedFileError(f"{where}: duplicate case {','.join(row.key)}")
        rows[row.key] = row
    return rows


def read_expected(path: Path, *, columns_kept: bool = False) -> dict[Key, CaseRow]:
    """Read an expected-results CSV (:func:`parse_expected`; ``columns_kept``: the file is to be rewritten); a
    missing file reads as no rows."""
    if path.is_dir():
        raise ExpectedFileError(f"{path}: is a directory, not an expected-results CSV file")
    if not path.exists():
        return {}
    try:
        text = read_text(path)  # UTF-8 (a BOM dropped); UTF-16, binary data: an error naming the file and line
    except TextFileError as err:
        raise ExpectedFileError(str(err)) from None
    return parse_expected(text, str(path), columns_kept=columns_kept)


def _skip_metadata(text: str) -> tuple[int, str]:
    """The number of leading comment lines of ``text`` (its metadata) and the CSV text after them."""
    lines = text.splitlines(keepends=True)
    skipped = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return skipped, "".join(lines[skipped:])


def parse_metadata(text: str) -> dict[str, str]:
    """The ``# key: value`` lines that open an expected file (lines of another form are comments)."""
    skipped, _ = _skip_metadata(text.removeprefix("\ufeff"))
    found: dict[str, str] = {}
    for line in text.removeprefix("\ufeff").splitlines()[:skipped]:
        key, sep, value = line[1:].partition(":")
        if sep and key.strip():
            found[key.strip().lower()] = value.strip()
    return found


def read_metadata(path: Path) -> dict[str, str]:
    """The metadata of an expected file (:func:`parse_metadata`); a missing or unreadable file has none."""
    try:
        return parse_metadata(read_text(path)) if path.is_file() else {}
    except (TextFileError, OSError):
        return {}  # read_expected says what is wrong with it


def format_expected(rows: Iterable[CaseRow], metadata: Mapping[str, str] | None = None) -> str:
    """The CSV text of ``rows``: the ``metadata`` lines, header :data:`COLUMNS`, one row per case, sorted by
    case key."""
    out = io.StringIO()
    for key, value in (metadata or {}).items():
        out.write(f"# {key}: {' '.join(str(value).split())}\n")
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: r.key):
        writer.writerow(row.to_csv())
    return out.getvalue()


def write_expected(path: Path, rows: Iterable[CaseRow], metadata: Mapping[str, str] | None = None) -> None:
    """Write the expected-results file atomically (readers never see a half-written file), with ``metadata``
    (None: the file's own, kept)."""
    atomic_write_text(path, format_expected(rows, read_metadata(path) if metadata is None else metadata))
