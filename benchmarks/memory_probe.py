"""A pytest plugin for benchmarks/memory.py: one JSON line per finished test with the process's RSS.

Loaded with ``-p memory_probe`` (``benchmarks/`` on ``PYTHONPATH``); it appends to the file named by
``XLA_MEMORY_PROBE``: ``{"pid", "nodeid", "model", "rss_kb", "hwm_kb", "session_peak_kb"}`` after each test, where
``rss_kb`` is VmRSS (resident now), ``hwm_kb`` the largest RSS since the model's first test began (sampled every
20 ms by a thread: a model's largest ``hwm_kb`` is its own peak) and ``session_peak_kb`` VmHWM, the process's
peak so far (what GNU time reports: the probe does not reset it). Child processes (an isolated test) load it
too: ``-p`` is forwarded to them. No torch here.
"""

from __future__ import annotations

import json
import os
import threading
import time
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


class MemoryProbe:
    def __init__(self, path: str) -> None:
        self.path = path
        self.items: dict[str, Any] = {}
        self.model: str | None = None
        self.model_peak = 0  # the largest sampled RSS since the current model's first test began
        self._stop = threading.Event()
        threading.Thread(target=self._sample, name="xla-memory-probe", daemon=True).start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.model_peak = max(self.model_peak, status_kb().get("VmRSS", 0))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = {item.nodeid: item for item in session.items}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        item = self.items.get(nodeid)
        model = _model(item) if item is not None else None
        if model != self.model:
            self.model = model
            self.model_peak = status_kb().get("VmRSS", 0)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        item = self.items.get(nodeid)
        mem = status_kb()
        self.model_peak = max(self.model_peak, mem.get("VmRSS", 0))
        line = {"pid": os.getpid(), "nodeid": nodeid, "model": _model(item) if item is not None else None,
                "rss_kb": mem.get("VmRSS", 0), "hwm_kb": self.model_peak, "session_peak_kb": mem.get("VmHWM", 0),
                "time": round(time.time(), 1)}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._stop.set()


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(ENV)
    if path:
        config.pluginmanager.register(MemoryProbe(path), "xla_memory_probe")
