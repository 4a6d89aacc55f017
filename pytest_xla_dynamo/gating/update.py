"""Updating the expected file (``--xla-update-expected``): the old rows, with each case of this run rewritten.

A partial run (``-k``, a shard) keeps the rows of the cases it did not run, so every shard of a CI
matrix can refresh its part of one shared file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pytest_xla_dynamo.core.constants import PASSING
from pytest_xla_dynamo.gating.expected import GRAPH_FIELDS, CaseRow
from pytest_xla_dynamo.gating.labels import Key
from pytest_xla_dynamo.gating.run import RunCase


@dataclass(frozen=True)
class UpdateStats:
    """What an update changed."""

    updated: int  # rows written from this run (including new ones)
    added: int  # of which new
    kept: int  # rows of the old file whose cases were not run in this session, kept as they were


def merge_update(old: Mapping[Key, CaseRow], run: Mapping[Key, RunCase]) -> tuple[list[CaseRow], UpdateStats]:
    """The rows of the updated file: the old rows, with each case of this run rewritten from it.

    Only measured values replace old ones (a run without the graphs suite keeps the old graph
    figures); ``flaky`` is sticky (old or voted flaky); a row that passes now (and is not flaky) names this run's
    known issue only (none: an old id is dropped); rows of cases not run are kept unchanged.
    """
    rows = {key: replace(row) for key, row in old.items()}
    added = 0
    for key, case in run.items():
        base = rows.get(key)
        if base is None:
            added += 1
            base = CaseRow(*key)
        measured = case.row
        status = measured.status or base.status
        graph_status = measured.graph_status or base.graph_status
        # a row that passes now, and is not flaky, names no known issue (an old id would claim a failure the run no
        # longer has; a flaky row's id explains its flakiness)
        flaky = base.flaky or measured.flaky
        passing = not flaky and all(s in PASSING for s in (status, graph_status) if s)
        rows[key] = replace(
            base,
            status=status,
            graph_status=graph_status,
            **{f: (getattr(measured, f) if getattr(measured, f) is not None else getattr(base, f))
               for f in GRAPH_FIELDS},
            flaky=flaky,
            coverage=measured.coverage or base.coverage,
            known_issue=measured.known_issue if passing else (measured.known_issue or base.known_issue),
        )
    kept = sum(1 for key in old if key not in run)
    return sorted(rows.values(), key=lambda r: r.key), UpdateStats(len(run), added, kept)
