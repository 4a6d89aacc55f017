"""Tests of pytest_xla_dynamo.known_issues.crashes: the verdict on a crashed isolated test."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_xla_dynamo.known_issues.apply import PROP_OUTCOME, Applied, applied_key
from pytest_xla_dynamo.known_issues.crashes import CrashVerdict, crash_verdict
from pytest_xla_dynamo.known_issues.registry import parse_entry


def _item(applied: Applied | None) -> pytest.Item:
    """What crash_verdict reads of an item: its stash."""
    stash = pytest.Stash()
    if applied is not None:
        stash[applied_key] = applied
    return cast(pytest.Item, SimpleNamespace(stash=stash))


def _crash(action: str = "xfail", **kw: Any) -> Applied:
    data = {"id": "local:crash", "title": "dies", "kind": "crash", "signal": "SIGABRT", "match": "abort here", **kw}
    return Applied(parse_entry(data, source="r.toml"), action != "regression", action)


def test_not_a_known_crash() -> None:
    assert crash_verdict(_item(None), "SIGSEGV", -11, "") == CrashVerdict(None, "crashed with signal SIGSEGV: "
                                                                                "not a known crash")
    assert crash_verdict(_item(None), None, 3, "").explanation == "crashed with exit code 3: not a known crash"


def test_the_known_crash_is_an_xfail() -> None:
    verdict = crash_verdict(_item(_crash()), "SIGABRT", -6, "... abort here ...")
    assert verdict == CrashVerdict("local:crash: dies [crashed with signal SIGABRT]",
                                   "known crash local:crash: crashed with signal SIGABRT",
                                   ((PROP_OUTCOME, "reproduced"),))


@pytest.mark.parametrize(("signal", "output", "explanation"), [
    ("SIGSEGV", "abort here", "known crash local:crash expects signal SIGABRT, got signal SIGSEGV"),
    ("SIGABRT", "something else", "known crash local:crash: the crash output does not match 'abort here'"),
])
def test_another_crash_is_a_failure(signal: str, output: str, explanation: str) -> None:
    verdict = crash_verdict(_item(_crash()), signal, -6, output)
    assert verdict == CrashVerdict(None, explanation, ((PROP_OUTCOME, "other_failure"),))


def test_a_crash_where_an_exception_was_recorded() -> None:
    applied = Applied(parse_entry({"id": "local:e", "kind": "error", "raises": "ValueError"}, source="r"),
                      True, "xfail")
    verdict = crash_verdict(_item(applied), "SIGSEGV", -11, "")
    assert verdict == CrashVerdict(None, "known issue local:e is recorded as error (ValueError), but the test "
                                         "crashed with signal SIGSEGV", ((PROP_OUTCOME, "other_failure"),))


@pytest.mark.parametrize(("action", "outcome"), [("regression", "regression_failed"), ("run", "run_failed")])
def test_a_crash_of_a_regression_test_or_under_run(action: str, outcome: str) -> None:
    verdict = crash_verdict(_item(_crash(action)), "SIGABRT", -6, "abort here")
    assert verdict == CrashVerdict(None, f"crashed with signal SIGABRT (known issue local:crash, action {action})",
                                   ((PROP_OUTCOME, outcome),))
