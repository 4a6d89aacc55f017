"""Calibrated runs (pure): how many iterations a timed run needs to last ``xla_min_run_time`` seconds.

pytest-benchmark calibrates each function's rounds so that one lasts at least its ``--benchmark-min-time``;
here one count serves both sides of a case, so that the baseline's and the backend's runs do the same work:
iterations per run = max(``--xla-iterations-per-run``, ceil(min run time / step)), where *step* is the
faster side's step seconds, estimated from the untimed steps before the timed runs (each side's last
warm-up step and its prime step, the lower of the two: a compile that lands in one of them does not
shorten the runs). With the faster side's step every timed run, the slower side's too, lasts at least the
minimum. No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MAX_CALIBRATED = 100_000  # iterations per run: the guard against a step estimate of (almost) nothing


def step_estimate(*steps: Iterable[float | None]) -> float | None:
    """The faster side's step seconds: for each side the lowest of its untimed steps, then the lowest side.

    ``steps``: one iterable per side (its last warm-up step, its prime step; None and non-positive values
    ignored). None when no side has a usable figure."""
    per_side = []
    for side in steps:
        usable = [float(s) for s in side if s is not None and s > 0 and math.isfinite(s)]
        if usable:
            per_side.append(min(usable))
    return min(per_side) if per_side else None


def calibrated_iterations(requested: int, min_run_time: float, step_seconds: float | None) -> int:
    """max(``requested``, ceil(``min_run_time`` / ``step_seconds``)), at most :data:`MAX_CALIBRATED`
    (but never below ``requested``); ``requested`` when calibration is off (``min_run_time`` 0) or the step
    is unknown."""
    if min_run_time <= 0 or step_seconds is None or not step_seconds > 0:
        return requested
    needed = math.ceil(min_run_time / step_seconds - 1e-9)  # 0.2 / 0.05 is 4, not 5
    return max(requested, min(needed, MAX_CALIBRATED))
