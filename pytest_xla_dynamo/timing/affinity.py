"""``xla_timing_cpus``: the timed runs on chosen CPUs, every thread of the process pinned there while they run.

Why (issue 31, ``benchmarks/process_noise.py``, docs/timing.md "One CPU for the timed runs"): the XLA side of a
trace-once step runs on two threads at once, Python tracing (and dynamo's guards) of step i+1 beside XLA:CPU's
execution of step i (CPU / wall 1.34 for BERT_pytorch's training step on the 2-core VM), while CPU eager runs on
one. How a fresh process's two threads come to share the VM's two vCPUs differs from process to process, so the
XLA side's step moved 9.7-15.1 ms between twelve processes (eager's 5.7-6.2 ms); with the process on one CPU it
moved 10.7-12.4 ms and the speedup's spread between processes (its MAD) fell from 6.4% to 1.9%.

:func:`pinned` sets every thread's affinity (``/proc/self/task``; threads started meanwhile inherit it) for the
duration of the timed runs and puts each back after (a thread started meanwhile gets the main thread's former set).
The option's list is read (as ``taskset -c`` reads one) and checked against the CPUs the process may use by
:func:`pytest_xla_dynamo.config.to_cpus`; Linux only (``os.sched_setaffinity``), elsewhere it is refused there. No
torch here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from pytest_xla_dynamo.core.machine import usable_cpus


def current() -> tuple[int, ...]:
    """The CPUs the calling thread may run on now, sorted (empty where the platform does not say)."""
    return tuple(sorted(usable_cpus()))


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return []


@contextlib.contextmanager
def pinned(cpus: tuple[int, ...]) -> Iterator[None]:
    """Every thread of this process on ``cpus`` inside the block (nothing done for ``()``), as before after it."""
    if not cpus:
        yield
        return
    main = os.sched_getaffinity(0)
    before: dict[int, set[int]] = {}
    for tid in _threads():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
    try:
        yield
    finally:
        for tid in _threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, before.get(tid, main))
