"""A pytest plugin for benchmarks/memory.py: one JSON line per finished test with the process's RSS.

Loaded with ``-p memory_probe`` (``benchmarks/`` on ``PYTHONPATH``); it appends to the file named by
``XLA_MEMORY_PROBE``: ``{"pid", "nodeid", "model", "rss_kb", "hwm_kb", "session_peak_kb"}`` after each test, where
``rss_kb`` is VmRSS (resident now), ``hwm_kb`` VmHWM, the process's peak since the model's first test began (the
probe resets the peak there: ``5 > /proc/self/clear_refs``), so a model's largest ``hwm_kb`` is its own peak, and
``session_peak_kb`` the process's peak so far. The reset also resets what ``getrusage`` (and GNU time) report
as the process's peak: read ``session_peak_kb`` instead.
Child processes (an isolated test) load it too: ``-p`` is forwarded to them. No torch here.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

ENV = "XLA_MEMORY_PROBE"


def status_kb() -> dict[str, int]:
    """VmRSS and VmHWM of this process, in kB (Linux ``/proc/self/status``)."""
    out: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def _model(item: Any) -> str | None:
    spec = getattr(getattr(item, "callspec", None), "params", {}).get("xla_model")
    return None if spec is None else str(getattr(spec, "name", spec))


def reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux 4.0+)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")


class MemoryProbe:
    def __init__(self, path: str) -> None:
        self.path = path
        self.items: dict[str, Any] = {}
        self.model: str | None = None
        self.peak = 0  # the largest VmHWM seen before a reset

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = {item.nodeid: item for item in session.items}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        item = self.items.get(nodeid)
        model = _model(item) if item is not None else None
        if model != self.model:
            self.model = model
            self.peak = max(self.peak, status_kb().get("VmHWM", 0))
            reset_peak()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        item = self.items.get(nodeid)
        mem = status_kb()
        line = {"pid": os.getpid(), "nodeid": nodeid, "model": _model(item) if item is not None else None,
                "rss_kb": mem.get("VmRSS", 0), "hwm_kb": mem.get("VmHWM", 0),
                "session_peak_kb": max(self.peak, mem.get("VmHWM", 0))}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(ENV)
    if path:
        config.pluginmanager.register(MemoryProbe(path), "xla_memory_probe")
