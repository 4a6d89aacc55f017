"""Tests of pytest_xla_dynamo.report.plugin: the end-of-session reports in real pytest sessions
(pytester subprocesses, with and without xdist), and how they behave when the session is interrupted
(Ctrl-C in a test, Ctrl-C and SIGTERM while the files are written), under ``--collect-only`` and with a
report folder that cannot be used.

No torch here: the sessions record fixed numbers through ``XlaSession.record``, so each is fast.
"""

from __future__ import annotations

import csv
import json
import os
import signal
from pathlib import Path

import pytest
from sample_data import EXPECTED_HEADER, PNG_MAGIC, SET, earlier_set, table_rows

from pytest_xla_dynamo import report

pytest_plugins = ["pytester"]

SESSION_TESTS = '''
import pytest
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.session import get_session

SPEEDUPS = {
    ("resnet18", "trace_once", "train"): 2.0, ("resnet50", "trace_once", "train"): 0.5,
    ("alexnet", "trace_once", "train"): 4.0,
    ("resnet18", "trace_everytime", "train"): 1.0, ("resnet50", "trace_everytime", "train"): 2.0,
    ("resnet18", "trace_once", "infer"): 3.0, ("resnet50", "trace_once", "infer"): 3.0,
    ("alexnet", "trace_once", "infer"): 3.0,
    ("resnet18", "trace_everytime", "infer"): 1.2, ("resnet50", "trace_everytime", "infer"): 1.2,
    ("alexnet", "trace_everytime", "infer"): 1.2,
}

@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("backend", ["trace_once", "trace_everytime"])
@pytest.mark.parametrize("model", ["resnet18", "resnet50", "alexnet"])
def test_timing(request, model, backend, mode):
    speedup = SPEEDUPS.get((model, backend, mode))
    get_session(request.config).record(request.node, CaseRecord(
        suite="timing", name=model, backend=backend, mode=mode, speedup=speedup,
        status="pass" if speedup else "fail_to_run", abs_latency=10.0 if speedup else None,
        baseline="eager", iterations_per_run=1, repeat=5))

@pytest.mark.parametrize("model", ["resnet18", "resnet50", "alexnet"])
def test_parity(request, model):
    status = "fail_accuracy" if model == "alexnet" else "pass"
    get_session(request.config).record(request.node, CaseRecord(
        suite="parity", name=model, backend="trace_once", mode="train", status=status))
'''

# Each worker says what the report folder held when its own sessionfinish hooks had all run.
WITNESS_CONFTEST = '''
import os
from pathlib import Path
import pytest

HERE = Path(__file__).parent

@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session, exitstatus):
    result = yield
    if hasattr(session.config, "workerinput"):
        out = HERE / "out"
        seen = sorted(os.listdir(out)) if out.exists() else []
        (HERE / ("witness-" + session.config.workerinput["workerid"])).write_text(repr(seen))
    return result
'''

# One recorded case, then Ctrl-C (or pytest.exit) in the next test.
INTERRUPTED_TESTS = '''
import pytest
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.session import get_session

def test_recorded(request):
    get_session(request.config).record(request.node, CaseRecord(
        suite="timing", name="resnet18", backend="trace_once", mode="train", speedup=2.0, baseline="eager"))

def test_stop():
    {stop}

def test_never_run():
    pass
'''

# The png writer sends a signal to its own process halfway through its file (csv and json are staged).
SIGNAL_WHILE_WRITING_CONFTEST = '''
import os
import signal
from pathlib import Path

from pytest_xla_dynamo.fileio import atomic_write
from pytest_xla_dynamo.report import png, writer

def write_png(records, path, environment=None, *, baseline=None):
    with atomic_write(path, binary=True) as f:
        f.write(b"half a figure")
        f.flush()
        os.kill(os.getpid(), signal.{signal})
        f.write(b"never reached: the handler raised")
    return Path(path)

png.write_png = write_png
writer._matplotlib_missing = lambda: False
'''

N_TIMING = 12
N_PARITY = 3


def check_session_output(text: str) -> None:
    assert text.count(report.SECTION) == 1
    assert sum(line.startswith("+===") for line in text.splitlines()) == 3  # parity, train, infer: once each
    for model in ("resnet18", "resnet50", "alexnet"):
        assert sum(line.startswith(f"| {model} ") for line in text.splitlines()) == 3
    assert "train: speedup over eager (iterations per run: 1, repeat: 5)" in text
    assert "infer: speedup over eager (iterations per run: 1, repeat: 5)" in text
    lines = text.splitlines()
    means = [table_rows(line)["geomean"] for line in lines if line.startswith("| geomean ")]
    assert means == [["1.59x", "1.41x (2/3)"], ["3.00x", "1.20x"]]
    assert "fail_to_run" in text  # alexnet trace_everytime train
    assert "pass 2 / fail 1 / xfail 0" in text
    (memory,) = [line for line in text.splitlines() if line.startswith("memory: ")]
    assert memory.startswith("memory: all processes together peaked at ") and "; the largest process " in memory


def check_files(out: Path) -> None:
    assert sorted(os.listdir(out)) == SET
    with (out / "xla-dynamo.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == N_TIMING + N_PARITY
    assert ",".join(rows[0].keys()) == EXPECTED_HEADER
    lines = (out / "xla-dynamo.jsonl").read_text().splitlines()
    parsed = [json.loads(line) for line in lines]
    assert len(parsed) == N_TIMING + N_PARITY
    assert {(p["name"], p["backend"], p["mode"], p["suite"]) for p in parsed} == {
        (m, b, mo, "timing") for m in ("resnet18", "resnet50", "alexnet")
        for b in ("trace_once", "trace_everytime") for mo in ("train", "infer")
    } | {(m, "trace_once", "train", "parity") for m in ("resnet18", "resnet50", "alexnet")}
    env = parsed[0]["environment"]
    assert env["PJRT_DEVICE"] == "CPU" and env["iterations_per_run"] == 1 and env["seed"] == 1337
    memory = env["memory"]  # the session's peak resident memory: the largest of its processes'
    assert memory["peak_rss_kb"] == max(memory["processes_peak_rss_kb"].values()) > 10_000
    # and all of its processes' together, sampled: at least the largest process's RSS at that moment
    summed = memory["summed_peak"]
    assert memory["summed_peak_rss_kb"] == sum(summed["at_peak_rss_kb"].values()) > 10_000
    assert summed["sample_interval_s"] == 0.5 and summed["samples"] >= 1
    assert "this process" in summed["at_peak_rss_kb"]
    data = (out / "xla-dynamo.png").read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def leftovers(root: Path) -> list[str]:
    """Temporary files and staging folders anywhere under ``root`` (none may be left)."""
    return [str(p) for p in root.rglob("*") if p.name.startswith(".xla-dynamo") or p.name.endswith(".tmp")]


# --- complete sessions ---------------------------------------------------------------------------------


def test_plugin_without_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=SESSION_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=table,csv,json,png",
                                           "--xla-report-dir=out", timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    text = result.stdout.str()
    check_session_output(text)
    assert "xdist worker" not in text
    assert f"{N_TIMING + N_PARITY} records\n" in text + "\n"
    out = pytester.path / "out"
    for name in ("csv", "json", "png"):
        assert f"{name} report: out/xla-dynamo" in text
    check_files(out)
    assert leftovers(pytester.path) == []


def test_plugin_with_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_cases=SESSION_TESTS)
    pytester.makeconftest(WITNESS_CONFTEST)
    result = pytester.runpytest_subprocess("-n", "2", "--xla-report=table,csv,json,png", "--xla-report-dir=out",
                                           timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    text = result.stdout.str()
    check_session_output(text)
    (line,) = [x for x in text.splitlines() if x.startswith(f"{N_TIMING + N_PARITY} records from 2 xdist workers")]
    counts = [int(part.split(": ")[1]) for part in line.split("(")[1].rstrip(")").split(", ")]
    assert sum(counts) == N_TIMING + N_PARITY
    check_files(pytester.path / "out")
    env = json.loads((pytester.path / "out" / "xla-dynamo.jsonl").read_text().splitlines()[0])["environment"]
    assert env["xdist_workers"] == 2
    assert set(env["memory"]["processes_peak_rss_kb"]) == {"this process", "gw0", "gw1"}  # each worker said
    # the sampler saw both workers, named by the pid each sent
    sampled = {name.split(" (pid")[0] for name in env["memory"]["summed_peak"]["processes_peak_rss_kb"]}
    assert {"this process", "gw0", "gw1"} <= sampled
    # the workers wrote nothing: when their sessionfinish was over, the report folder did not exist
    assert (pytester.path / "witness-gw0").read_text() == "[]"
    assert (pytester.path / "witness-gw1").read_text() == "[]"


def test_plugin_write_error_and_missing_matplotlib(pytester: pytest.Pytester) -> None:
    """A requested report that cannot be written fails the run with an error line; png without
    matplotlib is one line, no traceback; without "table" in --xla-report no table is printed.
    (The folder is usable at start-up: a file takes its place before the reports are written.)"""
    pytester.makepyfile(test_cases=SESSION_TESTS)
    pytester.makeconftest(
        "import sys\nfrom pathlib import Path\nimport pytest\nsys.modules['matplotlib'] = None\n\n"
        "@pytest.hookimpl(tryfirst=True)\ndef pytest_sessionfinish(session):\n"
        "    (Path(__file__).parent / 'blocked').write_text('a file where the report folder should be')\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=csv,png", "--xla-report-dir=blocked",
                                           timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    assert text.count(report.SECTION) == 1
    assert "+===" not in text  # "table" not selected: no tables
    result.stdout.fnmatch_lines([
        "png report not written: matplotlib is not installed (pip install matplotlib)",
        "no report written: blocked is left as it was (a set is written whole or not at all)",
        "ERROR: could not write the csv report blocked/xla-dynamo.csv: *",
    ])
    assert "Traceback" not in text
    assert not (pytester.path / "xla-report").exists()
    assert (pytester.path / "blocked").read_text() == "a file where the report folder should be"


def test_plugin_default_report_is_tables_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=SESSION_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:xdist", timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    assert result.ret == 0
    check_session_output(result.stdout.str())
    assert " report: " not in result.stdout.str()
    assert not (pytester.path / "xla-report").exists()
    assert list(pytester.path.rglob("xla-dynamo.*")) == []


def test_plugin_silent_without_records(pytester: pytest.Pytester) -> None:
    # the one test is skipped, so the plugin never brings the XLA runtime up: a fast subprocess
    pytester.makepyfile(test_plain="import pytest\n@pytest.mark.skip\ndef test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=table,csv", timeout=600)
    result.assert_outcomes(skipped=1)
    text = result.stdout.str()
    assert text.count(report.SECTION) == 1
    result.stdout.fnmatch_lines(["0 records", "no records: no csv report written"])
    assert not (pytester.path / "xla-report").exists()
    result = pytester.runpytest_subprocess("-p", "no:xdist", timeout=600)
    assert report.SECTION not in result.stdout.str()


# --- start-up and --collect-only -------------------------------------------------------------------------


def test_report_dir_that_is_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=SESSION_TESTS)
    (pytester.path / "blocked").write_text("a file where the report folder should be")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=csv", "--xla-report-dir=blocked",
                                           timeout=600)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--xla-report-dir: invalid value 'blocked' (a file, not a folder); "
                                 "valid: a writable folder (created when missing)*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "passed" not in result.stdout.str()  # nothing ran
    assert (pytester.path / "blocked").read_text() == "a file where the report folder should be"


def test_collect_only_writes_no_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=SESSION_TESTS)
    # a record exists even so (a plugin could add one during collection): still no file
    pytester.makeconftest(
        "from pytest_xla_dynamo.records import CaseRecord\nfrom pytest_xla_dynamo.session import get_session\n\n"
        "def pytest_collection_finish(session):\n"
        "    get_session(session.config).store.add(CaseRecord(suite='timing', name='m', backend='b', mode='train'))\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--collect-only", "--xla-report=table,csv,json",
                                           "--xla-report-dir=out", timeout=600)
    assert result.ret == pytest.ExitCode.OK
    assert f"{N_TIMING + N_PARITY} tests collected" in result.stdout.str()
    assert report.SECTION not in result.stdout.str()
    assert not (pytester.path / "out").exists()
    assert list(pytester.path.rglob("xla-dynamo.*")) == []


# --- interruptions (fault injection) -------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["raise KeyboardInterrupt", "pytest.exit('stopping here')"])
def test_interrupted_session_keeps_the_earlier_set(pytester: pytest.Pytester, stop: str) -> None:
    """Ctrl-C (or pytest.exit) after one recorded case: the complete earlier set stays, the section says so."""
    pytester.makepyfile(test_cases=INTERRUPTED_TESTS.format(stop=stop))
    before = earlier_set(pytester.path / "out")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=table,csv,json",
                                           "--xla-report-dir=out", timeout=600)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    text = result.stdout.str()
    result.stdout.fnmatch_lines(["1 record (session interrupted)",
                                 "session interrupted: no csv/json report written; out is left as it was"])
    assert "test_never_run" not in text and " report: out" not in text
    assert contents(pytester.path / "out") == before
    assert leftovers(pytester.path) == []


def test_ctrl_c_while_writing_keeps_the_earlier_set(pytester: pytest.Pytester) -> None:
    """Ctrl-C while the png is written (csv and json staged): no file moved in, no temporary file,
    no KeyboardInterrupt traceback, exit status 2."""
    pytester.makepyfile(test_cases=SESSION_TESTS)
    pytester.makeconftest(SIGNAL_WHILE_WRITING_CONFTEST.format(signal="SIGINT"))
    before = earlier_set(pytester.path / "out")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=table,csv,json,png",
                                           "--xla-report-dir=out", timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    check_session_output(result.stdout.str())
    result.stdout.fnmatch_lines(["interrupted while writing the reports: none written; out is left as it was"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert contents(pytester.path / "out") == before
    assert leftovers(pytester.path) == []


def test_sigterm_while_writing_leaves_no_temporary_file(pytester: pytest.Pytester) -> None:
    """SIGTERM while the png is written: the temporary file and the staged set are removed, the earlier
    set stays, and the process then ends by SIGTERM, as its sender asked."""
    pytester.makepyfile(test_cases=SESSION_TESTS)
    pytester.makeconftest(SIGNAL_WHILE_WRITING_CONFTEST.format(signal="SIGTERM"))
    before = earlier_set(pytester.path / "out")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=csv,json,png", "--xla-report-dir=out",
                                           timeout=600)
    assert result.ret == -signal.SIGTERM
    result.stderr.fnmatch_lines(["xla-dynamo: terminated while writing the reports: none written; "
                                 "out is left as it was"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert contents(pytester.path / "out") == before
    assert leftovers(pytester.path) == []


def test_internal_error_keeps_the_earlier_set(pytester: pytest.Pytester) -> None:
    """A session that ends in an internal error (exit status 3) after one recorded case writes nothing."""
    pytester.makepyfile(test_cases=INTERRUPTED_TESTS.format(stop="pass"))
    pytester.makeconftest("def pytest_runtest_logfinish(nodeid, location):\n"
                          "    if nodeid.endswith('test_stop'):\n        raise RuntimeError('a broken hook')\n")
    before = earlier_set(pytester.path / "out")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=csv,json", "--xla-report-dir=out",
                                           timeout=600)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert "RuntimeError: a broken hook" in result.stdout.str() + result.stderr.str()
    assert contents(pytester.path / "out") == before
    assert leftovers(pytester.path) == []
