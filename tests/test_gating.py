"""CI gating: rules, the expected-results file, flaky votes, sharding, and the gate in real sessions.

The rules and the file format are pure functions, tested directly. The gate in a session is tested
with pytester subprocesses whose tests call ``record_case`` with hand-made records (no XLA work),
with and without pytest-xdist.
"""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_xla_dynamo import gating as g
from pytest_xla_dynamo.records import CaseRecord

pytest_plugins = ["pytester"]

HEADER = ",".join(g.COLUMNS)

# --- rules ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expected", "actual", "flaky", "label"), [
    ("pass", "pass", False, g.PASS),
    ("pass", "pass_due_to_skip", False, g.PASS),
    ("fail_accuracy", "fail_accuracy", False, g.XFAIL),
    ("fail_accuracy", "fail_to_run", False, g.XFAIL),  # still failing, another way
    ("pass", "fail_accuracy", False, g.REGRESSION),
    ("pass", "eager_two_runs_differ", False, g.REGRESSION),
    ("fail_to_run", "pass", False, g.IMPROVED),
    ("pass", "fail_accuracy", True, g.FAIL_BUT_FLAKY),
    ("fail_accuracy", "pass", True, g.PASS_BUT_FLAKY),
    ("pass", "pass", True, g.PASS),  # flaky but unchanged: as check_accuracy.py
])
def test_status_rule(expected: str, actual: str, flaky: bool, label: str) -> None:
    found = g.status_rule(expected, actual, flaky)
    assert found is not None and found.label == label
    assert found.expected == expected and found.actual == actual


def test_status_rule_unknown_side_is_not_compared() -> None:
    assert g.status_rule("", "pass") is None
    assert g.status_rule("pass", "") is None


@pytest.mark.parametrize("rule", [g.graph_break_rule, g.fallback_rule, g.recompile_rule, g.unique_graphs_rule])
def test_count_rules(rule: Any) -> None:
    more = rule(0, 1)
    assert more is not None and more.label == g.REGRESSION and "0 -> 1" in more.detail
    fewer = rule(3, 1)
    assert fewer is not None and fewer.label == g.IMPROVED
    assert rule(2, 2) is None
    assert rule(None, 5) is None  # not in the file: not compared
    assert rule(5, None) is None  # not measured in this run


def test_count_rule_names_the_figure() -> None:
    assert "graph breaks" in g.graph_break_rule(0, 2).detail  # type: ignore[union-attr]
    assert "steady-state recompiles" in g.recompile_rule(0, 1).detail  # type: ignore[union-attr]
    assert g.fallback_rule(0, 1).what == "fallbacks"  # type: ignore[union-attr]


def test_missing_rule() -> None:
    assert g.missing_rule(True, True) is None
    gone = g.missing_rule(True, False)
    new = g.missing_rule(False, True)
    assert gone is not None and gone.label == g.MISSING and "not run" in gone.detail
    assert new is not None and new.label == g.MISSING and "not in the expected file" in new.detail


def test_speedup_rule() -> None:
    slower = g.speedup_rule(2.0, 1.3, 0.7)
    assert slower is not None and slower.label == g.SLOWER and "1.40x" in slower.detail
    assert g.speedup_rule(2.0, 1.4, 0.7) is None  # exactly at the floor passes
    assert g.speedup_rule(2.0, 3.0, 0.7) is None
    assert g.speedup_rule(None, 1.0, 0.7) is None
    assert g.speedup_rule(1.0, None, 0.7) is None


def test_overall_label_takes_the_most_severe() -> None:
    findings = [g.Finding(g.PASS, "status", ""), g.Finding(g.IMPROVED, "fallbacks", ""),
                g.Finding(g.REGRESSION, "graph_breaks", "")]
    assert g.overall_label(findings) == g.REGRESSION
    assert g.overall_label(findings[:2]) == g.IMPROVED
    assert g.overall_label([]) == g.PASS


# --- flaky voting -----------------------------------------------------------------------------------


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
    assert g.vote(statuses) == result


def test_vote_needs_statuses() -> None:
    with pytest.raises(ValueError):
        g.vote([])


# --- the expected file ------------------------------------------------------------------------------


def _rows() -> list[g.CaseRow]:
    return [
        g.CaseRow("resnet18", "trace_once", "train", "pass", 0, 3, 0, 0, False, ""),
        g.CaseRow("alexnet", "trace_everytime", "infer", "fail_accuracy", None, None, None, None, True,
                  "pytorch/xla#3361"),
        g.CaseRow("BERT_pytorch", "trace_once", "infer", "", 1, 2, 4, 0, False, ""),
        g.CaseRow("alexnet", "trace_everytime", "train", "pass", 0, 1, 0, 0, False, "a, quoted \"one\""),
    ]


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "expected.csv"
    g.write_expected(path, _rows())
    back = g.read_expected(path)
    assert back == {r.key: r for r in _rows()}
    text = path.read_text()
    assert text.splitlines()[0] == HEADER
    # sorted deterministically by (name, backend, mode), and written identically again
    assert [line.split(",")[0] for line in text.splitlines()[1:]] == ["BERT_pytorch", "alexnet", "alexnet",
                                                                    "resnet18"]
    assert g.format_expected(back.values()) == text
    assert not list(path.parent.glob(".*.tmp"))  # no temporary file left behind


def test_read_missing_file_is_empty(tmp_path: Path) -> None:
    assert g.read_expected(tmp_path / "nope.csv") == {}


def test_parse_accepts_pytorch_style_minimal_file() -> None:
    rows = g.parse_expected("name,backend,mode,accuracy,graph_breaks,extra\nvgg16,openxla,train,pass,0,zzz\n")
    row = rows[("vgg16", "openxla", "train")]
    assert row.status == "pass" and row.graph_breaks == 0 and row.fallbacks is None and not row.flaky


@pytest.mark.parametrize(("text", "message"), [
    ("name,backend\nx,y\n", "missing column(s) mode"),
    (f"{HEADER}\nm,b,train,passed,,,,,,\n", "invalid value 'passed'"),
    (f"{HEADER}\nm,b,train,pass,-1,,,,,\n", "column graph_breaks: invalid value '-1'"),
    (f"{HEADER}\nm,b,train,pass,two,,,,,\n", "column graph_breaks: invalid value 'two'"),
    (f"{HEADER}\nm,b,train,pass,,,,,maybe,\n", "column flaky: invalid value 'maybe'"),
    (f"{HEADER}\nm,b,train,pass,,,,,,\nm,b,train,pass,,,,,,\n", "f.csv:3: duplicate case m,b,train"),
    (f"{HEADER}\n,b,train,pass,,,,,,\n", "f.csv:2: empty name"),
])
def test_parse_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(g.ExpectedFileError, match=re.escape(message)):
        g.parse_expected(text, "f.csv")


# --- merging the run's records ----------------------------------------------------------------------


def _rec(suite: str, name: str, **kw: Any) -> CaseRecord:
    kw.setdefault("backend", "trace_once")
    kw.setdefault("mode", "train")
    return CaseRecord(suite=suite, name=name, **kw)


def test_cases_from_records_merges_parity_and_graphs() -> None:
    cases = g.cases_from_records([
        _rec("parity", "m", status="pass", repro="pytest a"),
        _rec("graphs", "m", graph_breaks=1, unique_graphs=2, fallbacks=0, recompiles=0, repro="pytest g"),
        _rec("parity", "m", status="fail_accuracy", repro="pytest b", message="grad differs"),  # 2nd tensor mode
        _rec("graphs", "m", graph_breaks=3, unique_graphs=1),
        _rec("timing", "m", speedup=1.2),
        _rec("timing", "t", speedup=1.2),  # timing only: not a row of the expected file
        _rec("parity", "m", mode="infer", status="pass", flaky=True, extra={"runs": ["pass", "fail_accuracy"]}),
    ])
    assert set(cases) == {("m", "trace_once", "train"), ("m", "trace_once", "infer")}
    train = cases[("m", "trace_once", "train")]
    assert train.row.status == "fail_accuracy"  # the worst of the two parity records
    assert train.status_repro == "pytest b" and train.message == "grad differs"
    assert (train.row.graph_breaks, train.row.unique_graphs, train.row.fallbacks, train.row.recompiles) == (3, 2, 0, 0)
    assert train.graphs_repro == "pytest g"
    infer = cases[("m", "trace_once", "infer")]
    assert infer.row.flaky and infer.runs == ["pass", "fail_accuracy"]
    assert infer.row.graph_breaks is None  # graphs suite did not run for it


def test_fallback_repro_uses_the_node_id() -> None:
    cases = g.cases_from_records([_rec("parity", "m", status="pass", nodeid="suites/t.py::t[m-trace_once]")])
    assert cases[("m", "trace_once", "train")].status_repro == "pytest 'suites/t.py::t[m-trace_once]' " \
        "--xla-backend=trace_once"


def test_compare_whole_run() -> None:
    expected = g.parse_expected(textwrap.dedent(f"""\
        {HEADER}
        same,b,train,pass,0,1,0,0,false,
        broke,b,train,pass,0,1,0,0,false,
        newbreak,b,train,pass,0,1,0,0,false,
        fixed,b,train,fail_to_run,,,,,false,
        flaky,b,train,pass,,,,,true,
        gone,b,train,pass,,,,,false,
        """))
    run = g.cases_from_records([
        _rec("parity", "same", backend="b", status="pass"),
        _rec("graphs", "same", backend="b", graph_breaks=0, unique_graphs=1, fallbacks=0, recompiles=0),
        _rec("parity", "broke", backend="b", status="fail_accuracy", repro="pytest broke"),
        _rec("parity", "newbreak", backend="b", status="pass"),
        _rec("graphs", "newbreak", backend="b", graph_breaks=1, unique_graphs=2, recompiles=1, repro="pytest nb"),
        _rec("parity", "fixed", backend="b", status="pass"),
        _rec("parity", "flaky", backend="b", status="fail_accuracy"),
        _rec("parity", "new", backend="b", status="pass"),
    ])
    timing = g.timing_from_records([_rec("timing", "same", backend="b", speedup=0.5, repro="pytest slow")])
    result = g.compare(expected, run, timing=timing, baseline={("same", "b", "train"): 1.0}, min_speedup_ratio=0.7)
    labels = {v.key[0]: v.label for v in result.verdicts}
    assert labels == {"same": g.SLOWER, "broke": g.REGRESSION, "newbreak": g.REGRESSION, "fixed": g.IMPROVED,
                      "flaky": g.FAIL_BUT_FLAKY, "gone": g.MISSING, "new": g.MISSING}
    newbreak = next(v for v in result.verdicts if v.key[0] == "newbreak")
    assert sorted(f.what for f in newbreak.findings if f.label == g.REGRESSION) == ["graph_breaks", "recompiles",
                                                                                   "unique_graphs"]
    assert {f.repro for f in newbreak.findings if f.label == g.REGRESSION} == {"pytest nb"}
    assert result.failed() and result.failed(strict_improved=True)
    only_improved = g.compare({k: v for k, v in expected.items() if k[0] == "fixed"},
                              {k: v for k, v in run.items() if k[0] == "fixed"})
    assert not only_improved.failed() and only_improved.failed(strict_improved=True)


def test_compare_without_expected_file_runs_only_the_speedup_gate() -> None:
    run = g.cases_from_records([_rec("parity", "m", status="fail_accuracy")])
    result = g.compare(None, run)
    assert [v.label for v in result.verdicts] == [g.PASS] and not result.failed() and not result.compared


def test_merge_update_keeps_rows_not_run() -> None:
    old = {r.key: r for r in _rows()}
    run = g.cases_from_records([
        _rec("parity", "resnet18", status="fail_accuracy"),  # graphs not run: old figures kept
        _rec("parity", "alexnet", backend="trace_everytime", mode="infer", status="pass"),  # flaky stays
        _rec("graphs", "vgg16", graph_breaks=0, unique_graphs=1, fallbacks=0, recompiles=0),  # new, no status
    ])
    rows, stats = g.merge_update(old, run)
    assert stats == g.UpdateStats(updated=3, added=1, kept=2)
    by_key = {r.key: r for r in rows}
    assert len(rows) == 5 and [r.key for r in rows] == sorted(by_key)
    assert by_key[("resnet18", "trace_once", "train")] == replace_row(old[("resnet18", "trace_once", "train")],
                                                                      status="fail_accuracy")
    alex = by_key[("alexnet", "trace_everytime", "infer")]
    assert alex.status == "pass" and alex.flaky and alex.known_issue == "pytorch/xla#3361"
    assert by_key[("vgg16", "trace_once", "train")] == g.CaseRow("vgg16", "trace_once", "train", "", 0, 1, 0, 0)
    for key in (("BERT_pytorch", "trace_once", "infer"), ("alexnet", "trace_everytime", "train")):
        assert by_key[key] == old[key]


def replace_row(row: g.CaseRow, **changes: Any) -> g.CaseRow:
    from dataclasses import replace

    return replace(row, **changes)


def test_timing_baseline_reader(tmp_path: Path) -> None:
    path = tmp_path / "timing.json"
    lines = [
        {"suite": "timing", "name": "m", "backend": "b", "mode": "train", "speedup": 1.5, "abs_latency": 3.0},
        {"suite": "parity", "name": "m", "backend": "b", "mode": "train", "status": "pass", "speedup": None},
        {"suite": "timing", "name": "n", "backend": "b", "mode": "infer", "speedup": None},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert g.read_timing_baseline(path) == {("m", "b", "train"): 1.5}
    path.write_text(json.dumps(lines))
    assert g.read_timing_baseline(path) == {("m", "b", "train"): 1.5}
    path.write_text('{"suite": "timing", "name": "m"\n')
    with pytest.raises(g.ExpectedFileError, match=r"timing\.json:1"):
        g.read_timing_baseline(path)


def test_markdown_lists_regressions_first_with_repro() -> None:
    expected = g.parse_expected(_expected("a,b,train,pass,,,,,,", "z,b,train,fail_to_run,,,,,,",
                                          "gone,b,infer,pass,,,,,,"))
    run = g.cases_from_records([
        _rec("parity", "a", backend="b", status="fail_accuracy", repro="pytest suites/t.py::t[a-b] --xla-backend=b",
             message="step 1, grad fc.weight: max abs err 3e-2 > atol 1e-4\nSECOND-LINE"),
        _rec("parity", "z", backend="b", status="pass", flaky=True, extra={"runs": ["pass", "pass", "fail_to_run"]}),
    ])
    result = g.compare(expected, run)
    text = g.render_markdown(result, run, expected_path=Path("e.csv"), repro_prefix="python -m pytest_xla_dynamo")
    assert text.startswith("## ❌ xla-dynamo: FAILED: 1 regression")
    order = [text.index(h) for h in ("### Regressions (1)", "### Missing (1)", "### Flaky (1)", "### All cases")]
    assert order == sorted(order)
    assert "python -m pytest_xla_dynamo suites/t.py::t[a-b] --xla-backend=b" in text
    assert "- **a · b · train**: status pass -> fail_accuracy — step 1, grad fc.weight: max abs err 3e-2" in text
    assert "SECOND-LINE" not in text
    assert "runs: pass, pass, fail_to_run" in text
    assert "| gone | b | infer | (pass) |" in text
    ok = g.render_markdown(g.compare(expected, {}), {})
    assert ok.startswith("## ✅ xla-dynamo: PASSED")


# --- sharding (pure) --------------------------------------------------------------------------------


def _item(nodeid: str, model: str | None = None) -> Any:
    callspec = SimpleNamespace(params={"xla_model": model}) if model else None
    return SimpleNamespace(nodeid=nodeid, callspec=callspec)


def test_shard_group_key() -> None:
    assert g.shard_group_key(_item("suites/t.py::test_x[resnet18-trace_once]", "resnet18")) == "model:resnet18"
    assert g.shard_group_key(_item("tests/t.py::C::test_y[3]")) == "test:tests/t.py::C::test_y"
    assert g.shard_group_key(_item("tests/t.py::test_z")) == "test:tests/t.py::test_z"


def test_shards_are_a_deterministic_partition_that_keeps_groups() -> None:
    items = [_item(f"suites/{suite}.py::t[{m}-{b}]", m) for suite in ("train", "infer", "graphs")
             for m in ("resnet18", "alexnet", "vgg16", "BERT_pytorch", "mobilenet_v2") for b in ("once", "every")]
    items += [_item(f"tests/x.py::test_{i}[{j}]") for i in range(4) for j in range(i + 1)]
    for total in (1, 2, 3, 4, 7):
        shards = [g.shard_items(items, i, total) for i in range(1, total + 1)]
        selected = [sel for sel, _ in shards]
        assert sum(len(s) for s in selected) == len(items)  # disjoint ...
        assert {id(x) for s in selected for x in s} == {id(x) for x in items}  # ... and complete
        for sel, desel in shards:
            assert len(sel) + len(desel) == len(items)
            assert [x for x in items if x in sel] == sel  # collection order kept
        groups = [{g.shard_group_key(x) for x in s} for s in selected]
        for a in range(total):
            for b in range(a + 1, total):
                assert not groups[a] & groups[b]  # a model's tests are never split
        assert shards == [g.shard_items(list(items), i, total) for i in range(1, total + 1)]  # deterministic
    loads = [len(s) for s, _ in (g.shard_items(items, i, 3) for i in (1, 2, 3))]
    assert max(loads) - min(loads) <= 6  # balanced to within one model (6 tests)


# --- in a session (pytester subprocesses) ---------------------------------------------------------

RECORDING_TESTS = '''
import pytest
from pytest_xla_dynamo.records import CaseRecord, record_case

CASES = {cases!r}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(request, case):
    for record in case["records"]:
        record_case(request.node, CaseRecord(**record))
'''


def _case(case_id: str, *records: dict[str, Any]) -> dict[str, Any]:
    full = []
    for record in records:
        record = dict(record)
        record.setdefault("name", case_id)
        record.setdefault("backend", "trace_once")
        record.setdefault("mode", "train")
        full.append(record)
    return {"id": case_id, "records": full}


def _parity(status: str, **kw: Any) -> dict[str, Any]:
    return {"suite": "parity", "status": status, **kw}


def _graphs(breaks: int, graphs: int = 1, fallbacks: int = 0, recompiles: int = 0) -> dict[str, Any]:
    return {"suite": "graphs", "graph_breaks": breaks, "unique_graphs": graphs, "fallbacks": fallbacks,
            "recompiles": recompiles}


def _expected(*rows: str) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


REGRESSION_CASES = [
    _case("m_reg", _parity("fail_accuracy", repro="pytest REPRO-m_reg --xla-backend=trace_once")),
    _case("m_break", _parity("pass"), _graphs(2)),
    _case("m_ok", _parity("pass"), _graphs(0)),
    _case("m_slow", {"suite": "timing", "speedup": 0.5, "repro": "pytest REPRO-m_slow"}),
    _case("m_fast", {"suite": "timing", "speedup": 0.9}),
]
REGRESSION_EXPECTED = _expected("m_reg,trace_once,train,pass,,,,,false,", "m_break,trace_once,train,pass,0,1,0,0,,",
                                "m_ok,trace_once,train,pass,0,1,0,0,,")
BASELINE = "\n".join(json.dumps({"suite": "timing", "name": n, "backend": "trace_once", "mode": "train",
                                 "speedup": 1.0}) for n in ("m_slow", "m_fast")) + "\n"


def _write(pytester: pytest.Pytester, cases: list[dict[str, Any]], expected: str | None = None) -> None:
    pytester.makepyfile(test_records=RECORDING_TESTS.format(cases=cases))
    if expected is not None:
        pytester.path.joinpath("expected.csv").write_text(expected)


def test_regression_fails_a_passing_session(pytester: pytest.Pytester) -> None:
    _write(pytester, REGRESSION_CASES, REGRESSION_EXPECTED)
    pytester.path.joinpath("timing.json").write_text(BASELINE)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--xla-expected=expected.csv", "--xla-summary=summary.md", "--junitxml=junit.xml",
        "--xla-min-speedup-ratio=0.7", "--xla-timing-baseline=timing.json")
    result.assert_outcomes(passed=5)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*xla-dynamo gate*",
        "REGRESSION * m_reg · trace_once · train: status pass -> fail_accuracy",
        "    reproduce: pytest REPRO-m_reg --xla-backend=trace_once",
        "*xla-dynamo gate FAILED: 3 regressions (exit status 1)",
    ])
    result.stdout.fnmatch_lines(["REGRESSION * m_break · trace_once · train: graph breaks 0 -> 2"])
    result.stdout.fnmatch_lines(["SLOWER * m_slow · trace_once · train: speedup 0.50x < 0.7 x baseline 1.00x*"])
    summary = pytester.path.joinpath("summary.md").read_text()
    assert summary.startswith("## ❌ xla-dynamo: FAILED: 3 regressions")
    assert summary.index("### Regressions (3)") < summary.index("### All cases")
    assert "  pytest REPRO-m_reg --xla-backend=trace_once" in summary
    assert "| m_ok | trace_once | train | pass | 0 | 1 | 0 | 0 | – | PASS |" in summary
    assert "| m_fast | trace_once | train | – | – | – | – | – | 0.90 | PASS |" in summary
    _check_junit(pytester.path / "junit.xml")


def _check_junit(path: Path) -> None:
    root = ET.parse(path).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    props = {name: {p.get("name"): p.get("value") for p in case.iter("property")} for name, case in cases.items()}
    assert props["test_case[m_reg]"]["xla_status"] == "fail_accuracy"
    assert props["test_case[m_break]"]["xla_graph_breaks"] == "2"
    assert props["test_case[m_slow]"]["xla_speedup"] == "0.5"
    suite_props = {p.get("name"): p.get("value") for p in root.find("testsuite").find("properties")}  # type: ignore
    assert suite_props["xla_gate"] == "FAILED: 3 regressions"
    assert suite_props["xla_gate_regression"] == "2" and suite_props["xla_gate_slower"] == "1"


def test_regression_fails_the_session_under_xdist(pytester: pytest.Pytester) -> None:
    _write(pytester, REGRESSION_CASES[:3], REGRESSION_EXPECTED)
    result = pytester.runpytest_subprocess("-n", "2", "--dist=load", "--xla-expected=expected.csv",
                                           "--xla-summary=summary.md", "--junitxml=junit.xml")
    result.assert_outcomes(passed=3)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*xla-dynamo gate FAILED: 2 regressions (exit status 1)"])
    summary = pytester.path.joinpath("summary.md").read_text()
    assert "3 cases run" in summary and "pytest REPRO-m_reg --xla-backend=trace_once" in summary
    root = ET.parse(pytester.path / "junit.xml").getroot()
    statuses = {p.get("value") for p in root.iter("property") if p.get("name") == "xla_status"}
    assert statuses == {"fail_accuracy", "pass"}


IMPROVED_CASES = [
    _case("m_imp", _parity("pass")),
    _case("m_vote", _parity("fail_accuracy", flaky=True, extra={"runs": ["fail_accuracy", "pass", "fail_accuracy"]})),
    _case("m_col", _parity("pass")),
    _case("m_fewer", _parity("pass"), _graphs(0, fallbacks=1)),
    _case("m_xfail", _parity("fail_to_run")),
    _case("m_new", _parity("pass")),
]
IMPROVED_EXPECTED = _expected(
    "m_imp,trace_once,train,fail_accuracy,,,,,,", "m_vote,trace_once,train,pass,,,,,,",
    "m_col,trace_once,train,fail_to_run,,,,,true,", "m_fewer,trace_once,train,pass,0,1,3,0,,",
    "m_xfail,trace_once,train,fail_to_run,,,,,,", "m_gone,trace_once,train,pass,,,,,,")


def test_improved_reported_and_failing_only_when_strict(pytester: pytest.Pytester) -> None:
    _write(pytester, IMPROVED_CASES, IMPROVED_EXPECTED)
    lenient = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv", "--xla-summary=s.md")
    lenient.assert_outcomes(passed=6)
    assert lenient.ret == 0
    lenient.stdout.fnmatch_lines([
        "cases: 1 FAIL_BUT_FLAKY, 2 IMPROVED, 1 PASS_BUT_FLAKY, 2 MISSING, 1 XFAIL",
        "IMPROVED * m_fewer · trace_once · train: fallbacks 3 -> 1",
        "IMPROVED * m_imp · trace_once · train: status fail_accuracy -> pass",
        "PASS_BUT_FLAKY * m_col · trace_once · train: status fail_to_run -> pass (flaky)",
        "FAIL_BUT_FLAKY * m_vote · trace_once · train: status pass -> fail_accuracy (flaky)",
        "MISSING * 2 cases (m_gone · trace_once · train, m_new · trace_once · train); reported, not failing",
        "*xla-dynamo gate PASSED: 1 case as expected, 2 improved, 1 pass but flaky, 1 fail but flaky, 2 missing",
    ])
    summary = pytester.path.joinpath("s.md").read_text()
    assert summary.startswith("## ✅ xla-dynamo: PASSED")
    assert "### Improved (2)" in summary and "### Flaky (2)" in summary and "### Missing (2)" in summary
    assert "runs: fail_accuracy, pass, fail_accuracy" in summary
    strict = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv", "--xla-strict-improved",
                                           "--xla-summary=s.md")
    strict.assert_outcomes(passed=6)
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(["*xla-dynamo gate FAILED: 2 improved (--xla-strict-improved) (exit status 1)"])
    assert pytester.path.joinpath("s.md").read_text().startswith("## ❌")


UPDATE_CASES = [
    _case("m1", _parity("fail_accuracy"), _graphs(1, graphs=2)),
    _case("m2", _parity("pass", flaky=True)),
    _case("m3", _parity("pass"), _graphs(0)),
]


def test_partial_update_keeps_rows_then_gates_green(pytester: pytest.Pytester) -> None:
    old = _expected("m1,trace_once,train,pass,0,1,0,0,false,", "m2,trace_once,train,pass,0,1,0,0,false,issue-7",
                    "m3,trace_once,train,pass,0,1,0,0,false,", "zz,trace_once,infer,pass,,,,,false,")
    _write(pytester, UPDATE_CASES, old)
    update = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv", "--xla-update-expected",
                                           "-k", "m1 or m2", "--xla-summary=s.md")
    update.assert_outcomes(passed=2, deselected=1)
    assert update.ret == 0  # updating does not gate
    update.stdout.fnmatch_lines([
        "changes against the previous expected file (written, not gating):",
        "REGRESSION * m1 · trace_once · train: status pass -> fail_accuracy; graph breaks 0 -> 1; unique graphs 1 -> 2",
        "xla-dynamo: updated 2 rows, kept 2 rows not run in this session (0 new) in expected.csv",
        "xla-dynamo gate: not gating (--xla-update-expected)",
    ])
    assert "MISSING" not in update.stdout.str().split("xla-dynamo gate ===")[-1]
    summary = pytester.path.joinpath("s.md").read_text()
    assert summary.startswith("## ✅ xla-dynamo: PASSED\n")  # the tests passed; updating does not gate
    assert "updated 2 rows, kept 2 rows not run in this session" in summary and "Not gating" in summary
    text = pytester.path.joinpath("expected.csv").read_text()
    assert text == _expected("m1,trace_once,train,fail_accuracy,1,2,0,0,false,",
                             "m2,trace_once,train,pass,0,1,0,0,true,issue-7",
                             "m3,trace_once,train,pass,0,1,0,0,false,", "zz,trace_once,infer,pass,,,,,false,")
    assert not list(pytester.path.glob(".expected.csv.*"))
    gate = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv")
    gate.assert_outcomes(passed=3)
    assert gate.ret == 0
    gate.stdout.fnmatch_lines(["cases: 1 MISSING, 1 XFAIL, 2 PASS",
                               "*xla-dynamo gate PASSED: 3 cases as expected, 1 missing"])


def test_bad_expected_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.path.joinpath("expected.csv").write_text(_expected("m,trace_once,train,passed,,,,,,"))
    result = pytester.runpytest_subprocess("--xla-expected=expected.csv")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*xla-dynamo gate: expected.csv:2: column status: invalid value 'passed'*"])


SHARD_TESTS = '''
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_a(i):
    pass

@pytest.mark.parametrize("i", range(2))
def test_b(i):
    pass

def test_c():
    pass

class TestD:
    @pytest.mark.parametrize("i", range(3))
    def test_d(self, i):
        pass
'''

MODEL_TESTS = '''
def test_train(xla_model, xla_backend):
    pass

def test_infer(xla_model):
    pass

def test_plain():
    pass
'''


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::" in line and not line.startswith(" ")]


def test_shards_in_sessions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_shard=SHARD_TESTS.format(n=4), test_models=MODEL_TESTS)
    models = "--xla-models=resnet18,alexnet,vgg16,mobilenet_v2"
    everything = _collected(pytester.runpytest_subprocess("--collect-only", "-q", models,
                                                          "--xla-backend=trace_once,trace_everytime"))
    assert len(everything) == 4 + 2 + 1 + 3 + 4 * 2 + 4 + 1
    shards = []
    for index in (1, 2, 3):
        result = pytester.runpytest_subprocess("--collect-only", "-q", models,
                                               "--xla-backend=trace_once,trace_everytime", f"--xla-shard={index}/3")
        ids = _collected(result)
        result.stdout.fnmatch_lines([f"shard {index}/3: {len(ids)} of {len(everything)} tests"])
        shards.append(ids)
    assert sorted(i for s in shards for i in s) == sorted(everything)  # disjoint and complete
    for ids in shards:
        assert ids == [i for i in everything if i in ids]  # collection order kept
    owner: dict[str, int] = {}
    for index, ids in enumerate(shards):
        for nodeid in ids:
            match = re.search(r"\[(\w+)", nodeid)
            group = match.group(1) if "test_models.py" in nodeid and match else nodeid.split("[")[0]
            assert owner.setdefault(group, index) == index, f"{group} split across shards"
    assert {"resnet18", "alexnet", "vgg16", "mobilenet_v2"} <= set(owner)
    # run one shard under xdist: both workers must select the same tests (else xdist aborts)
    # (the shard split applies after -k, so it is computed over the 10 tests left)
    plain = _collected(pytester.runpytest_subprocess("--collect-only", "-q", "--xla-shard=2/3",
                                                     "-k", "not test_models"))
    assert 0 < len(plain) < 10
    run = pytester.runpytest_subprocess("-n", "2", "--xla-shard=2/3", "-k", "not test_models", "-v")
    run.assert_outcomes(passed=len(plain))
    assert sorted(re.findall(r"PASSED (\S+)", run.stdout.str())) == sorted(plain)
    run.stdout.fnmatch_lines([f"shard 2/3: {len(plain)} of 10 tests"])


def test_headline_tells_test_failures_from_gate_failures() -> None:
    expected = g.parse_expected(_expected("a,b,train,pass,,,,,,", "c,b,train,fail_accuracy,,,,,,"))
    same = g.cases_from_records([_rec("parity", "a", backend="b", status="pass"),
                                 _rec("parity", "c", backend="b", status="fail_accuracy")])
    ok = g.compare(expected, same)
    assert g.headline(ok, failed_tests=0, strict_improved=False) == (True, "PASSED: 2 cases as expected")
    assert g.headline(ok, failed_tests=1, strict_improved=False) == (
        False, "FAILED: 1 failed test; gate: 2 cases as expected")
    worse = g.compare(expected, g.cases_from_records([_rec("parity", "a", backend="b", status="fail_to_run")]))
    assert g.headline(worse, failed_tests=2, strict_improved=False) == (
        False, "FAILED: 1 regression, 2 failed tests")
    assert g.headline(None, failed_tests=0, strict_improved=False) == (True, "PASSED")
