"""The thread budget of timing: one number of compute threads for the baseline and the backend alike.

``--xla-threads N`` (ini ``xla_threads``, env ``PYTEST_XLA_THREADS``; an integer >= 1 or ``auto``) sets

* torch's intra-op threads (``torch.set_num_threads``: CPU eager's OpenMP pool), before a case is
  warmed up and timed (:func:`apply_torch_threads`), and
* XLA:CPU's: ``PJRT_NPROC``, which the PJRT CPU client reads when the runtime starts (XLA's
  ``DefaultThreadPoolSize``, the size of its dispatch and Eigen pools). It must be set before the runtime
  is up: :class:`ThreadBudgetPlugin` sets it once collection has selected a timing test (before any test
  runs) and puts the environment back at ``pytest_unconfigure``; sessions without timing tests keep
  XLA:CPU's default threads.

Checked on torch_xla 2.9 with ``PJRT_DEVICE=CPU`` (per-thread CPU ticks of a loop of 1024x1024 matmuls):
``PJRT_NPROC=1`` keeps XLA:CPU's work on one thread, ``2`` (the default on 2 cores) spreads it on two;
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` changes nothing (two threads stay busy), and
``--intra_op_parallelism_threads`` is no XLA flag (the process aborts: "Unknown flag in XLA_FLAGS").
So only ``PJRT_NPROC`` is set. On other PJRT devices the budget is torch's only.

``auto``: :func:`auto_threads`. No torch at import time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

AUTO = "auto"
XLA_THREADS_ENV = "PJRT_NPROC"  # read by the PJRT CPU client when the runtime starts
AUTO_ONE_THREAD_MAX_CORES = 2
"""``auto`` gives 1 thread on a machine with this many cores or fewer. Measured on the 2-core machine
(issue 14, ``benchmarks/thread_budget.py``): CPU eager with torch's default 2 OpenMP threads takes 2-5x
longer per ViT training step when one busy process competes, while 1 thread is as fast as 2 at the small
tier quiet and barely moves loaded; XLA:CPU is far less affected either way."""


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells, else the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on every platform
        return max(1, os.cpu_count() or 1)


def auto_threads(cores: int) -> int:
    """The ``auto`` budget: 1 thread up to :data:`AUTO_ONE_THREAD_MAX_CORES` cores, else half the cores
    (room for the harness's own threads and for what else runs; not measured beyond 2 cores)."""
    return 1 if cores <= AUTO_ONE_THREAD_MAX_CORES else max(1, cores // 2)


@dataclass(frozen=True)
class ThreadBudget:
    """The session's thread budget: ``threads`` for torch and XLA:CPU, how it was chosen, and what XLA got."""

    threads: int
    choice: str  # "auto" or the number given
    cores: int
    xla: str  # how XLA:CPU's threads were set ("PJRT_NPROC=1"), or why they were not

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def budget_for(threads: int | None, cores: int | None = None, xla: str = "not set") -> ThreadBudget:
    """The budget of the option's value (``None``: auto) on ``cores`` cores (default: this process's)."""
    cores = cores or available_cores()
    if threads is None:
        return ThreadBudget(auto_threads(cores), AUTO, cores, xla)
    return ThreadBudget(threads, str(threads), cores, xla)


def runtime_already_up() -> bool:
    """Whether the XLA runtime already started in this process (checked without importing torch_xla)."""
    module = sys.modules.get("torch_xla")
    if module is None:
        return False
    try:
        return bool(module._XLAC._xla_runtime_is_initialized())
    except Exception:  # an unexpected torch_xla: assume it is up, so nothing claims an effect it lacks
        return True


def set_xla_threads(threads: int, environ: MutableMapping[str, str] | None = None,
                    runtime_up: bool | None = None) -> str:
    """Set XLA:CPU's threads through ``PJRT_NPROC`` (before the runtime starts); returns what was done."""
    env = os.environ if environ is None else environ
    device = env.get("PJRT_DEVICE", "CPU").strip().upper() or "CPU"
    if device != "CPU":
        return f"not set: PJRT_DEVICE={device} (the budget applies to torch's CPU threads only)"
    up = runtime_already_up() if runtime_up is None else runtime_up
    if up:
        current = env.get(XLA_THREADS_ENV)
        return (f"not set: the XLA runtime was already up ({XLA_THREADS_ENV}="
                f"{current if current is not None else 'unset'})")
    env[XLA_THREADS_ENV] = str(threads)
    return f"{XLA_THREADS_ENV}={threads}"


def apply_torch_threads(threads: int) -> int:
    """``torch.set_num_threads(threads)`` (when it differs); returns torch's thread count after."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


budget_key = pytest.StashKey["ThreadBudget"]()


class ThreadBudgetPlugin:
    """Applies the session's thread budget where the session times something: once collection has selected
    a test that uses ``xla_timing`` (before any test starts the XLA runtime), ``PJRT_NPROC`` is set; it is
    restored at unconfigure. A session without timing tests (parity, graphs, the plugin's own tests) keeps
    XLA:CPU's default threads."""

    def __init__(self, session: XlaSession) -> None:
        self.config = session.config
        self._saved = os.environ.get(XLA_THREADS_ENV)
        self._applied = False
        self.budget = budget_for(session.xcfg.threads, xla="not set (no timing test in this session)")
        self.config.stash[budget_key] = self.budget

    def apply(self) -> ThreadBudget:
        """Set XLA:CPU's threads now (idempotent) and return the budget as applied."""
        if not self._applied:
            self._applied = True
            self.budget = replace(self.budget, xla=set_xla_threads(self.budget.threads))
            self.config.stash[budget_key] = self.budget
        return self.budget

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if any("xla_timing" in getattr(item, "fixturenames", ()) for item in items):
            self.apply()

    def pytest_report_collectionfinish(self, config: pytest.Config) -> str | None:
        if not self._applied:
            return None
        b = self.budget
        return f"xla-dynamo timing threads: {b.threads} ({b.choice}, {b.cores} cores; XLA:CPU {b.xla})"

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if not self._applied:
            return
        if self._saved is None:
            os.environ.pop(XLA_THREADS_ENV, None)
        else:
            os.environ[XLA_THREADS_ENV] = self._saved


def budget_environment(threads: int | None) -> dict[str, Any]:
    """The budget for a report's environment (no torch, no config): the option's value resolved, and
    ``PJRT_NPROC`` as this process has it (set by :class:`ThreadBudgetPlugin` until unconfigure)."""
    budget = budget_for(threads)
    return {"threads": budget.threads, "choice": budget.choice, "cores": budget.cores,
            XLA_THREADS_ENV: os.environ.get(XLA_THREADS_ENV)}


def get_budget(config: pytest.Config, threads: int | None = None) -> ThreadBudget:
    """The budget applied at configure time, or (without :class:`ThreadBudgetPlugin`) the option's own,
    whose XLA part says it was not applied."""
    found = config.stash.get(budget_key, None)
    if found is not None:
        return found
    return budget_for(threads, xla="not set (the thread-budget plugin is not registered)")
