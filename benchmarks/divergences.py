"""Every diverging tensor of a run's parity records, per case: what diverges beyond what a known issue explains.

    python benchmarks/divergences.py xla-report[/xla-dynamo.jsonl] [--ignore 'buffer *running_var']

Reads a JSON report (``--xla-report=json``; the file, or the report folder that holds it) and prints, per
parity case that diverged, the diverging tensors by group (loss, outputs, grads, params, buffers) with their
steps and largest error; ``--ignore`` globs (e.g. a registry entry's ``diverging``) split off what is already
explained. Then, for every failing case
(any suite), the registry entries its triage matched at run time (``extra.triage.matches``: the entry's
``raises`` and ``match`` agree with the failure; ``full``: its ``diverging`` covers every diverging tensor),
which says which entry a failure can be added to without a rerun. Figures only; the exit status is 0
whatever diverged.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_xla_dynamo.parity.compare import GROUPS
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.report import read_json
from pytest_xla_dynamo.report.writer import report_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--ignore", action="append", default=[], help="glob of explained tensors (repeatable)")
    args = parser.parse_args()
    path = report_path(args.report, "json") if args.report.is_dir() else args.report
    try:
        records = read_json(path)
    except (OSError, ValueError) as exc:  # a missing or unreadable file, or not a JSON report: no traceback
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        parser.error(f"cannot read the report {str(path)!r}: {detail} (give a JSON report, --xla-report=json, "
                     "or the folder that holds its xla-dynamo.jsonl)")
    for record in records:
        parity = record.parity
        if parity is None or not parity.divergences:
            continue
        divs = parity.divergences
        total = parity.divergences_total if parity.divergences_total is not None else len(divs)
        unexplained = [d for d in divs if not any(fnmatch.fnmatchcase(d["tensor"], g) for g in args.ignore)]
        print(f"{record.name} / {record.backend} / {record.mode}: {total} diverging tensors, "
              f"{len(unexplained)} not covered by {args.ignore or 'nothing'}")
        by_group: dict[str, list[dict[str, object]]] = defaultdict(list)
        for d in divs:
            by_group[str(d["group"])].append(d)
        for group in GROUPS:
            members = by_group.get(group, [])
            if not members:
                continue
            steps = sorted({int(str(d["step"])) for d in members})
            worst = max(members, key=lambda d: float(str(d["max_abs_err"])) if d["max_abs_err"] is not None else 0.0)
            print(f"  {group:<8} {len(members):>3} (steps {', '.join(map(str, steps))}); largest: "
                  f"{worst['tensor']} step {worst['step']}, max abs err {worst['max_abs_err']}")
    print_matches(records)
    return 0


def print_matches(records: list[CaseRecord]) -> None:
    """Each failing case's run-time triage: the exception's first line, the known issue it was declared
    under, and the registry entries it matched (``full`` or ``partial``)."""
    lines = []
    for record in records:
        note = record.parity.triage if record.parity is not None else None
        if note is None or record.status in ("pass", "", None):
            continue
        triage = note.document
        found = triage.get("matches") or []
        matches = ", ".join(f"{m['id']} ({'full' if m.get('full') else 'partial'})" for m in found)
        lines.append(f"{record.suite} {record.name} / {record.backend} / {record.mode}: {record.status}; "
                     f"declared: {triage.get('known') or '-'}; matches: {matches or 'none'}\n"
                     f"    {str(triage.get('first_line', ''))[:160]}")
    if lines:
        print("\nfailing cases and the registry entries their triage matched:")
        print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
