"""The gate's rules and the comparison of a whole run (gating.rules), and the flaky vote they rely on."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from sample_data import gating_record as rec

from pytest_xla_dynamo.gating import labels as lb
from pytest_xla_dynamo.gating import rules as r
from pytest_xla_dynamo.gating.expected import COLUMNS, parse_expected
from pytest_xla_dynamo.gating.run import cases_from_records, timing_from_records
from pytest_xla_dynamo.records import ParityFigures, vote

HEADER = ",".join(COLUMNS)



@pytest.mark.parametrize(("expected", "actual", "flaky", "label"), [
    ("pass", "pass", False, lb.PASS),
    ("pass", "pass_due_to_skip", False, lb.PASS),
    ("fail_accuracy", "fail_accuracy", False, lb.XFAIL),
    ("fail_accuracy", "fail_to_run", False, lb.XFAIL),  # still failing, another way
    ("pass", "fail_accuracy", False, lb.REGRESSION),
    ("pass", "eager_two_runs_differ", False, lb.REGRESSION),
    ("fail_to_run", "pass", False, lb.IMPROVED),
    ("pass", "fail_accuracy", True, lb.FAIL_BUT_FLAKY),
    ("fail_accuracy", "pass", True, lb.PASS_BUT_FLAKY),
    ("pass", "pass", True, lb.PASS),  # flaky but unchanged: as check_accuracy.py
    ("pass", "pass_not_captured", False, lb.REGRESSION),  # dynamo captured nothing: not a pass of the backend
    ("pass_not_captured", "pass", False, lb.IMPROVED),
    ("pass_not_captured", "pass_not_captured", False, lb.XFAIL),  # as expected, but not a plain pass
])
def test_status_rule(expected: str, actual: str, flaky: bool, label: str) -> None:
    found = r.status_rule(expected, actual, flaky)
    assert found is not None and found.label == label
    assert found.expected == expected and found.actual == actual


def test_status_rule_names_a_lost_capture() -> None:
    lost = r.status_rule("pass", "pass_not_captured")
    assert lost is not None and lost.detail == "status pass -> pass_not_captured (dynamo captured nothing)"
    back = r.status_rule("pass_not_captured", "pass")
    assert back is not None and back.detail == "status pass_not_captured -> pass (dynamo captures it now)"
    assert parse_expected(f"{HEADER}\nm,trace_once,train,pass_not_captured,,,,,,false,\n")[
        ("m", "trace_once", "train")].status == "pass_not_captured"


def test_status_rule_unknown_side_is_not_compared() -> None:
    assert r.status_rule("", "pass") is None
    assert r.status_rule("pass", "") is None


@pytest.mark.parametrize("rule", [r.graph_break_rule, r.fallback_rule, r.recompile_rule, r.unique_graphs_rule])
def test_count_rules(rule: Any) -> None:
    more = rule(0, 1)
    assert more is not None and more.label == lb.REGRESSION and "0 -> 1" in more.detail
    fewer = rule(3, 1)
    assert fewer is not None and fewer.label == lb.IMPROVED
    assert rule(2, 2) is None
    assert rule(None, 5) is None  # not in the file: not compared
    assert rule(5, None) is None  # not measured in this run


def test_count_rule_names_the_figure() -> None:
    assert "graph breaks" in r.graph_break_rule(0, 2).detail  # type: ignore[union-attr]
    assert "steady-state recompiles" in r.recompile_rule(0, 1).detail  # type: ignore[union-attr]
    assert r.fallback_rule(0, 1).what == "fallbacks"  # type: ignore[union-attr]


def test_missing_rule() -> None:
    assert r.missing_rule(True, True) is None
    gone = r.missing_rule(True, False)
    new = r.missing_rule(False, True)
    assert gone is not None and gone.label == lb.MISSING and "not run" in gone.detail
    assert new is not None and new.label == lb.MISSING and "not in the expected file" in new.detail


def test_speedup_rule() -> None:
    slower = r.speedup_rule(2.0, 1.3, 0.7)
    assert slower is not None and slower.label == lb.SLOWER and "1.40x" in slower.detail
    assert r.speedup_rule(2.0, 1.4, 0.7) is None  # exactly at the floor passes
    assert r.speedup_rule(2.0, 3.0, 0.7) is None
    assert r.speedup_rule(None, 1.0, 0.7) is None
    assert r.speedup_rule(1.0, None, 0.7) is None


def test_overall_label_takes_the_most_severe() -> None:
    findings = [r.Finding(lb.PASS, "status", ""), r.Finding(lb.IMPROVED, "fallbacks", ""),
                r.Finding(lb.REGRESSION, "graph_breaks", "")]
    assert r.overall_label(findings) == lb.REGRESSION
    assert r.overall_label(findings[:2]) == lb.IMPROVED
    assert r.overall_label([]) == lb.PASS


# --- flaky voting (records.vote, used by parity under xla_accuracy_runs) ---------------------------------


@pytest.mark.parametrize(("statuses", "result"), [
    (["pass"], ("pass", False)),
    (["pass", "pass", "pass"], ("pass", False)),
    (["pass", "fail_accuracy", "pass"], ("pass", True)),
    (["fail_accuracy", "pass", "fail_accuracy"], ("fail_accuracy", True)),
    (["pass", "fail_accuracy"], ("fail_accuracy", True)),  # a tie goes to the failure
    (["fail_to_run", "fail_accuracy", "pass", "pass"], ("pass", True)),
    (["fail_to_run", "fail_accuracy"], ("fail_to_run", True)),  # tie of failures: the earliest
])
def test_vote(statuses: list[str], result: tuple[str, bool]) -> None:
    assert vote(statuses) == result


def test_vote_needs_statuses() -> None:
    with pytest.raises(ValueError):
        vote([])


# --- comparing a whole run ---------------------------------------------------------------------------


def test_compare_whole_run() -> None:
    expected = parse_expected(textwrap.dedent(f"""\
        {HEADER}
        same,b,train,pass,pass,0,1,0,0,false,
        broke,b,train,pass,,0,1,0,0,false,
        newbreak,b,train,pass,pass,0,1,0,0,false,
        fixed,b,train,fail_to_run,,,,,,false,
        flaky,b,train,pass,,,,,,true,
        gone,b,train,pass,,,,,,false,
        compiles,b,train,pass,pass,,,,,false,
        stillcompiles,b,train,pass,fail_graph,,,,,false,k
        """))
    run = cases_from_records([
        rec("parity", "same", backend="b", status="pass"),
        rec("graphs", "same", backend="b", graph_breaks=0, unique_graphs=1, fallbacks=0, recompiles=0),
        rec("parity", "broke", backend="b", status="fail_accuracy", repro="pytest broke"),
        rec("parity", "newbreak", backend="b", status="pass"),
        rec("graphs", "newbreak", backend="b", graph_breaks=1, unique_graphs=2, recompiles=1, repro="pytest nb"),
        rec("parity", "fixed", backend="b", status="pass"),
        rec("parity", "flaky", backend="b", status="fail_accuracy"),
        rec("parity", "new", backend="b", status="pass"),
        rec("parity", "compiles", backend="b", status="pass"),
        rec("graphs", "compiles", backend="b", status="fail_graph", message="RecompileError: 1 compile",
            repro="pytest c"),
        rec("parity", "stillcompiles", backend="b", status="pass"),
        rec("graphs", "stillcompiles", backend="b", status="fail_graph"),
    ])
    timing = timing_from_records([rec("timing", "same", backend="b", speedup=0.5, repro="pytest slow")])
    result = r.compare(expected, run, timing=timing, baseline={("same", "b", "train"): 1.0}, min_speedup_ratio=0.7)
    labels = {v.key[0]: v.label for v in result.verdicts}
    assert labels == {"same": lb.SLOWER, "broke": lb.REGRESSION, "newbreak": lb.REGRESSION, "fixed": lb.IMPROVED,
                      "flaky": lb.FAIL_BUT_FLAKY, "gone": lb.MISSING, "new": lb.MISSING, "compiles": lb.REGRESSION,
                      "stillcompiles": lb.XFAIL}
    compiles = next(v for v in result.verdicts if v.key[0] == "compiles")
    assert [(f.what, f.detail, f.repro) for f in compiles.findings if f.label == lb.REGRESSION] == [
        ("graph_status", "graph suite pass -> fail_graph: RecompileError: 1 compile", "pytest c")]
    newbreak = next(v for v in result.verdicts if v.key[0] == "newbreak")
    assert sorted(f.what for f in newbreak.findings if f.label == lb.REGRESSION) == ["graph_breaks", "recompiles",
                                                                                    "unique_graphs"]
    assert {f.repro for f in newbreak.findings if f.label == lb.REGRESSION} == {"pytest nb"}
    assert newbreak.repro(lb.FAILING) == "pytest nb"
    same = next(v for v in result.verdicts if v.key[0] == "same")
    assert same.repro([lb.SLOWER]) == "pytest slow" and same.speedup == 0.5
    assert result.failed() and result.failed(strict_improved=True)
    only_improved = r.compare({k: v for k, v in expected.items() if k[0] == "fixed"},
                              {k: v for k, v in run.items() if k[0] == "fixed"})
    assert not only_improved.failed() and only_improved.failed(strict_improved=True)


def test_an_expected_status_the_run_did_not_measure_is_missing() -> None:
    """A case whose graphs test ran but whose parity test did not (a dead worker) is not a PASS."""
    expected = parse_expected(f"{HEADER}\nm,trace_once,train,pass,pass,,,,,false,\n")
    result = r.compare(expected, cases_from_records([rec("graphs", "m", status="pass")]))
    (verdict,) = result.verdicts
    assert verdict.label == lb.MISSING and not result.failed()  # reported, as a case not run is
    assert verdict.findings[0].detail.startswith("status pass expected, not measured in this run")


def test_compare_without_expected_file_runs_only_the_speedup_gate() -> None:
    run = cases_from_records([rec("parity", "m", status="fail_accuracy")])
    result = r.compare(None, run)
    assert [v.label for v in result.verdicts] == [lb.PASS] and not result.failed() and not result.compared


def test_flaky_vote_is_shown_on_an_unchanged_status() -> None:
    expected = parse_expected(f"{HEADER}\nm,trace_once,train,pass,,,,,,\n")
    run = cases_from_records([rec("parity", "m", status="pass", flaky=True,
                                  parity=ParityFigures(runs=["pass", "fail_to_run"]))])
    (verdict,) = r.compare(expected, run).verdicts
    assert verdict.label == lb.PASS and verdict.flaky
    assert verdict.findings[0].detail == "status pass (flaky vote: pass, fail_to_run)"
