"""Tests of pytest_xla_dynamo.workers.processes: children that end with their parent.

Real processes throughout (small Python programs and ``sleep``): a timeout, an exception or a signal in
the parent ends the child's whole process group and, where the parent goes away, its temp folder too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_helpers import alive, gone, removed, wait_for_pids

from pytest_xla_dynamo.workers import processes
from pytest_xla_dynamo.workers.processes import Terminated, request_stack, run, signal_name, tail

# A child that starts a grandchild in its own process group, writes both pids, then hangs.
HANG = textwrap.dedent("""
    import subprocess, sys, time
    grandchild = subprocess.Popen(["sleep", "600"])
    with open(sys.argv[1], "w") as fh:
        fh.write(f"{__import__('os').getpid()} {grandchild.pid}")
    time.sleep(600)
""")


@pytest.fixture
def hang(tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    pids = tmp_path / "pids"
    yield [sys.executable, "-c", HANG, str(pids)], pids
    if pids.exists():  # never leave anything behind, whatever the test did
        for pid in pids.read_text().split():
            if alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)


def test_signal_name_and_tail() -> None:
    assert signal_name(-6) == "SIGABRT"
    assert signal_name(-11) == "SIGSEGV"
    assert signal_name(0) is None and signal_name(1) is None and signal_name(None) is None
    assert tail("a\nb\nc\n", 2) == "b\nc"


def test_a_normal_exit_returns_output_and_code() -> None:
    done = run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
               env=os.environ, cwd=None, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == (3, "out", "err")
    assert not done.timed_out and done.stopped_by is None
    assert processes.live_children() == []


def test_a_timeout_kills_the_whole_group_after_asking_for_the_stack(hang: tuple[list[str], Path]) -> None:
    cmd, pids = hang
    asked: list[int] = []

    def on_timeout(pid: int) -> None:
        asked.append(pid)
        assert alive(pid)  # asked before the kill

    done = run(cmd, env=os.environ, cwd=None, timeout=3, on_timeout=on_timeout)
    child, grandchild = wait_for_pids(pids, 2, within=1)
    assert done.timed_out and done.returncode is None and done.stopped_by is None
    assert asked == [child]
    assert gone(child) and gone(grandchild)


def test_a_normal_exit_ends_what_the_child_left_in_its_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = "import subprocess, sys; open(sys.argv[1], 'w').write(str(subprocess.Popen(['sleep', '600']).pid))"
    done = run([sys.executable, "-c", code, str(pids)], env=os.environ, cwd=None, timeout=60)
    assert done.returncode == 0
    assert gone(int(pids.read_text()))


def test_request_stack_reads_the_faulthandler_dump(tmp_path: Path) -> None:
    stack, ready = tmp_path / "stack.txt", tmp_path / "ready"
    code = textwrap.dedent(f"""
        import faulthandler, signal, time
        faulthandler.register(signal.SIGUSR1, file=open({str(stack)!r}, "w"), all_threads=True)
        def waiting_here():
            open({str(ready)!r}, "w").close()
            time.sleep(600)
        waiting_here()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        text = request_stack(proc.pid, stack)
        assert "in waiting_here" in text and "most recent call first" in text
        assert proc.poll() is None  # the dump did not end it
    finally:
        proc.kill()
        proc.wait()


def test_an_exception_during_the_wait_ends_the_child_and_is_returned(hang: tuple[list[str], Path]) -> None:
    """An exception raised by a signal handler during the wait (as pytest-timeout's signal method does)."""
    cmd, pids = hang
    previous = signal.getsignal(signal.SIGALRM)

    def handler(signum: int, frame: object) -> None:
        wait_for_pids(pids, 2)
        raise pytest.fail.Exception("Timeout (>2.0s) from pytest-timeout.")

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 2)
    try:
        done = run(cmd, env=os.environ, cwd=None, timeout=120, on_timeout=lambda pid: None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert isinstance(done.stopped_by, pytest.fail.Exception) and done.returncode is None
    assert all(gone(pid) for pid in wait_for_pids(pids, 2))


def test_ctrl_c_during_the_wait_ends_the_child_removes_its_folder_and_is_re_raised(
        hang: tuple[list[str], Path], tmp_path: Path) -> None:
    cmd, pids = hang
    workdir = tmp_path / "xla-isolated-x"
    workdir.mkdir()
    previous = signal.getsignal(signal.SIGALRM)

    def handler(signum: int, frame: object) -> None:
        wait_for_pids(pids, 2)
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 1)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(cmd, env=os.environ, cwd=None, timeout=120, workdir=workdir)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert all(gone(pid) for pid in wait_for_pids(pids, 2))
    assert not workdir.exists()
    assert processes.live_children() == []


# A parent that runs HANG through processes.run and waits (optionally with its own SIGTERM handler).
PARENT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pytest_xla_dynamo.workers import processes
    hang, pids, workdir, mode = sys.argv[1:5]
    Path(workdir).mkdir()
    if mode == "handler":
        def on_term(signum, frame):
            print("previous handler called", flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, on_term)
    processes.run([sys.executable, "-c", hang, pids], env=os.environ, cwd=None, timeout=600, workdir=Path(workdir))
""")


def _parent(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path, Path]:
    pids, workdir = tmp_path / "pids", tmp_path / "xla-isolated-p"
    proc = subprocess.Popen([sys.executable, "-c", PARENT, HANG, str(pids), str(workdir), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, pids, workdir


@pytest.mark.parametrize("mode", ["default", "handler"])
def test_sigterm_to_the_parent_ends_the_child_then_reaches_the_previous_handler(tmp_path: Path, mode: str) -> None:
    proc, pids, workdir = _parent(tmp_path, mode)
    try:
        child, grandchild = wait_for_pids(pids, 2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == (-signal.SIGTERM if mode == "default" else 7), out
    if mode == "handler":
        assert "previous handler called" in out
    assert gone(child) and gone(grandchild)
    assert not workdir.exists()


def test_a_parent_killed_outright_takes_its_child_and_folder_with_it(tmp_path: Path) -> None:
    """SIGKILL (like pytest-timeout's thread method's os._exit): no finally runs in the parent; the
    kernel (PR_SET_PDEATHSIG) and the watchdog end the group and remove the temp folder."""
    proc, pids, workdir = _parent(tmp_path, "default")
    try:
        child, grandchild = wait_for_pids(pids, 2)
        assert workdir.exists()
        proc.kill()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert gone(child) and gone(grandchild)
    assert removed(workdir)


def test_end_all_ends_children_still_running(hang: tuple[list[str], Path], tmp_path: Path) -> None:
    """What the plugin does at the session's end: a child waited for in another thread is ended."""
    cmd, pids = hang
    workdir = tmp_path / "xla-subprocess-t"
    workdir.mkdir()
    results: list[processes.Finished] = []
    thread = threading.Thread(target=lambda: results.append(run(cmd, env=os.environ, cwd=None, timeout=600,
                                                                workdir=workdir)))
    thread.start()
    child, grandchild = wait_for_pids(pids, 2)
    assert child in processes.live_children()
    processes.end_all()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert results[0].returncode == -signal.SIGKILL
    assert gone(child) and gone(grandchild)
    assert not workdir.exists()


def test_terminated_is_an_interruption() -> None:
    assert issubclass(Terminated, KeyboardInterrupt)
