"""The gate's labels: what a rule can say about a case, how severe it is, and the gate's exit status.

The labels follow pytorch's ``benchmarks/dynamo/check_accuracy.py`` (its FAIL is our REGRESSION),
plus SLOWER for the optional speedup gate, UNRELIABLE when it skips an untrusted timing and NOISY when a
case's noise is too large to gate at the asked ratio.
"""

from __future__ import annotations

import pytest

Key = tuple[str, str, str]  # (model name, backend, mode)

PASS = "PASS"
XFAIL = "XFAIL"
REGRESSION = "REGRESSION"
SLOWER = "SLOWER"
IMPROVED = "IMPROVED"
MISSING = "MISSING"
PASS_BUT_FLAKY = "PASS_BUT_FLAKY"
FAIL_BUT_FLAKY = "FAIL_BUT_FLAKY"
UNRELIABLE = "UNRELIABLE"  # the speed gate skipped a case whose timing is unreliable (reported, not failing)
NOISY = "NOISY"  # the speed gate cannot tell the asked change from the case's noise (reported, not failing)

#: Most severe first: a case's overall label is the most severe label of its findings.
SEVERITY = (REGRESSION, SLOWER, FAIL_BUT_FLAKY, IMPROVED, PASS_BUT_FLAKY, UNRELIABLE, NOISY, MISSING, XFAIL, PASS)
#: Labels that fail the session (IMPROVED too with ``xla_strict_improved``).
FAILING = frozenset({REGRESSION, SLOWER})
FLAKY_LABELS = frozenset({PASS_BUT_FLAKY, FAIL_BUT_FLAKY})

#: Exit status of a session the gate failed: pytest's ``ExitCode.TESTS_FAILED``.
GATE_FAILED_EXIT = int(pytest.ExitCode.TESTS_FAILED)

#: Exit statuses of a session that did not finish: it neither rewrites the expected file nor claims a verdict.
UNFINISHED_EXITS = frozenset({int(pytest.ExitCode.INTERRUPTED), int(pytest.ExitCode.INTERNAL_ERROR),
                              int(pytest.ExitCode.USAGE_ERROR)})


def case_name(key: Key) -> str:
    """How a case is named in the terminal and the summary: ``model · backend · mode``."""
    return " · ".join(key)
