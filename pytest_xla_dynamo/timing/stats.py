"""Timing arithmetic (pure): per-iteration seconds, median, minimum, spread, speedup, compilation latency.

``speedup`` = median(baseline) / median(backend), pytorch's harness definition (the record says so:
:data:`SPEEDUP_STATISTIC`); the minimum and the ``spread`` = (max - min) / median are reported beside
the median; ``compilation_latency`` = the backend's first warm-up step minus the baseline's (first call
minus first call). No torch here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

SPEEDUP_STATISTIC = "median"  # the statistic of the runs that the speedup and the latencies use


def median(values: Sequence[float]) -> float:
    """The median (ValueError on no values)."""
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """(max - min) / median: 0 for identical runs; NaN when the median is not positive."""
    mid = median(values)
    if not mid > 0:
        return math.nan
    return (max(values) - min(values)) / mid


def per_iteration(run_seconds: Sequence[float], iterations_per_run: int) -> list[float]:
    """Seconds per iteration of each timed run."""
    if iterations_per_run < 1:
        raise ValueError(f"iterations_per_run must be >= 1, got {iterations_per_run}")
    return [s / iterations_per_run for s in run_seconds]


def speedup(baseline: Sequence[float], backend: Sequence[float]) -> float:
    """median(baseline) / median(backend), the harness's speedup."""
    return median(baseline) / median(backend)


def compilation_latency(backend_warmup: Sequence[float], baseline_warmup: Sequence[float]) -> float:
    """Seconds of the backend's first warm-up step minus the baseline's (first call minus first call)."""
    if not backend_warmup or not baseline_warmup:
        raise ValueError("compilation latency needs the first warm-up step of both cases")
    return float(backend_warmup[0]) - float(baseline_warmup[0])


@dataclass(frozen=True)
class Figures:
    """What the timed runs measured, per iteration (seconds), and the figures derived from them."""

    backend: tuple[float, ...]
    baseline: tuple[float, ...]

    @classmethod
    def from_runs(cls, backend_runs: Sequence[float], baseline_runs: Sequence[float],
                  iterations_per_run: int) -> Figures:
        return cls(tuple(per_iteration(backend_runs, iterations_per_run)),
                   tuple(per_iteration(baseline_runs, iterations_per_run)))

    @property
    def speedup(self) -> float:
        return speedup(self.baseline, self.backend)

    @property
    def abs_latency_ms(self) -> float:
        return median(self.backend) * 1000.0

    @property
    def baseline_latency_ms(self) -> float:
        return median(self.baseline) * 1000.0

    @property
    def backend_min_ms(self) -> float:
        return min(self.backend) * 1000.0

    @property
    def baseline_min_ms(self) -> float:
        return min(self.baseline) * 1000.0

    @property
    def spread(self) -> float:
        return spread(self.backend)

    @property
    def baseline_spread(self) -> float:
        return spread(self.baseline)
