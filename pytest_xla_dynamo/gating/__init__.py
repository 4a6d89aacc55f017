"""CI gating: the run's results against an expected-results file, and a speedup gate.

In the spirit of pytorch's ``benchmarks/dynamo/ci_expected_accuracy/*.csv`` and ``check_accuracy.py``;
one module per part, all pure Python (no torch):

* :mod:`~pytest_xla_dynamo.gating.labels`: PASS, XFAIL, REGRESSION (pytorch's FAIL), IMPROVED,
  MISSING, PASS_BUT_FLAKY, FAIL_BUT_FLAKY, SLOWER, UNRELIABLE, NOISY; their severity; the gate's exit status;
* :mod:`~pytest_xla_dynamo.gating.expected`: the expected-results CSV (one row per case
  ``(name, backend, mode)``, columns :data:`COLUMNS`, sorted);
* :mod:`~pytest_xla_dynamo.gating.run`: the session's records merged per case (status from the
  ``parity`` suite, graph figures from the ``graphs`` suite, speedups from ``timing``), the timing baseline;
* :mod:`~pytest_xla_dynamo.gating.rules`: one pure function per rule, returning a :class:`Finding`,
  and :func:`compare` over a whole run;
* :mod:`~pytest_xla_dynamo.gating.update`: ``--xla-update-expected``'s merge;
* :mod:`~pytest_xla_dynamo.gating.render`: the headline, the Markdown summary, the terminal lines;
* :mod:`~pytest_xla_dynamo.gating.paths`: the start-up checks of the gate's files;
* :mod:`~pytest_xla_dynamo.gating.plugin`: :class:`GatingPlugin`, the gate in a pytest session.

A REGRESSION or SLOWER finding makes the session fail (exit status 1, pytest's TESTS_FAILED) even
when every test passed; IMPROVED fails it only with ``xla_strict_improved``; MISSING is reported.
Flaky votes (``xla_accuracy_runs``) are :func:`pytest_xla_dynamo.records.vote`; sharding is
:mod:`pytest_xla_dynamo.workers.sharding`.
"""

from __future__ import annotations

from pytest_xla_dynamo.gating.expected import (
    COLUMNS,
    GRAPH_FIELDS,
    KEY_COLUMNS,
    CaseRow,
    ExpectedFileError,
    format_expected,
    parse_expected,
    read_expected,
    write_expected,
)
from pytest_xla_dynamo.gating.labels import (
    FAIL_BUT_FLAKY,
    FAILING,
    FLAKY_LABELS,
    GATE_FAILED_EXIT,
    IMPROVED,
    MISSING,
    NOISY,
    PASS,
    PASS_BUT_FLAKY,
    REGRESSION,
    SEVERITY,
    SLOWER,
    XFAIL,
    Key,
)
from pytest_xla_dynamo.gating.paths import check_paths
from pytest_xla_dynamo.gating.plugin import GatingPlugin
from pytest_xla_dynamo.gating.render import headline, render_markdown
from pytest_xla_dynamo.gating.rules import (
    CaseVerdict,
    Finding,
    GateResult,
    compare,
    compare_case,
    count_rule,
    fallback_rule,
    graph_break_rule,
    missing_rule,
    noise_aware_speedup_rule,
    overall_label,
    recompile_rule,
    speedup_rule,
    status_rule,
    unique_graphs_rule,
)
from pytest_xla_dynamo.gating.run import (
    RunCase,
    TimingCase,
    cases_from_records,
    read_timing_baseline,
    timing_from_records,
)
from pytest_xla_dynamo.gating.update import UpdateStats, merge_update

__all__ = [
    "COLUMNS", "FAILING", "FAIL_BUT_FLAKY", "FLAKY_LABELS", "GATE_FAILED_EXIT", "GRAPH_FIELDS", "IMPROVED",
    "KEY_COLUMNS", "MISSING", "NOISY", "PASS", "PASS_BUT_FLAKY", "REGRESSION", "SEVERITY", "SLOWER", "XFAIL",
    "CaseRow", "CaseVerdict", "ExpectedFileError", "Finding", "GateResult", "GatingPlugin", "Key", "RunCase",
    "TimingCase", "UpdateStats", "cases_from_records", "check_paths", "compare", "compare_case", "count_rule",
    "fallback_rule", "format_expected", "graph_break_rule", "headline", "merge_update", "missing_rule",
    "noise_aware_speedup_rule", "overall_label", "parse_expected", "read_expected", "read_timing_baseline",
    "recompile_rule", "render_markdown", "speedup_rule", "status_rule", "timing_from_records", "unique_graphs_rule",
    "write_expected",
]
