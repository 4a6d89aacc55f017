"""Interference detection (pure): was a case's timing disturbed by other work on the machine?

Every timed run records its wall time and the process's CPU time (``time.process_time``: every thread
of the process, XLA:CPU's included), and the machine's 1-minute load average is read before and after
the runs; the machine's busy CPU time (all processes) is read around each run too. Four rules read them
(their thresholds are the named constants below):

* **others**: other processes took more than :data:`FOREIGN_CORES` cores on average during a side's runs
  ("other processes used 0.98 cores during the baseline's runs"): measured, not lagging like the load;
* **load**: the load average above the cores by more than :data:`LOAD_MARGIN` ("load 3.1 on 2 cores");
* **starved**: a host-bound side (CPU eager; XLA on ``PJRT_DEVICE=CPU``) whose median CPU/wall is below
  :data:`CPU_WALL_FLOOR` ("baseline CPU/wall 0.31 with 2 threads"): it waited for a core;
* **uneven**: half or more of a side's runs both slower than its fastest by :data:`SLOW_FACTOR` and
  less on the CPU than its best by :data:`STARVED_FACTOR` (the median itself is such a run).

A disturbed case is measured again, at most ``xla_remeasure`` times (:mod:`~pytest_xla_dynamo.timing.in_process`);
still disturbed, its record is ``unreliable`` with the reasons. The rules detect interference; they do not prove
its absence (an accelerator's runs, not host-bound, are judged by the load alone). No torch here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

FOREIGN_CORES = 0.25
"""How much CPU other processes may take during the timed runs (in cores, on average over a side's runs)
before the figure is distrusted. Measured per run as the machine's busy CPU time (``/proc/stat``) minus
this process's; a quiet machine leaves a few hundredths of a core to the system. The load average alone is
not enough: it lags, and a busy loop beside a 1-thread budget can slow the XLA side a great deal while the load
stays under cores + margin (docs/timing.md, "Robustness: one competing process")."""

LOAD_MARGIN = 1.0
"""How far the 1-minute load average may exceed the cores before the machine counts as busy. The timed
process itself adds about one runnable thread beyond its budget (XLA:CPU's dispatch beside Python), and
the load lags by about a minute, and a quiet 2-core machine shows loads up to about 2.4 under the timing suite
(docs/timing.md). A busy loop competing with a 1-thread budget leaves the timed thread a core, so a
load between the cores and cores + margin alone is no reason to distrust a figure.

Not applied under the machine lock of several pytest-xdist workers (``reasons(shared=True)``), where the
other processes' cores are measured: the other workers are stopped by the lock, but the load average still
carries their work of the last minute, and quiet runs would be flagged by the lag alone (docs/timing.md, "Under
pytest-xdist: the machine lock")."""

CPU_WALL_FLOOR = 0.8
"""A host-bound run keeps at least one thread on a core all along (compute, tracing or XLA:CPU's
execution), so its CPU/wall is about 1 or more. Below this floor it waited for a core 20% of the time
or more. Not applied to runs whose work is on an accelerator (the host waits for it, legitimately)."""

SLOW_FACTOR = 1.15
"""A run is *slow* when its wall time exceeds the side's fastest run by this factor."""

STARVED_FACTOR = 0.85
"""A run is *starved* when its CPU/wall is below the side's best run's by this factor: slow and starved
together mean the run lost its cores (with several threads, OpenMP's spinning keeps CPU/wall above the
floor while the threads wait for each other, so only the comparison between runs shows it)."""


@dataclass(frozen=True)
class Runs:
    """One side's timed runs: ``label`` ("baseline", "backend"), wall and CPU seconds per run."""

    label: str
    wall: tuple[float, ...]
    cpu: tuple[float, ...]
    host_bound: bool = True  # its work runs on this host's cores (CPU eager, XLA:CPU)
    machine: tuple[float | None, ...] = ()  # the machine's busy CPU seconds per run (all processes)

    @property
    def foreign_cores(self) -> float | None:
        """The cores other processes took during the runs, on average (None where it was not measured)."""
        pairs = [(m - c, w) for m, c, w in zip(self.machine, self.cpu, self.wall, strict=False)
                 if m is not None and w > 0]
        if not pairs:
            return None
        return max(0.0, sum(o for o, _ in pairs) / sum(w for _, w in pairs))

    @property
    def ratios(self) -> list[float]:
        """CPU/wall of each run (runs without a positive wall time left out)."""
        return [c / w for c, w in zip(self.cpu, self.wall, strict=True) if w > 0]

    @property
    def cpu_wall(self) -> float | None:
        """The median CPU/wall of the runs (None without runs)."""
        ratios = self.ratios
        return float(statistics.median(ratios)) if ratios else None


def foreign_rule(runs: Runs) -> str | None:
    """``other processes used N cores during the <side>'s runs`` above :data:`FOREIGN_CORES`."""
    cores = runs.foreign_cores
    if cores is None or cores <= FOREIGN_CORES:
        return None
    return f"other processes used {cores:.2f} cores during the {runs.label}'s runs"


def load_rule(load: float | None, cores: int) -> str | None:
    """``load N on C cores`` when the load average exceeds ``cores + LOAD_MARGIN``."""
    if load is None or not math.isfinite(load) or load <= cores + LOAD_MARGIN:
        return None
    return f"load {load:.1f} on {cores} core{'s' if cores != 1 else ''}"


def starved_rule(runs: Runs, threads: int) -> str | None:
    """``<side> CPU/wall R with N threads`` when a host-bound side's median CPU/wall is below the floor."""
    ratio = runs.cpu_wall
    if not runs.host_bound or ratio is None or ratio >= CPU_WALL_FLOOR:
        return None
    return f"{runs.label} CPU/wall {ratio:.2f} with {threads} thread{'s' if threads != 1 else ''}"


def uneven_rule(runs: Runs) -> str | None:
    """``<side>: k of n runs slower with less CPU ...`` when half or more of the runs are slow and starved."""
    pairs = [(w, c / w) for c, w in zip(runs.cpu, runs.wall, strict=True) if w > 0]
    if len(pairs) < 2 or not runs.host_bound:
        return None
    fastest = min(w for w, _ in pairs)
    best = max(r for _, r in pairs)
    hit = [r for w, r in pairs if w > fastest * SLOW_FACTOR and r < best * STARVED_FACTOR]
    if len(hit) * 2 < len(pairs):
        return None
    return (f"{runs.label}: {len(hit)} of {len(pairs)} runs slower with less CPU "
            f"(CPU/wall {statistics.median(hit):.2f} vs {best:.2f})")


def reasons(sides: Sequence[Runs], *, load: float | None, cores: int, threads: int,
            shared: bool = False) -> list[str]:
    """Why the timing of ``sides`` cannot be trusted (empty: no rule fired). ``shared``: measured under the
    machine lock of several xdist workers, where the load average still carries the other workers' work from
    before the lock stopped them (it lags by a minute): there the load rule is left to the measured ones, when
    every side measured the other processes' cores (see :data:`LOAD_MARGIN`)."""
    measured = all(runs.foreign_cores is not None for runs in sides)
    found = [None if shared and measured else load_rule(load, cores)]
    for runs in sides:
        found += [foreign_rule(runs), starved_rule(runs, threads), uneven_rule(runs)]
    return [r for r in found if r]
