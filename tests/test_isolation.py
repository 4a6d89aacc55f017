"""Tests of pytest_xla_dynamo.workers.isolation: isolated tests in fresh interpreters (crashes and hangs
reported, not fatal; known crashes as xfails; the child never outlives its parent).

The scenarios run in pytester subprocesses (each isolated test starts a child pytest: a few seconds
each, so they are grouped into few sessions). The tests themselves are small pure-Python programs
(``os.abort``, ``time.sleep``): what is under test is the plugin, not XLA. The fault injections are real:
SIGINT and SIGTERM to a running parent, pytest-timeout's signal and thread methods, the plugin's own
timeout; each checks that the child's process is gone and no ``xla-isolated-*`` folder is left.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from process_helpers import gone, removed, wait_for_pids
from sample_data import before_summary, clean_env, run_sessions

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.workers.isolation import IsolationPlugin, forward_cli

pytest_plugins = ["pytester"]

CONFTEST = """
import os
import pytest
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.session import get_session

os.environ.setdefault("XLA_TEST_PARENT_PID", str(os.getpid()))  # children inherit the parent's

@pytest.fixture
def record(request):
    session = get_session(request.config)
    return lambda **kw: session.record(request.node, CaseRecord(suite="demo", backend="eager", mode="train", **kw))

def pytest_sessionfinish(session):
    if get_session(session.config).child_output is None:
        names = sorted(r.name for r in get_session(session.config).store)
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

# A hanging isolated test: writes its pid to $XLA_TEST_PIDFILE, then sleeps in a named function (the stack shows it).
HANGING = """
import os, time
import pytest

def sleeping_here():
    with open(os.environ["XLA_TEST_PIDFILE"], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(600)

@pytest.mark.xla_isolated
def test_hangs():
    sleeping_here()

def test_after_the_hang():
    pass
"""


@pytest.fixture
def crash_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", registry=REGISTRY)
    pytester.makepyfile(test_a=TESTS_A, test_b=TESTS_B)
    return pytester


@pytest.fixture
def hang_project(pytester: pytest.Pytester, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> tuple[pytest.Pytester, Path, Path]:
    """A project with :data:`HANGING`; TMPDIR and the pid file point into ``tmp_path``."""
    tmp, pidfile = tmp_path / "tmp", tmp_path / "child.pid"
    tmp.mkdir()
    pytester.makepyfile(test_hang=HANGING)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("XLA_TEST_PIDFILE", str(pidfile))
    return pytester, tmp, pidfile


def _left_behind(tmp: Path) -> list[str]:
    return [p.name for p in tmp.glob("xla-isolated-*")]


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
    # the child's faulthandler output reaches the report, once per failed abort (not again as a section)
    assert "Fatal Python error: Aborted" in out
    assert before_summary(out).count("Fatal Python error: Aborted") == 2, out
    assert "isolated child stderr" not in out
    # no fixture state leaked across the crash
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

@pytest.mark.xla_isolated(timeout=20)
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
    assert ("isolated test timed out after 20 s (@pytest.mark.xla_isolated(timeout=20)) in its setup phase"
            in out)
    assert re.search(r"the child's Python stack when it was ended \(faulthandler\) ---\n(.*\n)*.* in hang\n", out)
    assert "FAILED test_a.py::test_in_parent" in out  # it ran in a child: isolation covered it
    assert "FAILED test_b.py::test_after_the_crashes" in out
    assert out.count("= xla known issues =") == 1
    assert "crashed with signal SIGSEGV: not a known crash" in out
    result.stdout.re_match_lines([r"XFAIL test_a.py::test_known_segv - .*\[crashed with signal SIGSEGV\]"])


# --- timeouts ---------------------------------------------------------------------------------------


def test_a_timeout_is_reported_with_its_limit_and_the_childs_stack(
        hang_project: tuple[pytest.Pytester, Path, Path]) -> None:
    """``xla_isolate_timeout`` for every isolated test, the marker's ``timeout=`` over it; the session goes on."""
    pytester, tmp, pidfile = hang_project
    pytester.makepyfile(test_marked="""
import time
import pytest

def napping_here():
    time.sleep(600)

@pytest.mark.xla_isolated(timeout=15)
def test_marked_hang():
    napping_here()
""")
    result = pytester.runpytest_subprocess("-o", "xla_isolate_timeout=25", "-p", "no:randomly",
                                           "-p", "no:cacheprovider", "test_hang.py", "test_marked.py", timeout=600)
    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=2)
    assert "isolated test timed out after 25 s (xla_isolate_timeout, ini) in its call phase" in out
    assert "isolated test timed out after 15 s (@pytest.mark.xla_isolated(timeout=15)) in its call phase" in out
    stacks = re.findall(r"Python stack when it was ended \(faulthandler\) ---\n((?:.*\n)*?)command: ",
                        before_summary(out))
    assert len(stacks) == 2, out
    assert "most recent call first" in stacks[0] and "in sleeping_here" in stacks[0]
    assert "in napping_here" in stacks[1]
    assert "crashed with exit code -1" not in out and "(killed)" not in out
    assert result.ret == 1
    assert gone(int(pidfile.read_text()))
    assert _left_behind(tmp) == []


def test_the_timeout_option_is_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    help_text = re.sub(r"\s+", " ", result.stdout.str())
    assert "--xla-isolate-timeout" not in help_text  # a lab setting: its ini key and environment variable only
    ini = help_text.split("xla_isolate_timeout", 1)[1][:600]
    assert "(default: 1800)" in ini and "PYTEST_XLA_ISOLATE_TIMEOUT" in ini


BAD_TIMEOUTS: list[tuple[list[str], dict[str, str], str]] = [
    (["-o", "xla_isolate_timeout=abc"], {}, "xla_isolate_timeout (ini): invalid value 'abc'"),
    (["-o", "xla_isolate_timeout=0"], {}, "xla_isolate_timeout (ini): invalid value '0'"),
    (["-o", "xla_isolate_timeout=-5"], {}, "xla_isolate_timeout (ini): invalid value '-5'"),
    (["-o", "xla_isolate_timeout=inf"], {}, "xla_isolate_timeout (ini): invalid value 'inf'"),
    ([], {"PYTEST_XLA_ISOLATE_TIMEOUT": "soon"}, "xla_isolate_timeout (env PYTEST_XLA_ISOLATE_TIMEOUT): "
                                                 "invalid value 'soon'"),
    (["-c", "bad.ini"], {}, "xla_isolate_timeout (ini): invalid value 'nan'"),
]

def test_bad_timeouts_are_usage_errors(pytester: pytest.Pytester) -> None:
    """Each bad ``xla_isolate_timeout`` (command line, environment, ini): exit 4 before any test, naming
    the value and the valid ones, no traceback. One interpreter runs the sessions in turn."""
    pytester.makepyfile(test_plain="def test_plain():\n    print('RAN')\n")
    pytester.makefile(".ini", bad="[pytest]\nxla_isolate_timeout = nan\n")
    results = run_sessions(pytester.path, [{"args": a, "env": e} for a, e, _ in BAD_TIMEOUTS])
    for (_, _, message), res in zip(BAD_TIMEOUTS, results, strict=True):
        output = res["out"] + res["err"]
        assert res["ret"] == pytest.ExitCode.USAGE_ERROR, output[-2000:]
        assert f"ERROR: {message}; valid: a finite positive number" in res["err"], output[-2000:]
        assert "Traceback" not in output and "RAN" not in output


class _Item:
    """What ``IsolationPlugin.timeout`` reads of an item: its closest marker."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.marks = {m.mark.name: m.mark for m in marks}

    def get_closest_marker(self, name: str) -> Any:
        return self.marks.get(name)


@pytest.mark.parametrize(("source", "shown"), [
    ("command line", "xla_isolate_timeout"),
    ("env PYTEST_XLA_ISOLATE_TIMEOUT", "xla_isolate_timeout, env PYTEST_XLA_ISOLATE_TIMEOUT"),
    ("ini", "xla_isolate_timeout, ini"),
    ("default", "xla_isolate_timeout, default"),
])
def test_the_limit_and_where_it_comes_from(source: str, shown: str) -> None:
    xcfg = XlaConfig(isolate_timeout=42.0, sources={"xla_isolate_timeout": source})
    plugin = IsolationPlugin(SimpleNamespace(config=None, xcfg=xcfg, child_output=None))  # type: ignore[arg-type]
    assert plugin.timeout(_Item(pytest.mark.xla_isolated)) == (42.0, shown)  # type: ignore[arg-type]
    assert plugin.timeout(_Item(pytest.mark.xla_isolated(timeout=7))) == (  # type: ignore[arg-type]
        7.0, "@pytest.mark.xla_isolated(timeout=7)")
    assert XlaConfig().isolate_timeout == 1800.0


# --- the child ends with its parent -----------------------------------------------------------------


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 2), (signal.SIGTERM, -signal.SIGTERM)])
def test_ctrl_c_or_sigterm_to_the_parent_ends_the_child(hang_project: tuple[pytest.Pytester, Path, Path],
                                                        sig: signal.Signals, code: int) -> None:
    """Ctrl-C (SIGINT: the child runs in its own session, so only the parent gets it) or SIGTERM to a
    parent waiting for a hanging isolated test: the child is gone and so is its temp folder."""
    pytester, tmp, pidfile = hang_project
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
                             "test_hang.py"], cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=clean_env(TMPDIR=str(tmp), XLA_TEST_PIDFILE=str(pidfile)))
    try:
        (child,) = wait_for_pids(pidfile, 1, within=300)
        assert _left_behind(tmp), "the child's temp folder exists while it runs"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, out[-3000:]
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in out and "INTERNALERROR" not in out
    assert gone(child), f"the child {child} outlived its parent"
    assert _left_behind(tmp) == []


def test_pytest_timeout_signal_method_fails_the_test_and_the_session_goes_on(
        hang_project: tuple[pytest.Pytester, Path, Path]) -> None:
    pytest.importorskip("pytest_timeout")
    pytester, tmp, pidfile = hang_project
    result = pytester.runpytest_subprocess("--timeout=20", "--timeout-method=signal", "-p", "no:randomly",
                                           "-p", "no:cacheprovider", timeout=600)
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]  # not INTERNALERROR (3)
    assert "INTERNALERROR" not in out + result.stderr.str()
    result.assert_outcomes(failed=1, passed=1)
    assert re.search(r"isolated test was stopped after [\d.]+ s in its call phase\n"
                     r"stopped by: Timeout \(>20\.0s\) from pytest-timeout\. \(the child was ended\)", out), out
    assert "in sleeping_here" in out  # the child's stack
    assert gone(int(pidfile.read_text()))
    assert _left_behind(tmp) == []


def test_pytest_timeout_thread_method_ends_the_child_with_the_parent(
        hang_project: tuple[pytest.Pytester, Path, Path]) -> None:
    """The thread method dumps the stacks and ends the parent with ``os._exit(1)``: no ``finally`` runs
    there; the kernel (PR_SET_PDEATHSIG) and the watchdog end the child and remove its folder."""
    pytest.importorskip("pytest_timeout")
    pytester, tmp, pidfile = hang_project
    result = pytester.runpytest_subprocess("--timeout=20", "--timeout-method=thread", "-p", "no:randomly",
                                           "-p", "no:cacheprovider", timeout=600)
    assert result.ret == 1
    assert "Timeout" in result.stdout.str() + result.stderr.str()
    assert gone(int(pidfile.read_text()))
    assert all(removed(p) for p in tmp.glob("xla-isolated-*"))  # the watchdog acts within seconds
    assert _left_behind(tmp) == []


# --- pure logic -------------------------------------------------------------------------------------


def test_forward_cli_keeps_snapshot_update() -> None:
    """An isolated graph test under ``--snapshot-update`` writes its snapshot (issue 30's isolated runs did not)."""
    assert forward_cli(["suites/test_graphs.py", "--snapshot-update", "-n", "2"]) == ["--snapshot-update"]


def test_forward_cli_keeps_plugin_ini_and_config_options_only() -> None:
    given = ["tests/x.py::t", "-p", "no:randomly", "-pfoo", "-o", "a=1", "--override-ini=b=2", "-c", "cfg.ini",
             "-k", "expr", "-n", "2", "--strict-markers", "-x", "-W", "ignore", "--import-mode=importlib",
             "--maxfail=3", "-v"]
    assert forward_cli(given) == ["-p", "no:randomly", "-pfoo", "-o", "a=1", "--override-ini=b=2", "-c",
                                  "cfg.ini", "--strict-markers", "-W", "ignore", "--import-mode=importlib"]
