"""Tests of pytest_xla_dynamo.isolation: isolated tests in fresh interpreters (crashes reported, not
fatal; known crashes as xfails), and the ``xla_subprocess`` fixture.

The crash scenarios run in pytester subprocesses (each isolated test starts a child pytest: a few
seconds each, so they are grouped into few sessions). The tests themselves are small pure-Python
programs: what is under test is the plugin, not XLA.
"""

from __future__ import annotations

import os
import re
import signal

import pytest

from pytest_xla_dynamo import isolation
from pytest_xla_dynamo.isolation import (
    SubprocessCrashed,
    SubprocessError,
    SubprocessTimeout,
    XlaSubprocess,
    forward_cli,
    signal_name,
)

pytest_plugins = ["pytester"]

CONFTEST = """
import os
import pytest
from pytest_xla_dynamo.records import CaseRecord, get_store, record_case
from pytest_xla_dynamo.isolation import is_isolated_child

os.environ.setdefault("XLA_TEST_PARENT_PID", str(os.getpid()))  # children inherit the parent's

@pytest.fixture
def record(request):
    return lambda **kw: record_case(request.node, CaseRecord(suite="demo", backend="eager", mode="train", **kw))

def pytest_sessionfinish(session):
    if not is_isolated_child(session.config):
        names = sorted(r.name for r in get_store(session.config))
        print(f"\\nPARENT RECORDS={names}")
"""

REGISTRY = """
[[issue]]
id = "local:known-segv"
title = "a known segfault"
kind = "crash"
signal = "SIGSEGV"
affects = { torch_xla = ">=0.1" }
reproducer = "test_known_segv"

[[issue]]
id = "local:known-abort"
title = "a known abort, not marked isolated"
kind = "crash"
match = "about to abort"
affects = { torch_xla = ">=0.1" }
reproducer = "test_known_abort_auto_isolated"

[[issue]]
id = "local:wrong-signal"
title = "recorded as SIGSEGV, but it aborts"
kind = "crash"
signal = "SIGSEGV"
affects = { torch_xla = ">=0.1" }
reproducer = "test_crash_with_wrong_signal"

[[issue]]
id = "local:isolated-error"
title = "an isolated error"
kind = "error"
raises = "ValueError"
match = "bad value 7"
affects = { torch_xla = ">=0.1" }
reproducer = "test_isolated_known_error"
"""

TESTS_A = """
import os, signal, sys
import pytest

@pytest.fixture(scope="module")
def module_resource():
    yield "resource"

def test_in_parent(module_resource):
    assert os.getpid() == int(os.environ["XLA_TEST_PARENT_PID"])

@pytest.mark.xla_isolated
def test_isolated_runs_in_a_child(record):
    record(name="from-child")
    assert os.getpid() != int(os.environ["XLA_TEST_PARENT_PID"])
    print("hello from the child")

@pytest.mark.xla_isolated
def test_known_segv():
    os.kill(os.getpid(), signal.SIGSEGV)

def test_known_abort_auto_isolated():
    print("about to abort", file=sys.stderr, flush=True)
    os.abort()

@pytest.mark.xla_isolated
def test_crash_with_wrong_signal():
    os.abort()

@pytest.mark.xla_isolated
def test_isolated_known_error():
    raise ValueError("bad value 7")

@pytest.mark.xla_isolated
def test_unknown_abort(module_resource):
    os.abort()
"""

TESTS_B = """
import os

def test_after_the_crashes():
    assert os.getpid() == int(os.environ["XLA_TEST_PARENT_PID"])
"""


@pytest.fixture
def crash_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", registry=REGISTRY)
    pytester.makepyfile(test_a=TESTS_A, test_b=TESTS_B)
    return pytester


def test_crashes_are_reported_and_the_session_goes_on(crash_project: pytest.Pytester) -> None:
    result = crash_project.runpytest_subprocess("--xla-known-issues-file=registry.toml", "-p", "no:randomly",
                                                "-rA", "-p", "no:cacheprovider", timeout=600)
    out = result.stdout.str()
    result.assert_outcomes(passed=3, failed=2, xfailed=3)
    # every test ran, in order, and the session reached the second module
    result.stdout.fnmatch_lines([
        "PASSED test_a.py::test_in_parent",
        "PASSED test_a.py::test_isolated_runs_in_a_child",
        "PASSED test_b.py::test_after_the_crashes",
    ], consecutive=False)
    # known crashes: xfailed with their signal
    result.stdout.re_match_lines([
        r"XFAIL test_a.py::test_known_segv - local:known-segv: a known segfault \[crashed with signal SIGSEGV\]",
        r"XFAIL test_a.py::test_known_abort_auto_isolated - local:known-abort: .*\[crashed with signal SIGABRT\]",
        r"XFAIL test_a.py::test_isolated_known_error - local:isolated-error: an isolated error",
    ], consecutive=False)
    # unknown crash, wrong signal: failures naming what happened
    assert re.search(r"isolated test crashed with signal SIGABRT \(exit code -6\) in its call phase", out)
    assert "crashed with signal SIGABRT: not a known crash" in out
    assert "known crash local:wrong-signal expects signal SIGSEGV, got signal SIGABRT" in out
    result.stdout.fnmatch_lines(["FAILED test_a.py::test_crash_with_wrong_signal*",
                                 "FAILED test_a.py::test_unknown_abort*"], consecutive=False)
    # the child's faulthandler output reaches the report; no fixture state leaked across the crash
    assert "Fatal Python error: Aborted" in out
    assert "previous item was not torn down properly" not in out
    # the child's case record reached the parent's store
    assert "PARENT RECORDS=['from-child']" in out
    # the known-issue summary counts the known crashes that still reproduce
    result.stdout.re_match_lines([r"still reproduce \(strict xfail, as recorded\): 3 issue\(s\), 3 test\(s\)",
                                  r"fail another way than recorded \(failures\): 1 issue\(s\), 1 test\(s\)"],
                                 consecutive=False)
    assert result.ret == 1


def test_isolate_everything_under_xdist(crash_project: pytest.Pytester) -> None:
    """``--xla-isolate -n 2``: every test in a child (test_in_parent then fails: it runs in a child),
    the crashes and a hang stay reports, and the controller prints the summary once."""
    crash_project.makepyfile(test_a="""
import os, signal, time
import pytest

@pytest.fixture
def hang():
    time.sleep(600)

@pytest.mark.xla_isolated(timeout=10)
def test_hangs(hang):
    pass

def test_in_parent():
    assert os.getpid() == int(os.environ["XLA_TEST_PARENT_PID"])

def test_known_segv():
    os.kill(os.getpid(), signal.SIGSEGV)

def test_unknown_segv():
    os.kill(os.getpid(), signal.SIGSEGV)
""")
    result = crash_project.runpytest_subprocess("--xla-known-issues-file=registry.toml", "--xla-isolate",
                                                "-n", "2", "-p", "no:randomly", "-rA", timeout=600)
    result.assert_outcomes(passed=0, failed=3, xfailed=1, errors=1)
    out = result.stdout.str()
    assert "isolated test timed out (killed) in its setup phase" in out
    assert "FAILED test_a.py::test_in_parent" in out  # it ran in a child: isolation covered it
    assert "FAILED test_b.py::test_after_the_crashes" in out
    assert out.count("= xla known issues =") == 1
    assert "crashed with signal SIGSEGV: not a known crash" in out
    result.stdout.re_match_lines([r"XFAIL test_a.py::test_known_segv - .*\[crashed with signal SIGSEGV\]"])


# --- pure logic -------------------------------------------------------------------------------------


def test_signal_name() -> None:
    assert signal_name(-6) == "SIGABRT"
    assert signal_name(-11) == "SIGSEGV"
    assert signal_name(0) is None and signal_name(1) is None and signal_name(None) is None


def test_forward_cli_keeps_plugin_ini_and_config_options_only() -> None:
    given = ["tests/x.py::t", "-p", "no:randomly", "-pfoo", "-o", "a=1", "--override-ini=b=2", "-c", "cfg.ini",
             "-k", "expr", "-n", "2", "--strict-markers", "-x", "-W", "ignore", "--import-mode=importlib",
             "--maxfail=3", "-v"]
    assert forward_cli(given) == ["-p", "no:randomly", "-pfoo", "-o", "a=1", "--override-ini=b=2", "-c",
                                  "cfg.ini", "--strict-markers", "-W", "ignore", "--import-mode=importlib"]


# --- xla_subprocess ---------------------------------------------------------------------------------


def test_xla_subprocess_run_returns_the_result(xla_subprocess: XlaSubprocess) -> None:
    result = xla_subprocess.run("""
        import os, sys
        print("out", os.environ["PJRT_DEVICE"], sys.argv[1:])
        print("err", file=sys.stderr)
    """, timeout=60, args=["a", "b"])
    assert result.ok and result.returncode == 0 and result.signal is None and result.error is None
    assert result.stdout.strip() == f"out {os.environ.get('PJRT_DEVICE', 'CPU')} ['a', 'b']"
    assert result.stderr.strip() == "err"


def test_xla_subprocess_check_raises_the_childs_exception_type(xla_subprocess: XlaSubprocess) -> None:
    code = "class Boom(KeyError):\n    pass\nraise Boom('the child failed: 42')\n"
    result = xla_subprocess.run(code, timeout=60)
    assert result.returncode == 1 and result.error is not None and result.error["type"] == "Boom"
    with pytest.raises(KeyError, match=r"the child failed: 42") as info:
        xla_subprocess.check(code, timeout=60)
    assert isinstance(info.value, SubprocessError)
    assert type(info.value).__name__ == "Boom"
    assert "raise Boom('the child failed: 42')" in str(info.value)  # the child's traceback
    assert info.value.result.returncode == 1


def test_xla_subprocess_reports_crashes_and_timeouts() -> None:
    runner = XlaSubprocess()
    result = runner.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", timeout=60)
    assert result.signal == "SIGSEGV" and result.returncode == -signal.SIGSEGV
    assert "Segmentation fault" in result.stderr  # faulthandler in the child
    with pytest.raises(SubprocessCrashed, match=r"crashed with signal SIGABRT \(exit code -6\)"):
        runner.check("import os\nos.abort()", timeout=60)
    with pytest.raises(SubprocessTimeout, match="timed out"):
        runner.check("import time\ntime.sleep(60)", timeout=1)
    with pytest.raises(SubprocessError, match="exited with code 3"):
        runner.check("import sys\nsys.exit(3)", timeout=60)


def test_child_env_is_not_inherited_by_the_childs_own_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(isolation.CHILD_ENV, "/nonexistent/reports.jsonl")
    result = XlaSubprocess().run(f"import os\nprint(os.environ.get({isolation.CHILD_ENV!r}))", timeout=60)
    assert result.stdout.strip() == "None"
    assert os.environ[isolation.CHILD_ENV]  # untouched here
