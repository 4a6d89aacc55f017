"""``xla_timing_cpus``: the timed runs on chosen CPUs, every thread of the process pinned there while they run.

Why: the XLA side of a trace-once step runs on two threads at once (Python tracing of step i+1 beside XLA:CPU's
execution of step i), CPU eager on one; how a fresh process's two threads share a small machine's cores differs
between processes and moves the XLA side's step, far less on one CPU (docs/timing.md, "One CPU for the timed
runs"; ``benchmarks/process_noise.py``).

:func:`pinned` sets every thread's affinity (``/proc/self/task``; threads started meanwhile inherit it) for the
duration of the timed runs and puts each back after (a thread started meanwhile gets the main thread's former set).
The setting's list is read (as ``taskset -c`` reads one) and checked against the CPUs the process may use by
:func:`pytest_xla_dynamo.timing.settings.to_cpus`; Linux only (``os.sched_setaffinity``), elsewhere it is refused
there. No torch here.
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
