"""The machine lock: pytest-xdist workers share the cores, a timing measurement has them alone.

Under ``-n N`` every worker holds the lock *shared* while it runs a test, so parity, graphs and the
reproducers of several workers run side by side; the timed runs of a timing test (from the reset before
the first timed run to the last) hold it *exclusive*, so no other worker computes while they are measured,
and the interference check still sees anything else on the machine. A turnstile keeps a waiting
measurement from being starved: while it waits, no worker starts a new test; the tests already running
finish, then the measurement runs, then the others go on.

POSIX ``flock`` on two files in the folder the controller shares with its workers (``workerinput``);
the kernel drops a dead worker's locks with it. Without ``fcntl`` (not POSIX) there is no lock, and timing
stays refused under more than one worker.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_fcntl: Any
try:
    import fcntl as _fcntl
except ImportError:  # not POSIX
    _fcntl = None

_LOCK, _TURNSTILE = "machine.lock", "turnstile.lock"
PLUGIN_NAME = "xla_dynamo_machine_lock"  # the worker's MachineLockPlugin, as registered


def available() -> bool:
    """Whether this platform has the lock (POSIX ``flock``)."""
    return _fcntl is not None


class MachineLock:
    """Shared for a test, exclusive for timed runs, across the processes given the same folder.

    Not thread-safe: one per process. ``waited`` is the seconds this process has spent waiting for
    exclusivity (what serializing the timed runs cost it)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        if _fcntl is None:
            raise RuntimeError("the machine lock needs POSIX flock (fcntl)")
        folder = Path(folder)
        self._lock: IO[bytes] = open(folder / _LOCK, "a+b")  # held for the process's life
        self._turnstile: IO[bytes] = open(folder / _TURNSTILE, "a+b")
        self._shared = 0  # nesting depth of shared()
        self.waited = 0.0

    @staticmethod
    def _flock(f: IO[bytes], how: str) -> None:
        _fcntl.flock(f.fileno(), getattr(_fcntl, how))

    def _enter_shared(self) -> None:
        self._flock(self._turnstile, "LOCK_EX")
        try:
            self._flock(self._lock, "LOCK_SH")
        finally:
            self._flock(self._turnstile, "LOCK_UN")

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock shared (a test running beside other workers' tests)."""
        if self._shared == 0:
            self._enter_shared()
        self._shared += 1
        try:
            yield
        finally:
            self._shared -= 1
            if self._shared == 0:
                self._flock(self._lock, "LOCK_UN")

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[float]:
        """Hold the lock exclusive (timed runs); yields the seconds waited for it. A shared hold of this
        process is given up while it waits (two waiting measurements would otherwise wait on each other)
        and taken again after."""
        held = self._shared > 0
        start = time.perf_counter()
        if held:
            self._flock(self._lock, "LOCK_UN")
        self._flock(self._turnstile, "LOCK_EX")
        try:
            self._flock(self._lock, "LOCK_EX")
            waited = time.perf_counter() - start
            self.waited += waited
            try:
                yield waited
            finally:
                self._flock(self._lock, "LOCK_UN")
        finally:
            self._flock(self._turnstile, "LOCK_UN")
            if held:
                self._enter_shared()

    def close(self) -> None:
        self._lock.close()
        self._turnstile.close()


class NoLock:
    """The lock of a process that shares the machine with no other worker: never waits."""

    waited = 0.0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[float]:
        yield 0.0

    def close(self) -> None:
        pass


def worker_threads(cores: int, workers: int) -> int:
    """torch's intra-op threads for a worker's untimed tests: the cores shared out among the workers (at
    least one), so that several workers' CPU eager runs do not oversubscribe the cores (OpenMP's pools
    collapse when they do)."""
    return max(1, cores // max(1, workers))


class MachineLockPlugin:
    """A worker's side (registered in an xdist worker given a lock folder): each test runs holding the lock
    shared, and torch's threads are the worker's share of the cores. The timing check takes it exclusive
    for its timed runs (:func:`session_lock`)."""

    def __init__(self, lock: MachineLock, threads: int) -> None:
        self.lock = lock
        self.threads = threads
        self._threads_set = False

    def _set_threads(self, item: pytest.Item) -> None:
        """Once, before the first test that computes with torch (an XLA test, or any test once torch is in): the
        thread count is part of what dynamo guards on, so it must not change under a compiled case."""
        import sys

        from pytest_xla_dynamo.activation import needs_xla

        if self._threads_set or ("torch" not in sys.modules and not needs_xla(item)):
            return
        import torch

        torch.set_num_threads(self.threads)
        self._threads_set = True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        self._set_threads(item)
        with self.lock.shared():
            return (yield)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.lock.close()


def session_lock(config: pytest.Config) -> MachineLock | NoLock:
    """The lock this process shares with the other xdist workers (its :class:`MachineLockPlugin`'s, registered
    in a worker given a lock folder), else a :class:`NoLock`."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin.lock if isinstance(plugin, MachineLockPlugin) else NoLock()
