"""The thread budget of timing: one number of compute threads for the baseline and the backend alike.

``xla_threads N`` (ini ``xla_threads``, env ``PYTEST_XLA_THREADS``; an integer >= 1 or ``auto``) sets

* torch's intra-op threads (``torch.set_num_threads``: CPU eager's OpenMP pool), before a case is
  warmed up and timed (:func:`apply_torch_threads`), and
* XLA:CPU's: ``PJRT_NPROC``, which the PJRT CPU client reads when the runtime starts (XLA's
  ``DefaultThreadPoolSize``, the size of its dispatch and Eigen pools). It must be set before the runtime
  is up: :class:`~pytest_xla_dynamo.timing.plugin.ThreadBudgetPlugin` sets it once collection has
  selected a timing test (before any test runs) and puts the environment back at ``pytest_unconfigure``;
  sessions without timing tests keep XLA:CPU's default threads.

Checked on torch_xla 2.9 with ``PJRT_DEVICE=CPU`` (per-thread CPU ticks of a loop of 1024x1024 matmuls):
``PJRT_NPROC=1`` keeps XLA:CPU's work on one thread, ``2`` (the default on 2 cores) spreads it on two;
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` changes nothing (two threads stay busy), and
``--intra_op_parallelism_threads`` is no XLA flag (the process aborts: "Unknown flag in XLA_FLAGS").
So only ``PJRT_NPROC`` is set. On other PJRT devices the budget is torch's only.

``auto``: :func:`auto_threads`. No torch at import time.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import asdict, dataclass
from typing import Any

from pytest_xla_dynamo.core import devices
from pytest_xla_dynamo.core.machine import available_cores

AUTO = "auto"
XLA_THREADS_ENV = "PJRT_NPROC"  # read by the PJRT CPU client when the runtime starts
AUTO_ONE_THREAD_MAX_CORES = 2
"""``auto`` gives 1 thread on a machine with this many cores or fewer: there CPU eager with two OpenMP threads
slows several-fold beside one busy process, while one thread is as fast when quiet (``benchmarks/thread_budget.py``,
``benchmarks/README.md``)."""


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


def set_xla_threads(threads: int, environ: MutableMapping[str, str] | None = None,
                    runtime_up: bool | None = None) -> str:
    """Set XLA:CPU's threads through ``PJRT_NPROC`` (before the runtime starts); returns what was done."""
    env = os.environ if environ is None else environ
    device = env.get("PJRT_DEVICE", "CPU").strip().upper() or "CPU"
    if device != "CPU":
        return f"not set: PJRT_DEVICE={device} (the budget applies to torch's CPU threads only)"
    up = devices.runtime_up() if runtime_up is None else runtime_up
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


def budget_environment(threads: int | None) -> dict[str, Any]:
    """The budget for a report's environment (no torch, no config): the option's value resolved, and
    ``PJRT_NPROC`` as this process has it (set by :class:`ThreadBudgetPlugin` until unconfigure)."""
    budget = budget_for(threads)
    return {"threads": budget.threads, "choice": budget.choice, "cores": budget.cores,
            XLA_THREADS_ENV: os.environ.get(XLA_THREADS_ENV)}
