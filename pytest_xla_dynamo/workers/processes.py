"""Child processes that end with their parent: started, waited for, stopped and cleaned up.

Isolated tests and ``xla_subprocess`` snippets run in fresh interpreters through :func:`run`. Each
child runs in a new session (its own process group, so a terminal's Ctrl-C does not reach it) and
never outlives its parent:

- the wait is in ``try/finally``: a Ctrl-C (``KeyboardInterrupt``), a pytest-timeout with the signal
  method (``Failed``) or any other exception ends the child's whole process group first;
- during the wait a SIGTERM to the parent becomes an exception too (the child is ended, then the
  SIGTERM is delivered again to the handler that was there before, by default ending the parent);
- the kernel kills the child when its parent dies (``prctl(PR_SET_PDEATHSIG)``, Linux), and a tiny
  watchdog process, in a session of its own, ends the group and removes the child's temp folder when
  the parent disappears without a word (``os._exit`` from pytest-timeout's thread method, SIGKILL);
- :func:`end_all` ends every child still running (the plugin calls it in ``pytest_unconfigure``).

A run that outlives its limit is asked for its Python stack first (``on_timeout``), then killed. Ending
a group also ends what the child started in it. No torch here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

TAIL_LINES = 60

# The watchdog: stdin is a pipe from the parent. "done" then EOF: the parent finished with the child.
# EOF alone: the parent died, so end the child's process group and remove its temp folder.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
pgid, workdir = int(sys.argv[1]), sys.argv[2]
if sys.stdin.buffer.read() != b"done":
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(20):
        if not workdir or not os.path.exists(workdir):
            break
        time.sleep(0.05)
        shutil.rmtree(workdir, ignore_errors=True)
"""


class Terminated(KeyboardInterrupt):
    """A SIGTERM reached the parent while it waited for a child (the child is ended first)."""


@dataclass
class Finished:
    """What a child process did."""

    returncode: int | None  # None: ended by the parent (a timeout or an exception during the wait)
    stdout: str
    stderr: str
    timed_out: bool = False
    stopped_by: BaseException | None = None  # the exception that stopped the wait (e.g. pytest-timeout's)
    duration: float = 0.0


def signal_name(returncode: int | None) -> str | None:
    """``-6`` -> ``"SIGABRT"`` (a child killed by a signal); None for a normal exit."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


# --- the registry of running children ---------------------------------------------------------------

_live: dict[int, Path | None] = {}  # pid (= process group) -> temp folder to remove
_live_lock = threading.Lock()


def live_children() -> list[int]:
    """The process ids of the children started by :func:`run` that are still running."""
    with _live_lock:
        return list(_live)


def _end_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def end_all() -> None:
    """End every child still running (its whole process group) and remove its temp folder."""
    with _live_lock:
        children = list(_live.items())
    for pid, workdir in children:
        _end_group(pid)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


# --- starting and waiting ----------------------------------------------------------------------------


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel for SIGKILL when the parent dies (Linux), resolved here,
    before the fork; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig, sigkill = 1, int(signal.SIGKILL)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigkill, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _start_watchdog(pid: int, workdir: Path | None) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pid), str(workdir or "")],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return None


def _release_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    if watchdog is None or watchdog.stdin is None:
        return
    with contextlib.suppress(OSError):
        watchdog.stdin.write(b"done")
    with contextlib.suppress(OSError):
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


def _exited(pid: int, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds for the child to exit, without reaping it (its process group
    stays valid for the final kill); signal handlers run meanwhile."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        time.sleep(delay if remaining is None else min(delay, remaining))
        delay = min(delay * 2, 0.05)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Within: a SIGTERM raises :class:`Terminated` (main thread only). On the way out the SIGTERM is
    delivered again to the handler that was there before (the default one ends the process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_IGN, None):
        yield
        return

    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup must not be cut short
        raise Terminated(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signal.SIGTERM, None)
        else:
            signal.raise_signal(signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _hard(exc: BaseException) -> bool:
    """Whether an exception during the wait must end the run (re-raised after the cleanup), rather
    than be reported as what stopped the child (pytest-timeout's ``Failed``, other exceptions)."""
    return isinstance(exc, (KeyboardInterrupt, SystemExit, pytest.exit.Exception))


def run(cmd: Sequence[str], *, env: Mapping[str, str], cwd: Path | str | None, timeout: float,
        workdir: Path | None = None, on_timeout: Callable[[int], None] | None = None) -> Finished:
    """Run ``cmd`` as a child that ends with its parent (see the module docstring).

    ``workdir``: the child's temp folder, removed by the watchdog or :func:`end_all` if the parent
    goes away (the caller removes it otherwise). ``on_timeout(pid)`` runs before the child is killed,
    after ``timeout`` seconds or an exception during the wait (e.g. to ask for its stack).
    Ctrl-C, SIGTERM, ``SystemExit`` and ``pytest.exit`` are re-raised after the child is ended; other
    exceptions are returned in :attr:`Finished.stopped_by`."""
    start = time.monotonic()
    with _sigterm_raises(), tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=dict(env),
                                cwd=cwd, start_new_session=True, text=True, preexec_fn=_die_with_parent())
        with _live_lock:
            _live[proc.pid] = workdir
        watchdog = _start_watchdog(proc.pid, workdir)
        timed_out, stopped_by, completed = False, None, False
        try:
            try:
                timed_out = not _exited(proc.pid, timeout)
            except BaseException as exc:
                if _hard(exc):
                    raise
                stopped_by = exc
            if (timed_out or stopped_by is not None) and on_timeout is not None:
                on_timeout(proc.pid)
            completed = True
        finally:
            _end_group(proc.pid)  # also what the child left running in its group
            proc.wait()
            with _live_lock:
                _live.pop(proc.pid, None)
            if not completed and workdir is not None:  # nobody reads it: the SIGTERM may end us next
                shutil.rmtree(workdir, ignore_errors=True)
            _release_watchdog(watchdog)
        out.seek(0)
        err.seek(0)
        ended = timed_out or stopped_by is not None
        return Finished(None if ended else proc.returncode, out.read(), err.read(), timed_out=timed_out,
                        stopped_by=stopped_by, duration=time.monotonic() - start)


def request_stack(pid: int, path: Path, *, signum: int = signal.SIGUSR1, wait: float = 3.0) -> str:
    """Send ``signum`` to ``pid`` (whose faulthandler writes its Python stack to ``path`` on it) and
    return what it wrote, waiting up to ``wait`` seconds for the dump to finish."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)
    deadline = time.monotonic() + wait
    size, stable_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now_size = path.stat().st_size if path.exists() else 0
        if now_size != size:
            size, stable_since = now_size, time.monotonic()
        elif size > 0 and time.monotonic() - stable_since > 0.2:
            break
        time.sleep(0.02)
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
