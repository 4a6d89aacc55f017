"""Tests of pytest_xla_dynamo.workers.snippets: the ``xla_subprocess`` fixture's snippets in fresh interpreters.

Real child interpreters: results, typed exceptions, crashes, timeouts, the environment, and a snippet
that is still running when the session ends (a pytester session).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from process_helpers import gone

from pytest_xla_dynamo.session import CHILD_ENV
from pytest_xla_dynamo.workers.snippets import Snippets, SubprocessCrashed, SubprocessError, SubprocessTimeout

pytest_plugins = ["pytester"]


def test_xla_subprocess_run_returns_the_result(xla_subprocess: Snippets) -> None:
    result = xla_subprocess.run("""
        import os, sys
        print("out", os.environ["PJRT_DEVICE"], sys.argv[1:])
        print("err", file=sys.stderr)
    """, timeout=60, args=["a", "b"])
    assert result.ok and result.returncode == 0 and result.signal is None and result.error is None
    assert result.stdout.strip() == f"out {os.environ.get('PJRT_DEVICE', 'CPU')} ['a', 'b']"
    assert result.stderr.strip() == "err"
    assert xla_subprocess.results == [result]


def test_xla_subprocess_check_raises_the_childs_exception_type(xla_subprocess: Snippets) -> None:
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
    runner = Snippets()
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
    monkeypatch.setenv(CHILD_ENV, "/nonexistent/reports.jsonl")
    result = Snippets().run(f"import os\nprint(os.environ.get({CHILD_ENV!r}))", timeout=60)
    assert result.stdout.strip() == "None"
    assert os.environ[CHILD_ENV]  # untouched here


def test_env_cwd_and_default_timeout_of_the_runner(tmp_path: Path) -> None:
    runner = Snippets(cwd=tmp_path, env={"XLA_SNIPPET_A": "from-runner"}, timeout=1)
    result = runner.run("import os, time\nprint(os.getcwd(), os.environ['XLA_SNIPPET_A'], os.environ['B'])",
                        env={"B": "from-call"}, timeout=60)
    assert result.stdout.split() == [str(tmp_path), "from-runner", "from-call"]
    assert runner.run("import time\ntime.sleep(60)").timed_out  # the runner's own timeout


def test_the_snippet_folder_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    Snippets().run("print('x')", timeout=60)
    Snippets().run("import time\ntime.sleep(60)", timeout=1)
    assert not list(tmp_path.glob("xla-subprocess-*"))


SESSION_END = """
import os, threading, time
from pathlib import Path
from pytest_xla_dynamo.workers.snippets import Snippets

def test_leaves_a_snippet_running():
    pidfile = Path(os.environ["SNIPPET_PIDFILE"])
    code = f"import os, time\\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\\ntime.sleep(600)"
    threading.Thread(target=lambda: Snippets().run(code, timeout=600), daemon=True).start()
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pidfile.read_text()
"""


SESSION_END_CONFTEST = """
import os, time
from pathlib import Path
import pytest

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):  # after the plugin's: is the snippet still running while we are?
    pid = int(Path(os.environ["SNIPPET_PIDFILE"]).read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # reaped before the open, or between open and read
            state = "gone"
        if state in ("Z", "X", "gone"):
            break
        time.sleep(0.05)
    print(f"SNIPPET AT UNCONFIGURE: {state}")
"""


def test_a_snippet_still_running_at_the_session_end_is_ended(pytester: pytest.Pytester, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile, tmp = tmp_path / "snippet.pid", tmp_path / "tmp"
    tmp.mkdir()
    pytester.makepyfile(test_end=SESSION_END)
    pytester.makeconftest(SESSION_END_CONFTEST)
    monkeypatch.setenv("SNIPPET_PIDFILE", str(pidfile))
    monkeypatch.setenv("TMPDIR", str(tmp))
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1)
    # ended by the plugin at pytest_unconfigure, while the session's process still runs
    assert re.search(r"SNIPPET AT UNCONFIGURE: (Z|X|gone)", result.stdout.str()), result.stdout.str()[-2000:]
    pid = int(pidfile.read_text())
    assert gone(pid), f"snippet {pid} outlived the session"
    assert not list(tmp.glob("xla-subprocess-*"))
