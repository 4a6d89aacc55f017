"""Crash verdicts: how a crashed isolated test is reported against its known issue (called by isolation).

A test that kills its interpreter cannot report itself; the isolation plugin builds its report and
asks :func:`crash_verdict` whether the crash is the known one (an xfail) or a failure, and why.
No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_xla_dynamo.known_issues.apply import PROP_OUTCOME, applied_issue


@dataclass(frozen=True)
class CrashVerdict:
    """How a crashed isolated test is reported: xfailed (``xfail_reason``) or failed."""

    xfail_reason: str | None
    explanation: str
    user_properties: tuple[tuple[str, str], ...] = ()


def crash_verdict(item: pytest.Item, signal_name: str | None, returncode: int, output: str) -> CrashVerdict:
    """Judge a crash of ``item`` (in an isolated child) against its known issue, if any."""
    applied = applied_issue(item)
    how = f"signal {signal_name}" if signal_name else f"exit code {returncode}"
    if applied is None:
        return CrashVerdict(None, f"crashed with {how}: not a known crash")
    entry = applied.entry
    if applied.action == "xfail" and entry.kind == "crash":
        if entry.signal and entry.signal != signal_name:
            return CrashVerdict(None, f"known crash {entry.id} expects signal {entry.signal}, got {how}",
                                ((PROP_OUTCOME, "other_failure"),))
        if not entry.matches(output):
            return CrashVerdict(None, f"known crash {entry.id}: the crash output does not match "
                                      f"{entry.match!r}", ((PROP_OUTCOME, "other_failure"),))
        return CrashVerdict(f"{entry.reason} [crashed with {how}]", f"known crash {entry.id}: crashed with {how}",
                            ((PROP_OUTCOME, "reproduced"),))
    if applied.action == "xfail":
        return CrashVerdict(None, f"known issue {entry.id} is recorded as {entry.kind} ({entry.raises}), "
                                  f"but the test crashed with {how}", ((PROP_OUTCOME, "other_failure"),))
    outcome = {"regression": "regression_failed", "run": "run_failed"}.get(applied.action, "other_failure")
    return CrashVerdict(None, f"crashed with {how} (known issue {entry.id}, action {applied.action})",
                        ((PROP_OUTCOME, outcome),))
