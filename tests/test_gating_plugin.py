"""The gate in real sessions (gating.plugin): pytester subprocesses whose tests record hand-made records.

No XLA work: each test stores :class:`~pytest_xla_dynamo.records.CaseRecord` s through the session
object, as the suites do, with and without pytest-xdist. Covered: a regression failing a passing
session (terminal, summary, JUnit), IMPROVED and flaky cases, a partial update then a green gate, and
what must never happen: a bad file or an unusable path accepted at start-up, an interrupted or
``--collect-only`` session rewriting the expected file or writing a summary that claims a verdict.
"""

from __future__ import annotations

import json
import stat
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from sample_data import umask

from pytest_xla_dynamo.gating.expected import COLUMNS
from pytest_xla_dynamo.records import ParityFigures
from pytest_xla_dynamo.workers import cpu_isa

pytest_plugins = ["pytester"]

HEADER = ",".join(COLUMNS)
OLD_HEADER = ",".join(c for c in COLUMNS if c != "graph_status")  # files written before the graph_status column

RECORDING_TESTS = '''
import pytest
from pytest_xla_dynamo.records import CaseRecord, ParityFigures
from pytest_xla_dynamo.session import get_session

CASES = {cases!r}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(request, case):
    for record in case["records"]:
        get_session(request.config).record(request.node, CaseRecord(**record))
    if case.get("interrupt"):
        raise KeyboardInterrupt
'''


def _case(case_id: str, *records: dict[str, Any], interrupt: bool = False) -> dict[str, Any]:
    full = []
    for record in records:
        record = dict(record)
        record.setdefault("name", case_id)
        record.setdefault("backend", "trace_once")
        record.setdefault("mode", "train")
        full.append(record)
    return {"id": case_id, "records": full, "interrupt": interrupt}


def _parity(status: str, **kw: Any) -> dict[str, Any]:
    return {"suite": "parity", "status": status, **kw}


def _graphs(breaks: int, graphs: int = 1, fallbacks: int = 0, recompiles: int = 0) -> dict[str, Any]:
    return {"suite": "graphs", "graph_breaks": breaks, "unique_graphs": graphs, "fallbacks": fallbacks,
            "recompiles": recompiles}


def _expected(*rows: str) -> str:
    """An expected file in the format before ``graph_status`` (such files still read: the column is optional)."""
    return "\n".join([OLD_HEADER, *rows]) + "\n"


def _write(pytester: pytest.Pytester, cases: list[dict[str, Any]], expected: str | None = None) -> None:
    pytester.makepyfile(test_records=RECORDING_TESTS.format(cases=cases))
    if expected is not None:
        pytester.path.joinpath("expected.csv").write_text(expected)


def _metadata_lines(isa: str = "avx2") -> list[str]:
    """The metadata lines an update by a session of ``--xla-cpu-isa=isa`` writes (its environment is ours)."""
    return [f"# kernels: {cpu_isa.kernel_setting(isa)}", f"# cpu: {cpu_isa.cpu_line()}"]


def _ordinary(path: Path) -> bool:
    """Whether ``path`` has an ordinary file's permissions (``0666 & ~umask``), not ``mkstemp``'s 0600."""
    return stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask()


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
    result.stdout.fnmatch_lines(["xla-dynamo: summary written to summary.md"])
    summary = pytester.path.joinpath("summary.md")
    text = summary.read_text()
    assert text.startswith("## ❌ xla-dynamo: FAILED: 3 regressions")
    assert text.index("### Regressions (3)") < text.index("### All cases")
    assert "  pytest REPRO-m_reg --xla-backend=trace_once" in text
    assert "| m_ok | trace_once | train | pass | pass | 0 | 1 | 0 | 0 | – | PASS |" in text
    assert "| m_fast | trace_once | train | – | – | – | – | – | – | 0.90 | PASS |" in text
    assert _ordinary(summary)
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
    _case("m_vote", _parity("fail_accuracy", flaky=True,
                            parity=ParityFigures(runs=["fail_accuracy", "pass", "fail_accuracy"]))),
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
    strict = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv",
                                           "-o", "xla_strict_improved=true", "--xla-summary=s.md")
    strict.assert_outcomes(passed=6)
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(["*xla-dynamo gate FAILED: 2 improved (xla_strict_improved) (exit status 1)"])
    assert pytester.path.joinpath("s.md").read_text().startswith("## ❌")


UPDATE_CASES = [
    _case("m1", _parity("fail_accuracy"), _graphs(1, graphs=2)),
    _case("m2", _parity("pass", flaky=True)),
    _case("m3", _parity("pass"), _graphs(0)),
]
UPDATE_OLD = _expected("m1,trace_once,train,pass,0,1,0,0,false,", "m2,trace_once,train,pass,0,1,0,0,false,issue-7",
                       "m3,trace_once,train,pass,0,1,0,0,false,", "zz,trace_once,infer,pass,,,,,false,")


def test_partial_update_keeps_rows_then_gates_green(pytester: pytest.Pytester) -> None:
    _write(pytester, UPDATE_CASES, UPDATE_OLD)
    expected = pytester.path.joinpath("expected.csv")
    expected.chmod(0o600)  # the update keeps the file's mode (issue 28: it was reset to an ordinary file's)
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
    summary = pytester.path.joinpath("s.md")
    assert summary.read_text().startswith("## ✅ xla-dynamo: PASSED\n")  # the tests passed; updating does not gate
    assert "updated 2 rows, kept 2 rows not run in this session" in summary.read_text()
    assert "Not gating" in summary.read_text()
    # the file now opens with the kernel setting and the CPU of this run (issue 28), then its rows
    assert expected.read_text() == "\n".join([*_metadata_lines(), HEADER,
                                               "m1,trace_once,train,fail_accuracy,pass,1,2,0,0,false,,",
                                               "m2,trace_once,train,pass,,0,1,0,0,true,issue-7,",
                                               "m3,trace_once,train,pass,,0,1,0,0,false,,",  # not run: kept
                                               "zz,trace_once,infer,pass,,,,,,false,,"]) + "\n"
    assert not list(pytester.path.glob(".expected.csv.*"))
    assert stat.S_IMODE(expected.stat().st_mode) == 0o600 and _ordinary(summary)  # kept; a new file: ordinary
    gate = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv")
    gate.assert_outcomes(passed=3)
    assert gate.ret == 0
    gate.stdout.fnmatch_lines(["cases: 1 MISSING, 1 XFAIL, 2 PASS",
                               "*xla-dynamo gate PASSED: 3 cases as expected, 1 missing"])


def test_unfinished_sessions_write_nothing_and_claim_no_verdict(pytester: pytest.Pytester) -> None:
    """``--collect-only`` and Ctrl-C (exit status 2): the expected file is not rewritten, no summary is
    written, the terminal says so, and no gate verdict is claimed."""
    cases = [*UPDATE_CASES, _case("m4", _parity("fail_to_run"), interrupt=True)]
    _write(pytester, cases, UPDATE_OLD)
    expected = pytester.path.joinpath("expected.csv")
    before = expected.stat().st_mtime_ns
    gate_args = ("-p", "no:xdist", "-p", "no:randomly", "--xla-expected=expected.csv", "--xla-summary=s.md")
    collect = pytester.runpytest_subprocess(*gate_args, "--xla-update-expected", "--collect-only")
    assert collect.ret == 0
    collect.stdout.fnmatch_lines(["xla-dynamo: expected.csv not updated: --collect-only",
                                  "xla-dynamo: summary not written to s.md: --collect-only",
                                  "xla-dynamo gate: no verdict: --collect-only"])
    interrupted = pytester.runpytest_subprocess(*gate_args, "--xla-update-expected")
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    interrupted.stdout.fnmatch_lines([
        "xla-dynamo: expected.csv not updated: the session did not finish (exit status 2)",
        "xla-dynamo: summary not written to s.md: the session did not finish (exit status 2)",
        "xla-dynamo gate: no verdict: the session did not finish (exit status 2)"])
    gating = pytester.runpytest_subprocess(*gate_args, "--junitxml=junit.xml")  # m1 regressed before Ctrl-C
    assert gating.ret == pytest.ExitCode.INTERRUPTED
    gating.stdout.fnmatch_lines(["xla-dynamo gate: no verdict: the session did not finish (exit status 2)"])
    for result in (collect, interrupted, gating):
        out = result.stdout.str()
        assert "PASSED:" not in out and "FAILED:" not in out and "not gating" not in out
    root = ET.parse(pytester.path / "junit.xml").getroot()
    assert not [p for p in root.iter("property") if p.get("name", "").startswith("xla_gate")]
    assert expected.read_text() == UPDATE_OLD and expected.stat().st_mtime_ns == before
    assert not pytester.path.joinpath("s.md").exists()
    assert not list(pytester.path.glob(".s.md.*")) and not list(pytester.path.glob(".expected.csv.*"))


def test_bad_files_and_paths_are_usage_errors_at_start(pytester: pytest.Pytester) -> None:
    """Each at start-up, exit status 4, naming the path and why; no traceback, no test run."""
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.path.joinpath("expected.csv").write_text(_expected("m,trace_once,train,passed,,,,,,"))
    pytester.path.joinpath("extra.csv").write_text(_expected("m,trace_once,train,pass,,,,,,,,surplus"))
    pytester.path.joinpath("adir").mkdir()
    pytester.path.joinpath("afile").write_text("")
    cases = [
        (["--xla-expected=expected.csv"], "*xla-dynamo gate: expected.csv:2: column status: invalid value 'passed'*"),
        (["--xla-expected=extra.csv"], "*xla-dynamo gate: extra.csv:2: 12 cells, but the header has 11 columns*"),
        (["--xla-expected=adir"], "*--xla-expected: 'adir' is a directory*"),
        (["--xla-summary=adir"], "*--xla-summary: cannot write 'adir': it is a directory*"),
        (["--xla-summary=afile/s.md"], "*--xla-summary: cannot write 'afile/s.md': */afile is not a directory*"),
        (["--xla-expected=afile/e.csv", "--xla-update-expected"],
         "*--xla-expected: cannot write 'afile/e.csv' under --xla-update-expected: */afile is not a directory*"),
        (["--xla-timing-baseline=adir", "--xla-min-speedup-ratio=0.7"],
         "*--xla-timing-baseline: 'adir' is a directory*"),
    ]
    if sys.platform.startswith("linux"):  # a folder nobody (root included) may create files in
        cases += [
            (["--xla-summary=/proc/s.md"], "*--xla-summary: cannot write '/proc/s.md': the folder /proc is not "
                                           "writable*"),
            (["--xla-expected=/proc/e.csv", "--xla-update-expected"],
             "*--xla-expected: cannot write '/proc/e.csv' under --xla-update-expected: the folder /proc is not "
             "writable*"),
        ]
    for args, message in cases:
        result = pytester.runpytest_subprocess("-p", "no:xdist", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (args, result.stderr.str())
        result.stderr.fnmatch_lines([message])
        assert "Traceback" not in result.stderr.str() + result.stdout.str(), args
        assert "test_x.py" not in result.stdout.str(), args  # nothing ran
    assert list(pytester.path.joinpath("adir").iterdir()) == []


DYING_WORKER_TESTS = """
import os
import signal

from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.session import get_session


def test_records(request, snapshot):
    get_session(request.config).record(request.node, CaseRecord(suite="parity", name="m_kept", backend="trace_once",
                                                                 mode="train", status="pass"))
    assert snapshot == "signature"


def test_dies():
    os.kill(os.getpid(), signal.SIGKILL)


def test_after(request):
    get_session(request.config).record(request.node, CaseRecord(suite="parity", name="m_after", backend="trace_once",
                                                                 mode="train", status="pass"))
"""


def test_a_dead_workers_records_reach_the_report(pytester: pytest.Pytester) -> None:
    """A worker killed after a recorded test (as by the OOM killer) sends no workeroutput; the record its test
    report carried still reaches the controller's report, and the summary says where it came from. The
    replacement worker runs the rest once, not the test that killed its predecessor, and the session ends
    (xdist 3.8.0's loadgroup scheduler hung here: pytest-dev/pytest-xdist#1323). The snapshot the dead worker
    used is not deleted as unused under ``--snapshot-update`` (syrupy 7.0 would: its replacement's report makes
    its count of worker reports whole)."""
    pytester.makepyfile(test_dying=DYING_WORKER_TESTS)
    pytester.runpytest_subprocess("-k", "test_records", "--snapshot-update").assert_outcomes(passed=1)
    stored = pytester.path / "__snapshots__" / "test_dying.ambr"
    assert stored.is_file()
    result = pytester.runpytest_subprocess("-n", "1", "-p", "no:randomly", "--xla-report=json",
                                           "--xla-report-dir=out", "--snapshot-update", timeout=300)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*node down*", "*worker 'gw0' crashed while running 'test_dying.py::test_dies'*",
                                 "*gw0 died before its end: its 1 record(s) taken from its test reports; syrupy's "
                                 "unused-snapshot check switched off*"])
    assert stored.is_file() and "signature" in stored.read_text()
    assert result.stdout.str().count("node down") == 1  # the crashing test ran once: one worker died
    records = [json.loads(line) for line in (pytester.path / "out" / "xla-dynamo.jsonl").read_text().splitlines()]
    assert sorted((r["name"], r["status"]) for r in records) == [("m_after", "pass"), ("m_kept", "pass")]


KERNEL_CASES = [_case("m1", _parity("pass")), _case("m2", _parity("fail_accuracy"))]
KERNEL_ROWS = ("m1,trace_once,train,pass,,,,,false,", "m2,trace_once,train,pass,,,,,false,")
OTHER_KERNELS = "ONEDNN_MAX_CPU_ISA=AVX512_CORE, ATEN_CPU_CAPABILITY=avx512, --xla_cpu_max_isa=AVX512"


def test_a_run_under_another_kernel_setting_is_told_so_before_the_verdict(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS", "PYTEST_XLA_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    recorded = f"# kernels: {OTHER_KERNELS}\n# cpu: Some CPU; avx avx2 avx512f\n"
    _write(pytester, KERNEL_CASES, recorded + _expected(*KERNEL_ROWS))
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv", "--xla-summary=s.md")
    assert result.ret == 1, result.stdout.str()
    warning = (f"xla-dynamo gate: WARNING: expected.csv was recorded with kernels {OTHER_KERNELS} (CPU: Some CPU; "
               f"avx avx2 avx512f); this run's XLA tests use {cpu_isa.kernel_setting('avx2')} (--xla-cpu-isa=avx2; "
               f"CPU: {cpu_isa.cpu_line()}): results can differ for that reason alone, so the comparison is not "
               "like with like (pass the file's setting, or record a file for this one)")
    lines = result.stdout.lines
    assert f"xla-dynamo gate: gating against expected.csv (2 rows, recorded with kernels {OTHER_KERNELS})" in lines
    # in the header, and first in the gate's section, before the cases and the verdict
    assert lines.count(warning) == 2, result.stdout.str()
    section = lines.index(next(line for line in lines if "xla-dynamo gate ===" in line))
    assert next(line for line in lines[section + 1:] if line) == warning
    verdict = lines.index(next(line for line in lines if "xla-dynamo gate FAILED" in line))
    assert verdict > section + 1
    summary = pytester.path.joinpath("s.md").read_text().splitlines()
    assert summary[0].startswith("## ❌ xla-dynamo: FAILED")
    assert summary[2] == f"> **{warning.removeprefix('xla-dynamo gate: ')}**"  # under the headline
    # the same file under its own setting: no warning, the same verdict
    monkeypatch.setenv("PYTEST_XLA_CPU_ISA", "avx512")
    same = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv")
    assert same.ret == 1 and "WARNING" not in same.stdout.str(), same.stdout.str()
    same.stdout.fnmatch_lines(["*xla-dynamo gate FAILED: 1 regression (exit status 1)"])
    # an update rewrites the file's setting to this run's, and says that the rows it kept were not
    monkeypatch.delenv("PYTEST_XLA_CPU_ISA")
    update = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv", "--xla-update-expected",
                                           "-k", "m1")
    assert update.ret == 0, update.stdout.str()
    update.stdout.fnmatch_lines([
        "xla-dynamo: updated 1 rows, kept 1 rows not run in this session (0 new) in expected.csv; WARNING: the 1 rows "
        f"kept were recorded with kernels {OTHER_KERNELS}, the file now says {cpu_isa.kernel_setting('avx2')}: rerun "
        "them under this setting"])
    assert pytester.path.joinpath("expected.csv").read_text().splitlines()[:2] == _metadata_lines()
    # a file without metadata (written before issue 28) reads as before, and nothing is claimed about it
    _write(pytester, KERNEL_CASES, _expected(*KERNEL_ROWS))
    old = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-expected=expected.csv")
    assert old.ret == 1 and "WARNING" not in old.stdout.str() and "recorded with" not in old.stdout.str()
