"""The committed expected-results files agree with the known-issue registry (issue 30).

A failing row (parity or graph status not passing) must name the registry entry that explains it when
one applies to its case (the entry's ``tests``, ``models`` and ``backends`` filters); a row that names an
entry must fail, and the entry must exist and apply to its case. A failing row whose ``known_issue`` is
empty is then a failure no entry covers: an unclassified failure, which docs/zoo.md has to say.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xla_dynamo.core.constants import DIRECTIONS
from pytest_xla_dynamo.gating.expected import CaseRow, read_expected
from pytest_xla_dynamo.known_issues.registry import KnownIssue, load_registry
from pytest_xla_dynamo.ops.plugin import NOTHING_COMPARED
from pytest_xla_dynamo.records import PASSING

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "snapshots").glob("expected_*.csv"))
PARITY_TEST = {"train": "test_training_parity", "infer": "test_inference_parity"}
GRAPH_TEST = {"train": "test_graph_signature_train", "infer": "test_graph_signature_infer"}


def failing_tests(row: CaseRow) -> list[str]:
    """The suite tests of ``row``'s case that fail (parity, graphs; an op case's ``test_op``, which skips where
    nothing was compared)."""
    if row.mode in DIRECTIONS:
        return ["test_op"] if row.status and row.status not in (*PASSING, *NOTHING_COMPARED) else []
    out = []
    if row.status and row.status not in PASSING:
        out.append(PARITY_TEST[row.mode])
    if row.graph_status and row.graph_status not in PASSING:
        out.append(GRAPH_TEST[row.mode])
    return out


def applies(entry: KnownIssue, row: CaseRow, tests: list[str]) -> bool:
    key = "xla_op" if row.mode in DIRECTIONS else "xla_model"
    params = {key: row.name, "xla_backend": row.backend}
    return any(entry.applies_to(test, params, [row.mode]) for test in tests)


def disagreements(rows: list[CaseRow]) -> list[str]:
    """What ``rows`` say that the registry does not: one line per disagreement."""
    registry = load_registry()
    out = []
    for row in rows:
        where = f"{row.name},{row.backend},{row.mode}"
        tests = failing_tests(row)
        covering = [e.id for e in registry if applies(e, row, tests)] if tests else []
        if row.known_issue:
            entry = registry.get(row.known_issue)
            if entry is None:
                out.append(f"{where}: names {row.known_issue!r}, which is not in the registry")
            elif not tests:
                out.append(f"{where}: passes but names {row.known_issue!r}")
            elif not applies(entry, row, tests):
                out.append(f"{where}: names {row.known_issue!r}, whose filters do not cover it ({', '.join(tests)})")
        elif covering:
            out.append(f"{where}: fails ({', '.join(tests)}) with no known_issue, but {', '.join(covering)} covers it")
    return out


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_expected_rows_agree_with_registry(path: Path) -> None:
    rows = list(read_expected(path).values())
    assert rows
    assert disagreements(rows) == []


def test_disagreements_are_found() -> None:
    """The check itself: an unnamed failing row an entry covers, a wrong id, a passing row naming an entry."""
    fail = "fail_accuracy"
    entry = "local:xla-batchnorm-biased-running-var:zoo"
    rows = [
        CaseRow("torchvision.resnet34", "trace_once", "train", status=fail, graph_status="pass"),
        CaseRow("torchvision.resnet34", "trace_everytime", "train", status=fail, graph_status="pass",
                known_issue="local:no-such-entry"),
        CaseRow("torchvision.resnet34", "trace_once", "infer", status="pass", graph_status="pass", known_issue=entry),
        CaseRow("torchvision.alexnet", "trace_once", "train", status=fail, graph_status="pass", known_issue=entry),
        CaseRow("torchvision.resnet34", "trace_everytime", "infer", status="pass", graph_status="pass"),
    ]
    found = disagreements(rows)
    assert len(found) == 4, found
    assert "covers it" in found[0] and "not in the registry" in found[1]
    assert "passes but names" in found[2] and "do not cover it" in found[3]
