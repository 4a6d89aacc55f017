"""Machine facts: the CPUs this process may use, CPU lists as ``taskset -c`` reads them, the kernel's transparent
huge page mode, a process's peak resident memory.

One place read by the options' checks (:mod:`pytest_xla_dynamo.config`), timing (the thread budget, pinning, huge
pages), the workers and the session. No torch, no pytest.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pytest_xla_dynamo.fileio import MAX_RANGE

THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")  # xla_placements=huge (timing.placement)


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on (empty where the platform does not say)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset()


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells, else the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on every platform
        return max(1, os.cpu_count() or 1)


def can_pin() -> bool:
    """Whether this platform can pin threads to CPUs (Linux's ``sched_setaffinity``, ``/proc/self/task``)."""
    return hasattr(os, "sched_setaffinity") and os.path.isdir("/proc/self/task")


def parse_cpus(value: str) -> tuple[int, ...]:
    """``"0-2,5"`` -> ``(0, 1, 2, 5)`` (sorted, each once), as ``taskset -c`` reads a list; ``""`` -> ``()``.
    ValueError on anything else, and on a CPU number from :data:`~pytest_xla_dynamo.fileio.MAX_RANGE` up (no
    machine numbers its CPUs so high; ``0-100000000`` is refused before it is expanded)."""
    cpus: set[int] = set()
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        first, last = int(low), int(high) if dash else int(low)
        if first < 0 or last < first:
            raise ValueError(f"bad range {part!r}")
        if last >= MAX_RANGE:  # bounded before the range is expanded
            raise ValueError(f"range {part!r} beyond CPU {MAX_RANGE - 1}")
        cpus.update(range(first, last + 1))
    if value.strip() and not cpus:
        raise ValueError("no CPU")
    return tuple(sorted(cpus))


def cpu_list(cpus: Iterable[int]) -> str:
    """``(0, 2)`` -> ``"0,2"``: a CPU list as ``xla_timing_cpus`` and ``taskset -c`` take it (:func:`parse_cpus`)."""
    return ",".join(map(str, cpus))


def thp_mode(path: Path = THP_SETTING) -> str | None:
    """The kernel's transparent huge page mode (``always``, ``madvise`` or ``never``; None where there is none:
    not Linux, or a kernel without THP)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def process_peak_kb() -> int:
    """This process's peak resident memory in kB, or its waited-for children's where larger (an isolated
    test's child): ``ru_maxrss``, what GNU time reports."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return max(own.ru_maxrss, children.ru_maxrss)
