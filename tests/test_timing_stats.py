"""Tests of pytest_xla_dynamo.timing.stats: the arithmetic, on hand-made numbers, in process, no torch."""

from __future__ import annotations

import math

import pytest

from pytest_xla_dynamo.timing import stats as timing
from pytest_xla_dynamo.timing.stats import SPEEDUP_STATISTIC


def test_median_and_spread() -> None:
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    assert timing.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert timing.spread([1.0, 2.0, 4.0]) == pytest.approx(1.5)  # (4 - 1) / 2
    assert timing.spread([0.5, 0.5]) == 0.0
    assert math.isnan(timing.spread([0.0, 0.0]))
    with pytest.raises(ValueError, match="no values"):
        timing.median([])


def test_per_iteration_and_speedup() -> None:
    assert timing.per_iteration([0.2, 0.6], 2) == pytest.approx([0.1, 0.3])
    with pytest.raises(ValueError, match="iterations_per_run"):
        timing.per_iteration([0.2], 0)
    # medians 0.3 and 0.1: the backend is three times faster than the baseline
    assert timing.speedup([0.2, 0.3, 0.9], [0.1, 0.05, 0.4]) == pytest.approx(3.0)


def test_compilation_latency_is_first_call_minus_first_call() -> None:
    assert timing.compilation_latency([12.5, 0.4], [0.25, 0.05]) == pytest.approx(12.25)
    with pytest.raises(ValueError, match="first warm-up step"):
        timing.compilation_latency([], [0.1])


def test_figures_from_runs() -> None:
    # 4 iterations per run; per iteration: backend 0.05, 0.1, 0.0625; baseline 0.25, 0.2, 0.3
    figures = timing.Figures.from_runs([0.2, 0.4, 0.25], [1.0, 0.8, 1.2], 4)
    assert figures.backend == pytest.approx((0.05, 0.1, 0.0625))
    assert figures.abs_latency_ms == pytest.approx(62.5)
    assert figures.baseline_latency_ms == pytest.approx(250.0)
    assert figures.speedup == pytest.approx(4.0)
    assert figures.spread == pytest.approx((0.1 - 0.05) / 0.0625)
    assert figures.baseline_spread == pytest.approx(0.4)


def test_minimum_is_reported_beside_the_median_and_the_speedup_uses_the_median() -> None:
    figures = timing.Figures.from_runs([0.2, 0.4, 0.3], [1.0, 0.8, 1.2], 4)
    assert figures.backend_min_ms == pytest.approx(50.0)
    assert figures.baseline_min_ms == pytest.approx(200.0)
    # the speedup is the medians' ratio (250 / 75), not the minima's (200 / 50)
    assert figures.speedup == pytest.approx(250 / 75)
    assert SPEEDUP_STATISTIC == "median"
    assert figures.speedup == pytest.approx(figures.baseline_latency_ms / figures.abs_latency_ms)
    assert figures.speedup != pytest.approx(figures.baseline_min_ms / figures.backend_min_ms)
