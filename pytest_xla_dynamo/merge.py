"""Merging sharded runs: the reports of N shards (``--xla-shard=I/N --xla-report=json``) as one set.

``python -m pytest_xla_dynamo merge --out DIR [--expected FILE] [--summary FILE] SHARD_DIR...`` reads
each shard's ``xla-dynamo.jsonl``, refuses duplicate cases (the same test's record in two shards) and
shards timed with different settings, writes one report set (CSV, JSON, PNG) into ``--out``, prints the
parity table and the seed's speedup tables, and with ``--expected`` gives one gate verdict over all
shards: a case of the expected file that no shard ran is MISSING, as in an unsharded run. With
``--update-expected`` it rewrites that file from the shards instead (as ``--xla-update-expected`` does in
a run: rows of cases no shard ran are kept). The Markdown summary (``--summary``) is the one an
unsharded run writes; like ``--xla-summary``, it is appended to where it is ``$GITHUB_STEP_SUMMARY``.

Bad input is a usage error (exit 4, ``ERROR: ...`` naming the file, nothing written): arguments, a shard
that is not a report (a missing folder, a file that is not UTF-8 JSON Lines, a record field of the wrong
type), shards that cannot be merged, an expected file that cannot be read, and every output (``--out``,
``--summary``, ``--expected`` under ``--update-expected``) that could not be written, all checked before
anything is printed or written. No torch here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.records import CaseRecord, sort_records

if TYPE_CHECKING:
    from pytest_xla_dynamo.gating.expected import CaseRow
    from pytest_xla_dynamo.gating.labels import Key

JSON_NAME = "xla-dynamo.jsonl"
DEFAULT_FORMATS = ("csv", "json", "png")
TIMING_SETTINGS = ("baseline", "iterations_per_run", "repeat")


class MergeError(Exception):
    """Shards that cannot be merged: a missing or bad report, a duplicate case, different settings."""


@dataclass
class Shard:
    """One shard's report folder: its records and the environment its report was written in."""

    folder: Path
    records: list[CaseRecord]
    environment: dict[str, Any] = field(default_factory=dict)
    file: Path | None = None  # the report file read (None: ``folder / JSON_NAME``)


def read_shard(folder: Path) -> Shard:
    """The records of ``folder/xla-dynamo.jsonl`` (or of the report file ``folder``); MergeError naming the
    folder or the file (and line) when it is missing or not a report."""
    from pytest_xla_dynamo.report import read_report

    if not folder.exists():
        raise MergeError(f"{folder}: no such folder; give each shard's --xla-report-dir")
    path = folder / JSON_NAME if folder.is_dir() else folder
    if not path.is_file():
        raise MergeError(f"{folder}: no {JSON_NAME}; run each shard with --xla-report=json "
                         "(and --xla-report-dir=<its folder>)")
    try:
        records, environment = read_report(path)
    except ValueError as exc:  # the file and line named: not UTF-8, not JSON, a field of the wrong type
        text = str(exc)
        raise MergeError(text if text.startswith(str(path)) else f"{path}: {text}") from None
    return Shard(path.parent, records, environment, path)


def output_problems(out: Path, formats: Sequence[str], summary: Path | None, expected: Path | None,
                    update_expected: bool) -> list[str]:
    """Why an output of the merge could not be written (``[]``: all can), checked before anything is."""
    from pytest_xla_dynamo.gating.paths import is_step_summary, write_problem
    from pytest_xla_dynamo.report.writer import file_formats, folder_problem

    problems = []
    if file_formats(formats):
        why = folder_problem(out)
        if why:
            problems.append(f"--out: cannot write the reports into {str(out)!r}: {why}; valid: a writable folder "
                            "(created when missing)")
    if summary is not None:
        why = write_problem(summary, append=is_step_summary(summary))
        if why:
            problems.append(f"--summary: cannot write {str(summary)!r}: {why}; valid: a file path in a writable folder")
    if update_expected and expected is not None:
        why = write_problem(expected)
        if why:
            problems.append(f"--expected: cannot write {str(expected)!r} under --update-expected: {why}")
    return problems


def check_outputs(shards: Sequence[Shard], out: Path, formats: Sequence[str], summary: Path | None,
                  expected: Path | None, update_expected: bool) -> None:
    """MergeError where an output of the merge is one of its inputs: ``--out`` a shard's folder (its records would
    be replaced by the merged set), a report file or ``--summary`` the expected file gated against, ``--summary`` a
    shard's report."""
    from pytest_xla_dynamo.fileio import write_target
    from pytest_xla_dynamo.report.writer import file_formats, report_path

    shard_files = {write_target(s.file or s.folder / JSON_NAME).resolve(): str(s.folder) for s in shards}
    inputs = dict(shard_files)
    if expected is not None and not update_expected:
        inputs[write_target(expected).resolve()] = str(expected)
    if file_formats(formats):
        folder = out.resolve()
        shard = next((name for path, name in shard_files.items() if path.parent == folder), None)
        if shard is not None:
            raise MergeError(f"--out: {str(out)!r} is the folder of the shard {shard!r}: the merged reports would "
                             "replace its files; valid: a folder that holds none of the shards")
        for fmt in file_formats(formats):
            if (name := inputs.get(write_target(report_path(out, fmt)).resolve())) is not None:
                raise MergeError(f"--out: the merged {fmt} report {str(report_path(out, fmt))!r} would replace the "
                                 f"input {name!r}; valid: another folder")
    if summary is not None and (name := inputs.get(write_target(summary).resolve())) is not None:
        raise MergeError(f"--summary: {str(summary)!r} is an input of the merge ({name}); valid: another file")


def _case_id(record: CaseRecord) -> tuple[str, ...]:
    return (record.suite, record.nodeid, *record.key)


def check_shards(shards: Sequence[Shard]) -> None:
    """MergeError when two shards hold the same case (the same test's record) or timed with different
    baselines, iterations per run or repeats."""
    seen: dict[tuple[str, ...], int] = {}
    duplicates: list[str] = []
    for index, shard in enumerate(shards):
        for record in shard.records:
            key = _case_id(record)
            other = seen.setdefault(key, index)
            if other != index:
                duplicates.append(f"{record.suite} {'/'.join(record.key)} ({record.nodeid or 'no node id'}) "
                                  f"in {shards[other].folder} and {shard.folder}")
    if duplicates:
        shown = "\n  ".join(duplicates[:10]) + (f"\n  ... {len(duplicates) - 10} more" if len(duplicates) > 10 else "")
        raise MergeError(f"duplicate cases in more than one shard (a shard given twice, or overlapping "
                         f"--xla-shard values):\n  {shown}")
    for name in TIMING_SETTINGS:
        values = {getattr(r, name) for s in shards for r in s.records if r.suite == "timing"}
        values.discard(None)
        values.discard("")
        if len(values) > 1:
            raise MergeError(f"the shards timed with different {name}: {', '.join(sorted(map(str, values)))}; "
                             "a merged speedup table needs one setting")


def merge_records(shards: Sequence[Shard]) -> list[CaseRecord]:
    """All shards' records (check them first with :func:`check_shards`), in the order an unsharded run
    reports them: the zoo's models and the built-in backends in registration order, other names by name."""
    from pytest_xla_dynamo.core.backends import default_registry
    from pytest_xla_dynamo.zoo import model_names

    records = [record for shard in shards for record in shard.records]
    return sort_records(records, model_names(), default_registry().names())


def merged_environment(shards: Sequence[Shard]) -> dict[str, Any]:
    """The first shard's environment, with where the merge came from."""
    env = dict(shards[0].environment) if shards else {}
    env["merged_from"] = [str(s.folder) for s in shards]
    return env


def _timing_setting(records: Sequence[CaseRecord], name: str) -> Any:
    return next((getattr(r, name) for r in records if r.suite == "timing" and getattr(r, name) not in (None, "")),
                None)


def table_lines(records: Sequence[CaseRecord]) -> list[str]:
    """The parity table and the seed's speedup tables of the merged records."""
    from pytest_xla_dynamo.report import speedup_tables, status_table

    lines: list[str] = []
    status = status_table(records)
    if status:
        lines += ["parity", status]
    speed = speedup_tables(records, baseline=_timing_setting(records, "baseline"),
                           iterations_per_run=_timing_setting(records, "iterations_per_run"),
                           repeat=_timing_setting(records, "repeat"))
    if speed:
        lines += ["", speed] if lines else [speed]
    return lines


def _path(value: str) -> Path:
    """A path argument; empty is an error (``Path("")`` is the working folder, where nothing was meant to go)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("empty; valid: a path (an empty one would mean the working folder)")
    return Path(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_xla_dynamo merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=_path, required=True, help="folder for the merged report set")
    parser.add_argument("--expected", type=_path, help="expected-results CSV: one gate verdict over all shards")
    parser.add_argument("--summary", type=_path, help="write the Markdown summary to FILE (appended to where FILE "
                        "is $GITHUB_STEP_SUMMARY, as --xla-summary)")
    parser.add_argument("--formats", default=",".join(DEFAULT_FORMATS), help="comma list of csv,json,png")
    parser.add_argument("--strict-improved", action="store_true", help="fail on IMPROVED cases too")
    parser.add_argument("--update-expected", action="store_true",
                        help="rewrite --expected from the shards (keeps rows no shard ran) instead of gating")
    parser.add_argument("shards", nargs="+", type=_path, metavar="SHARD_DIR", help="a shard's --xla-report-dir")
    return parser


def _inputs(args: argparse.Namespace, formats: Sequence[str]) -> tuple[list[Shard], dict[Key, CaseRow] | None]:
    """The shards and the expected file (None: none given, or one ``--update-expected`` creates), read and
    checked with every output before anything is printed or written: MergeError (or ExpectedFileError) otherwise."""
    from pytest_xla_dynamo.gating import read_expected

    if args.update_expected and args.expected is None:
        raise MergeError("--update-expected needs --expected FILE (the file to rewrite)")
    if args.expected is not None and args.expected.is_dir():
        raise MergeError(f"--expected: {str(args.expected)!r} is a directory; valid: an expected-results CSV file")
    if args.expected is not None and not args.expected.exists() and not args.update_expected:
        raise MergeError(f"--expected: no such file {str(args.expected)!r}")
    if args.expected is not None and args.expected.exists() and not args.expected.is_file():
        raise MergeError(f"--expected: {str(args.expected)!r} is not a regular file (a device, a FIFO or a socket); "
                         "valid: an expected-results CSV file")
    shards = [read_shard(folder) for folder in args.shards]
    check_shards(shards)
    check_outputs(shards, args.out, formats, args.summary, args.expected, args.update_expected)
    expected = (read_expected(args.expected, columns_kept=args.update_expected)
                if args.expected is not None and args.expected.is_file() else None)
    problems = output_problems(args.out, formats, args.summary, args.expected, args.update_expected)
    if problems:
        raise MergeError("\n".join(problems) + "\nnothing written")
    return shards, expected


def main(argv: Sequence[str]) -> int:
    """``python -m pytest_xla_dynamo merge``: exit 0 (merged; gate passed or none), 1 (gate failed),
    4 (bad arguments or shards that cannot be merged; nothing written)."""
    from pytest_xla_dynamo.gating.expected import ExpectedFileError
    from pytest_xla_dynamo.report import write_reports
    from pytest_xla_dynamo.report.writer import FILE_FORMATS

    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return 4 if exc.code else 0
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats:
        return _error(f"--formats: empty ({args.formats!r}): nothing would be written; valid: a comma list of "
                      f"{', '.join(FILE_FORMATS)}")
    bad = [f for f in formats if f not in FILE_FORMATS]
    if bad:
        return _error(f"--formats: invalid value {','.join(bad)!r}; valid: {', '.join(FILE_FORMATS)}")
    try:
        shards, expected = _inputs(args, formats)
    except (MergeError, ExpectedFileError) as exc:
        return _error(str(exc))
    records = merge_records(shards)
    print(f"xla-dynamo merge: {len(records)} records from {len(shards)} shard{'s' if len(shards) != 1 else ''} "
          f"({', '.join(f'{s.folder}: {len(s.records)}' for s in shards)})")
    for line in table_lines(records):
        print(line)
    lines, errors = write_reports(records, formats, args.out, merged_environment(shards),
                                  baseline=_timing_setting(records, "baseline"))
    for line in lines:
        print(line)
    if errors:  # checked writable at the start: a full disk, a folder changed meanwhile
        for line in errors:
            print(f"ERROR: {line}", file=sys.stderr)
        return _error("the merged reports were not written (nothing else was)")
    return _gate(args, records, expected, len(shards))


def _gate(args: argparse.Namespace, records: Sequence[CaseRecord], expected: dict[Key, CaseRow] | None,
          shard_count: int) -> int:
    """The merged run against ``--expected`` (or the file updated), and the summary; the exit code."""
    from pytest_xla_dynamo.gating import (
        cases_from_records,
        compare,
        merge_update,
        render_markdown,
        timing_from_records,
        write_expected,
    )
    from pytest_xla_dynamo.gating.paths import write_summary
    from pytest_xla_dynamo.gating.render import terminal_lines, verdict_line

    run_cases = cases_from_records(records)
    result = None
    if args.update_expected:
        rows, stats = merge_update(expected or {}, run_cases)
        try:
            write_expected(args.expected, rows)
        except OSError as exc:
            return _error(f"--expected: cannot write {str(args.expected)!r}: {exc.strerror or exc}")
        print(f"xla-dynamo merge: updated {stats.updated} rows, kept {stats.kept} rows no shard ran "
              f"({stats.added} new) in {args.expected}")
    elif expected is not None:
        result = compare(expected, run_cases, timing=timing_from_records(records))
        for text, _ in terminal_lines(result, updating=False, strict_improved=args.strict_improved):
            print(text)
        verdict = verdict_line(result, updating=False, strict_improved=args.strict_improved)
        if verdict is not None:
            print(verdict[0])
    if args.summary is not None:
        text = render_markdown(result, run_cases, expected_path=args.expected, strict_improved=args.strict_improved,
                               shard_line=f"merged from {shard_count} shards")
        try:
            how = write_summary(args.summary, text)
        except OSError as exc:
            return _error(f"--summary: cannot write {str(args.summary)!r}: {exc.strerror or exc}")
        print(f"xla-dynamo merge: summary {how} {args.summary}")
    return 1 if result is not None and result.failed(args.strict_improved) else 0


def _error(message: str) -> int:
    print(f"ERROR: {message}", file=sys.stderr)
    return 4
