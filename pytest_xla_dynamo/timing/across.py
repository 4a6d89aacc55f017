"""The process median (pure): one timing case measured in several fresh processes, their records combined.

Why: on a small machine CPU eager's step moves more between processes than within one (docs/timing.md, "The
process median"; ``benchmarks/cpu_drift.py``), so a speedup measured in one process carries a shift that no
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

With ``--xla-timing-base-python`` (the A/B gate) the N processes are N *pairs*, one of the base build and one of
this build each, one after the other (:func:`pair`): the record adds the base's combination and the ratio within
each pair, whose median the gate judges (drift of the machine slower than a pair cancels in it).

No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_xla_dynamo.core.machine import cpu_list
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


def _own_noise(record: CaseRecord) -> float | None:
    stats = record.timing_stats
    return stats.speedup_noise if stats is not None else None


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
    own = [_own_noise(r) for r in used]
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


def _cpu_text(found: set[tuple[int, ...]]) -> str:
    return " / ".join(cpu_list(cpus) or "none (not pinned)" for cpus in sorted(found))


def pair(candidate: Sequence[CaseRecord], base: Sequence[CaseRecord], processes: int) -> CaseRecord:
    """The A/B record of a case measured in ``processes`` pairs of processes (``--xla-timing-base-python``): this
    build's processes (``candidate``) and the base build's (``base``), pair i measured one after the other.

    The record is this build's :func:`combine`, with the base build's combination beside it (``base_speedup``,
    ``base_process_speedups``) and the gated figure: the median over the pairs of candidate i / base i
    (``pair_ratio``; drift of the machine slower than a pair falls on both alike and cancels) and its noise
    (``pair_noise``, :func:`combined_noise` of the pair ratios, N >= 3). A pair counts where both processes measured;
    the median is over the pairs measured undisturbed when they are a majority, else over all and the record is
    ``unreliable``, as is one whose either side's combination is, or whose two builds' timed runs were pinned to
    different CPUs (``xla_timing_cpus``: a base build older than the option pins nothing)."""
    record, base_record = combine(candidate, processes), combine(base, processes)
    # (candidate, base, candidate / base) of every pair whose both processes measured
    pairs = [(c, b, float(c.speedup) / float(b.speedup)) for c, b in zip(candidate, base, strict=False)
             if c.speedup and b.speedup]
    if record.timing is None or record.timing.stats is None or not pairs:
        return record
    trusted = [p for p in pairs if p[0].status != UNRELIABLE and p[1].status != UNRELIABLE]
    enough = len(trusted) > processes // 2
    used = trusted if enough else pairs
    own = [math.hypot(x, y) if x is not None and y is not None else None
           for x, y in ((_own_noise(c), _own_noise(b)) for c, b, _ in used)]
    ratios = [ratio for _, _, ratio in used]
    stats = replace(record.timing.stats, pair_ratio=round(median(ratios), 5), pair_noise=combined_noise(ratios, own),
                    pair_ratios=[round(ratio, 5) for _, _, ratio in pairs],
                    base_process_speedups=[round(float(b.speedup or 0.0), 5) for b in base],
                    base_speedup=base_record.speedup)
    status, message = record.status, record.message
    if base_record.status == UNRELIABLE:
        status, message = UNRELIABLE, f"the base build's {base_record.message}"
    cpus, base_cpus = ({r.pinned_cpus for r in side if r.speedup} for side in (candidate, base))
    if cpus != base_cpus:
        status, message = UNRELIABLE, (
            f"timing unreliable: the base build's timed runs ran on CPUs {_cpu_text(base_cpus)}, this build's on "
            f"{_cpu_text(cpus)} (xla_timing_cpus): not comparable (a base build older than the option ignores "
            "PYTEST_XLA_TIMING_CPUS and the ini key, and refuses the command-line option)")
    if not enough:
        status = UNRELIABLE
        message = (f"timing unreliable: {len(trusted)} of {processes} pairs measured undisturbed on both sides (a "
                   "majority is needed)" + (f"; {message}" if message else ""))
    return replace(record, status=status, message=message, timing=replace(record.timing, stats=stats))
