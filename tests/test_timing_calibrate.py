"""Calibrated runs and the speedup's noise (pure): timing.calibrate, timing.noise, and xla_min_run_time's
validation (issue 31). The real sessions are in test_gating_noise.py."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest
from test_config import resolve_timing, usage_error

from pytest_xla_dynamo import repro
from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.timing import calibrate, noise
from pytest_xla_dynamo.timing import options as timing_options


def test_step_estimate_takes_each_sides_lowest_then_the_faster_side() -> None:
    # baseline: prime 0.012 s, warm-up 0.010 s; backend: prime 0.030 s, warm-up 0.050 s (a compile in it)
    assert calibrate.step_estimate([0.012, 0.010], [0.030, 0.050]) == 0.010
    assert calibrate.step_estimate([None, 0.0], [0.2]) == 0.2  # unusable figures are ignored
    assert calibrate.step_estimate([None], [math.nan, -1.0]) is None
    assert calibrate.step_estimate() is None


@pytest.mark.parametrize(("requested", "min_run_time", "step", "expected"), [
    (1, 0.2, 0.005, 40),  # BERT inference: 5 ms steps, 40 per run
    (1, 0.2, 0.05, 4),  # exactly 4 steps (not 5 by a rounding error)
    (1, 0.2, 0.07, 3),
    (1, 0.2, 0.5, 1),  # vgg16: one step lasts longer than the minimum
    (10, 0.2, 0.005, 40),
    (50, 0.2, 0.005, 50),  # the requested count is a floor
    (1, 0.0, 0.005, 1),  # 0: calibration off
    (3, 0.2, None, 3),  # no estimate: as asked
    (3, 0.2, 0.0, 3),
    (1, 60.0, 1e-9, calibrate.MAX_CALIBRATED),  # the guard against an estimate of nothing
    (200_000, 60.0, 1e-9, 200_000),  # ... which never lowers the requested count
])
def test_calibrated_iterations(requested: int, min_run_time: float, step: float | None, expected: int) -> None:
    assert calibrate.calibrated_iterations(requested, min_run_time, step) == expected


def test_run_speedups_pair_the_interleaved_runs() -> None:
    assert noise.run_speedups([2.0, 3.0, 4.0], [1.0, 2.0, 0.0]) == [2.0, 1.5]  # a zero run is left out


def test_noise_is_none_below_three_runs_and_zero_for_identical_ones() -> None:
    assert noise.speedup_noise([1.0, 1.1], [2.0, 2.0]) is None
    assert noise.speedup_noise([1.0] * 5, [2.0] * 5) == 0.0


def test_noise_formula_at_five_runs() -> None:
    ratios = [1.00, 1.02, 0.98, 1.05, 0.90]
    got = noise.speedup_noise(ratios, [1.0] * 5)
    mid = statistics.median(ratios)
    mad = statistics.median(abs(r - mid) for r in ratios)  # 0.02
    assert mad == pytest.approx(0.02)
    assert got == pytest.approx(1.2533 * 1.4826 * 1.206 * mad / math.sqrt(5) / mid)
    assert got == pytest.approx(0.0200, abs=2e-4)  # about 2% of the speedup


def test_noise_is_robust_to_one_disturbed_run_of_five() -> None:
    """One run of five disturbed (the backend's run took twice as long): the range jumps, the noise barely moves."""
    base, backend = [10.0, 10.2, 9.9, 10.1, 10.0], [5.0, 5.1, 4.95, 5.0, 5.05]
    quiet = noise.speedup_noise(base, backend)
    disturbed = [*backend[:4], 10.1]
    noisy = noise.speedup_noise(base, disturbed)
    assert quiet is not None and noisy is not None
    assert noisy < 2 * quiet + 0.005
    ratios = noise.run_speedups(base, disturbed)
    assert (max(ratios) - min(ratios)) / statistics.median(ratios) > 0.45  # the spread would say 50%


def test_noise_scales_with_the_runs_and_not_with_the_speedup() -> None:
    ratios = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.1, 0.9, 1.05, 0.95]
    five, ten = noise.speedup_noise(ratios[:5], [1.0] * 5), noise.speedup_noise(ratios, [1.0] * 10)
    assert five is not None and ten is not None and ten < five
    assert noise.speedup_noise([3 * r for r in ratios[:5]], [1.0] * 5) == pytest.approx(five)


def test_noise_fields_for_the_record() -> None:
    fields: dict[str, Any] = noise.noise_fields([2.0, 2.2, 1.8], [1.0, 1.0, 1.0])
    assert fields["run_speedups"] == [2.0, 2.2, 1.8]
    assert fields["speedup_noise"] == pytest.approx(1.2533 * 1.4826 * 1.495 * 0.2 / math.sqrt(3) / 2.0, abs=1e-5)
    assert fields["speedup_noise_statistic"] == noise.STATISTIC
    assert noise.noise_fields([1.0], [1.0])["speedup_noise"] is None


# --- the option ----------------------------------------------------------------------------------------


def test_min_run_time_default_values_and_repro() -> None:
    assert resolve_timing().min_run_time == timing_options.DEFAULT_MIN_RUN_TIME == 0.2
    assert resolve_timing(ini={"xla_min_run_time": "0"}).min_run_time == 0.0
    assert resolve_timing(ini={"xla_min_run_time": " 1.5 "}).min_run_time == 1.5
    assert resolve_timing(ini={"xla_min_run_time": "60"}).min_run_time == 60.0
    assert resolve_timing(env={"PYTEST_XLA_MIN_RUN_TIME": "0.5"}).min_run_time == 0.5
    # the repro names it where it is not the default
    assert "xla_min_run_time" not in repro.repro_command("t.py::x", XlaConfig(), "trace_once",
                                                         timing=resolve_timing().repro_args())
    assert "-o xla_min_run_time=0 " in repro.repro_command(
        "t.py::x", XlaConfig(), "trace_once", timing=resolve_timing(ini={"xla_min_run_time": "0"}).repro_args())


@pytest.mark.parametrize("bad", ["-1", "-0.1", "60.5", "abc", "", "inf", "nan", "1e400", "0.2s"])
def test_min_run_time_bad_values_are_usage_errors(bad: str) -> None:
    assert usage_error(env={"PYTEST_XLA_MIN_RUN_TIME": bad}) == (
        f"xla_min_run_time (env PYTEST_XLA_MIN_RUN_TIME): invalid value {bad!r}; valid: a number of seconds 0..60 "
        "(0: off, runs of exactly --xla-iterations-per-run)")


def test_min_run_time_bad_env_value_names_the_variable() -> None:
    assert usage_error(env={"PYTEST_XLA_MIN_RUN_TIME": "-3"}).startswith(
        "xla_min_run_time (env PYTEST_XLA_MIN_RUN_TIME): invalid value '-3'")
