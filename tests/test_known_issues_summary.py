"""Tests of pytest_xla_dynamo.known_issues.summary: the outcome log built from reports, and the summary lines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_xla_dynamo.known_issues.apply import PROP_HINT, PROP_ID, PROP_INFO, PROP_OUTCOME
from pytest_xla_dynamo.known_issues.judge import OUTCOMES
from pytest_xla_dynamo.known_issues.summary import HEADINGS, ORDER, OutcomeLog, summary_lines


def test_summary_lines() -> None:
    info = {"id": "local:a", "title": "A", "url": "https://x/1", "kind": "error"}
    fixed = {"id": "local:b", "title": "B", "url": "", "kind": "cpu_fallback"}
    lines = summary_lines({
        "reproduced": [("t.py::test_a[1]", info, []), ("t.py::test_a[2]", info, [])],
        "no_longer_reproduces": [("t.py::test_c", {**info, "id": "local:c"}, ["reg.toml:3: do this"])],
        "passed": [("t.py::test_b", fixed, [])],
    })
    assert lines[0] == "= xla known issues ="
    assert lines[1].startswith("3 known issue(s) in 4 test(s) with torch ")
    assert lines[2:] == [
        "still reproduce (strict xfail, as recorded): 1 issue(s), 2 test(s)",
        "  local:a (error): A <https://x/1> [2 tests]",
        "no longer reproduce (strict XPASS: update the registry): 1 issue(s), 1 test(s)",
        "  local:c (error): A <https://x/1>",
        "    t.py::test_c",
        "      -> reg.toml:3: do this",
        "fixed: pass as regression tests: 1 issue(s), 1 test(s)",
        "  local:b (cpu_fallback): B",
    ]


def test_every_outcome_has_a_heading() -> None:
    assert sorted(HEADINGS) == sorted(ORDER) == sorted(OUTCOMES)


def _report(nodeid: str, when: str, outcome: str, props: dict[str, Any]) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("t.py", 1, nodeid), {}, outcome, None, when,  # type: ignore[arg-type]
                             user_properties=list(props.items()))


def test_outcome_log_keeps_the_worst_outcome_per_test() -> None:
    info = {"id": "local:a", "title": "A", "kind": "error", "action": "xfail"}
    base = {PROP_ID: "local:a", PROP_INFO: json.dumps(info)}
    log = OutcomeLog()
    assert not log
    log.add(_report("t.py::test_plain", "call", "failed", {}))  # no known issue: ignored
    assert not log
    log.add(_report("t.py::test_a", "setup", "passed", base))
    log.add(_report("t.py::test_a", "call", "skipped", {**base, PROP_OUTCOME: "reproduced"}))
    log.add(_report("t.py::test_a", "teardown", "failed", base))  # untagged failure of an xfail: other_failure
    log.add(_report("t.py::test_b", "call", "failed", {**base, PROP_OUTCOME: "no_longer_reproduces",
                                                        PROP_HINT: "do this"}))
    log.add(_report("t.py::test_c", "call", "passed", {PROP_ID: "local:c", PROP_INFO: "not json"}))
    assert log
    outcomes = log.outcomes()
    assert list(outcomes) == list(OUTCOMES)
    assert outcomes["other_failure"] == [("t.py::test_a", info, [])]
    assert outcomes["no_longer_reproduces"] == [("t.py::test_b", info, ["do this"])]
    assert outcomes["reproduced"] == []
    assert all(nodeid != "t.py::test_c" for rows in outcomes.values() for nodeid, _, _ in rows)  # no outcome
