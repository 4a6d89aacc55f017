"""The end-of-session known-issue summary, built from the test reports alone.

Every report of a test the registry applies to carries the entry (``PROP_ID``, ``PROP_INFO``), its
outcome and any fix hint as user properties, so :class:`OutcomeLog` works the same in a single
process, on the pytest-xdist controller and for isolated tests. :func:`summary_lines` groups the
tests per outcome and per issue. No torch here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_xla_dynamo.known_issues.apply import PROP_HINT, PROP_ID, PROP_INFO, PROP_OUTCOME
from pytest_xla_dynamo.known_issues.judge import OUTCOMES
from pytest_xla_dynamo.versions import versions_text

#: one row of the summary: (nodeid, the entry's info, fix hints)
Row = tuple[str, dict[str, Any], list[str]]

HEADINGS = {
    "reproduced": "still reproduce (strict xfail, as recorded)",
    "no_longer_reproduces": "no longer reproduce (strict XPASS: update the registry)",
    "other_failure": "fail another way than recorded (failures)",
    "passed": "fixed: pass as regression tests",
    "regression_failed": "fixed per the registry, but their tests fail (regressions)",
    "skipped": "skipped (--xla-known-issues=skip)",
    "run_failed": "registry ignored (--xla-known-issues=run): fail",
    "run_passed": "registry ignored (--xla-known-issues=run): pass",
}
ORDER = ("reproduced", "no_longer_reproduces", "other_failure", "regression_failed", "passed", "skipped",
         "run_failed", "run_passed")
_WITH_TESTS = ("no_longer_reproduces", "other_failure", "regression_failed")  # list their tests and hints


class OutcomeLog:
    """The known-issue outcomes of a session's tests, collected from their reports."""

    def __init__(self) -> None:
        # nodeid -> (info, {outcomes}, [hints])
        self._results: dict[str, tuple[dict[str, Any], set[str], list[str]]] = {}

    def __bool__(self) -> bool:
        return bool(self._results)

    def add(self, report: pytest.TestReport) -> None:
        """Take in one report (any phase); reports of tests without a known issue are ignored."""
        props = _props(report)
        if PROP_ID not in props:
            return
        try:
            info = json.loads(props.get(PROP_INFO, "{}"))
        except (TypeError, ValueError):
            info = {}
        info.setdefault("id", props[PROP_ID])
        entry = self._results.setdefault(report.nodeid, (info, set(), []))
        outcome = props.get(PROP_OUTCOME)
        if outcome is None and report.failed:
            outcome = {"xfail": "other_failure", "regression": "regression_failed",
                       "run": "run_failed"}.get(info.get("action", ""), "other_failure")
        if outcome is not None:
            entry[1].add(outcome)
        if PROP_HINT in props:
            entry[2].append(props[PROP_HINT])

    def outcomes(self) -> dict[str, list[Row]]:
        """outcome -> [(nodeid, info, hints)], one outcome per test (the worst of its phases)."""
        out: dict[str, list[Row]] = {o: [] for o in OUTCOMES}
        for nodeid, (info, seen, hints) in self._results.items():
            if not seen:
                continue
            worst = min(seen, key=OUTCOMES.index)
            out[worst].append((nodeid, info, hints))
        return out


def _props(report: pytest.TestReport) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for prop in report.user_properties or ():
        if isinstance(prop, list | tuple) and len(prop) == 2:
            props[prop[0]] = prop[1]
    return props


def summary_lines(outcomes: Mapping[str, list[Row]]) -> list[str]:
    """The end-of-session summary: per outcome, the issues (with their tests where it matters)."""
    tests = sum(len(v) for v in outcomes.values())
    issues = {info["id"] for v in outcomes.values() for _, info, _ in v}
    lines = ["= xla known issues =",
             f"{len(issues)} known issue(s) in {tests} test(s) with {versions_text()}"]
    for outcome in ORDER:
        rows = outcomes.get(outcome, [])
        if not rows:
            continue
        by_issue: dict[str, list[Row]] = {}
        for row in rows:
            by_issue.setdefault(row[1]["id"], []).append(row)
        lines.append(f"{HEADINGS[outcome]}: {len(by_issue)} issue(s), {len(rows)} test(s)")
        for issue_id, group in sorted(by_issue.items()):
            info = group[0][1]
            url = f" <{info['url']}>" if info.get("url") else ""
            count = f" [{len(group)} tests]" if len(group) > 1 else ""
            lines.append(f"  {issue_id} ({info.get('kind', '?')}): {info.get('title', '')}{url}{count}")
            if outcome in _WITH_TESTS:
                for nodeid, _, hints in group:
                    lines.append(f"    {nodeid}")
                    for hint in dict.fromkeys(hints):
                        lines.append(f"      -> {hint}")
    return lines
