"""Helpers of the process tests (test_processes, test_isolation, test_snippets): is a pid still running,
wait for pids a child wrote."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def gone(pid: int, within: float = 15.0) -> bool:
    """Whether ``pid`` stops running within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def removed(path: Path, within: float = 15.0) -> bool:
    """Whether ``path`` (a glob's parent: nothing matching) disappears within ``within`` seconds."""
    deadline = time.monotonic() + within
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def wait_for_pids(path: Path, count: int, within: float = 60.0) -> list[int]:
    """The ``count`` pids a child wrote into ``path`` (space-separated), waiting for them."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(p) for p in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.05)
    raise AssertionError(f"{path}: no {count} pids within {within} s")
