"""The speedup's own noise (pure): how far the median speedup of R interleaved runs may move by chance.

The statistic: the per-run speedups s_i = baseline run i / backend run i (the two runs of a pair are
adjacent in time, so drift shared by them cancels), their median absolute deviation (MAD) scaled to a
normal standard deviation (x 1.4826, and the small-sample factor of Croux & Rousseeuw 1992 for R < 10),
then to the standard error of a median of R runs (x 1.2533 / sqrt(R)), relative to the median speedup:

    noise = 1.2533 x 1.4826 x c_R x MAD(s) / sqrt(R) / median(s)

Why the MAD and not the range ((max - min) / median, the record's ``spread``) or a standard deviation: on
this machine one run of five is often disturbed (a preempted thread, a page-fault storm); the range and
the standard deviation take that run at full weight, the MAD ignores up to two of five such runs (its
breakdown point is 50%). A bootstrap interval has too few distinct resamples at R = 5 to mean much, and
is random. The price: at R = 5 the MAD is itself uncertain (about +-50%), so the gate multiplies it by a
margin (``gating.rules.NOISE_Z``) and needs R >= :data:`MIN_RUNS`. It measures the noise *within* one
process; a shift of the whole process (the eager baseline's median moves between processes: docs/timing.md, "Limits") is
not in it: :func:`value_noise` over the speedups of several processes (``--xla-timing-processes``) measures that,
and the gate reads it from such a baseline (``gating.noise.between_noise``). No torch here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

MIN_RUNS = 3  # fewer paired runs give no noise figure (the gate then uses the plain ratio)
MAD_TO_SD = 1.4826  # a normal distribution's standard deviation per MAD
SE_OF_MEDIAN = 1.2533  # sqrt(pi / 2): a median's standard error per standard error of a mean
#: Croux & Rousseeuw's small-sample factors of the MAD (unbiased for normal samples of n values); n / (n - 0.8)
#: from n = 10 on
SMALL_SAMPLE = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}
STATISTIC = "1.2533 * 1.4826 * c_R * MAD(per-run speedups) / sqrt(R) / median(per-run speedups)"


def run_speedups(baseline_runs: Sequence[float], backend_runs: Sequence[float]) -> list[float]:
    """Baseline run i / backend run i for every pair with a positive backend run."""
    return [b / x for b, x in zip(baseline_runs, backend_runs, strict=False) if x > 0 and b > 0]


def value_noise(values: Sequence[float]) -> float | None:
    """The relative standard deviation of *one* of ``values`` (positive figures), from their MAD: how far a single
    figure may stray (1.4826 x c_n x MAD / median); None with fewer than :data:`MIN_RUNS` values."""
    n = len(values)
    if n < MIN_RUNS:
        return None
    mid = statistics.median(values)
    mad = statistics.median(abs(v - mid) for v in values)
    return MAD_TO_SD * SMALL_SAMPLE.get(n, n / (n - 0.8)) * mad / mid


def median_noise(values: Sequence[float]) -> float | None:
    """The relative standard error of the median of ``values`` (positive figures), from their MAD (see the module
    docstring); None with fewer than :data:`MIN_RUNS` values."""
    one = value_noise(values)
    return None if one is None else SE_OF_MEDIAN * one / math.sqrt(len(values))


def speedup_noise(baseline_runs: Sequence[float], backend_runs: Sequence[float]) -> float | None:
    """The relative standard error of the median speedup (see the module docstring); None with fewer
    than :data:`MIN_RUNS` pairs."""
    return median_noise(run_speedups(baseline_runs, backend_runs))


def noise_fields(baseline_runs: Sequence[float], backend_runs: Sequence[float]) -> dict[str, Any]:
    """The timing record's noise figures (the last three of :class:`~pytest_xla_dynamo.records.TimingStats`): the
    noise, how it was computed, the per-run speedups."""
    noise = speedup_noise(baseline_runs, backend_runs)
    return {"speedup_noise": None if noise is None else round(noise, 5), "speedup_noise_statistic": STATISTIC,
            "run_speedups": [round(s, 5) for s in run_speedups(baseline_runs, backend_runs)]}
