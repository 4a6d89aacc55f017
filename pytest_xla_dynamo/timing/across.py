"""The process median (pure): one timing case measured in several fresh processes, their records combined.

Why: on a small VM CPU eager's step moves 20-30% between processes while it moves 6-15% within one
(``benchmarks/cpu_drift.py``, docs/timing.md), so a speedup measured in one process carries a shift that no
number of runs inside it averages away, and the within-process noise (:mod:`~pytest_xla_dynamo.timing.noise`)
does not see it. With ``--xla-timing-processes N`` (N > 1) each timing test is measured in N fresh processes, one
after the other (each a child ``pytest <the test>``, started as isolated tests are:
:mod:`~pytest_xla_dynamo.workers.isolation`; each compiles its case again), and its record is their combination:

* the speedup is the median of the processes' speedups (N odd: one process's figure), the latencies and the
  spread the medians of theirs; the other figures are those of the process whose speedup is the median (the
  lower middle one for an even count);
* the noise the gate reads (``speedup_noise``) is the relative standard error of that median from the spread
  *between* the processes (:func:`~pytest_xla_dynamo.timing.noise.median_noise` over the process speedups, N >= 3),
  and never less than the processes' own noise / sqrt(N): the process-to-process shift is now in it;
* the median is taken over the processes that measured undisturbed, when they are a majority; otherwise over all,
  and the case is ``unreliable`` with the disturbed processes' reasons;
* ``process_speedups`` (every process's speedup, in order) and ``timing_processes`` say how it was reached.

No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord
from pytest_xla_dynamo.timing.noise import median_noise
from pytest_xla_dynamo.timing.stats import median

STATISTIC = ("max(1.2533 * 1.4826 * c_N * MAD(process speedups) / sqrt(N) / median(process speedups), "
             "median(the processes' own speedup noise) / sqrt(N))")


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def _reasons(record: CaseRecord) -> list[str]:
    """Why a process's record is unreliable: its last attempt's reasons (else its message)."""
    stats = record.timing_stats
    return list(stats.interference.reasons) if stats is not None and stats.interference.reasons else [record.message]


def combined_noise(speedups: Sequence[float], own: Sequence[float | None]) -> float | None:
    """The noise of the median of ``speedups`` (one per process) whose own noises are ``own`` (see the module
    docstring); None when neither figure exists."""
    between = median_noise(speedups)
    within = _median(own)
    floor = None if within is None else within / math.sqrt(len(speedups))
    present = [v for v in (between, floor) if v is not None]
    return round(max(present), 5) if present else None


def combine(records: Sequence[CaseRecord], processes: int) -> CaseRecord:
    """One record of a case from its ``processes`` processes' ``records`` (at least one). Records without a speedup
    (``not_measured``) give the first record unchanged."""
    if not records:
        raise ValueError("combine() needs at least one record")
    measured = [r for r in records if r.speedup is not None and r.timing is not None and r.timing.stats is not None]
    if not measured:
        return records[0]
    trusted = [r for r in measured if r.status != UNRELIABLE]
    enough = len(trusted) > processes // 2
    used = trusted if enough else measured
    speedups = [float(r.speedup) for r in used if r.speedup is not None]
    middle = sorted(used, key=lambda r: float(r.speedup or 0.0))[(len(used) - 1) // 2]
    assert middle.timing is not None and middle.timing.stats is not None
    own = [r.timing.stats.speedup_noise for r in used if r.timing is not None and r.timing.stats is not None]
    stats = replace(middle.timing.stats, speedup_noise=combined_noise(speedups, own),
                    speedup_noise_statistic=STATISTIC, timing_processes=processes,
                    process_speedups=[round(float(r.speedup or 0.0), 5) for r in measured])
    if enough:
        status, message = "pass", ""
    else:
        status = UNRELIABLE
        message = (f"timing unreliable: {len(trusted)} of {processes} processes measured undisturbed (a majority is "
                   f"needed; the median is over all {len(measured)}): " + "; ".join(
                       f"process {i}: {', '.join(_reasons(r))}" for i, r in enumerate(measured, 1)
                       if r.status == UNRELIABLE))
    return replace(middle, status=status, message=message, speedup=round(median(speedups), 5),
                   abs_latency=_median([r.abs_latency for r in used]),
                   baseline_latency=_median([r.baseline_latency for r in used]),
                   spread=_median([r.spread for r in used]), timing=replace(middle.timing, stats=stats))
