"""Tests of pytest_xla_dynamo.timing.interference: the rules on hand-made run data (pure, no torch)."""

from __future__ import annotations

import inspect
import math
import re

import pytest

from pytest_xla_dynamo.timing import interference
from pytest_xla_dynamo.timing.interference import (
    CPU_WALL_FLOOR,
    FOREIGN_CORES,
    LOAD_MARGIN,
    SLOW_FACTOR,
    STARVED_FACTOR,
    Runs,
    foreign_rule,
    load_rule,
    reasons,
    starved_rule,
    uneven_rule,
)


def runs(label: str, wall: list[float], ratios: list[float], host_bound: bool = True) -> Runs:
    """Runs whose CPU seconds are ``ratio`` x wall, run by run."""
    return Runs(label, tuple(wall), tuple(w * r for w, r in zip(wall, ratios, strict=True)), host_bound)


QUIET_BASELINE = runs("baseline", [0.070, 0.071, 0.069, 0.072, 0.070], [1.0, 0.99, 1.0, 0.98, 1.0])
QUIET_BACKEND = runs("backend", [0.140, 0.150, 0.145, 0.139, 0.160], [1.1, 1.2, 1.15, 1.1, 1.05])


def test_the_thresholds_are_named_documented_data() -> None:
    assert LOAD_MARGIN > 0 and 0 < CPU_WALL_FLOOR < 1 and SLOW_FACTOR > 1 and 0 < STARVED_FACTOR < 1
    assert 0 < FOREIGN_CORES < 1
    source = inspect.getsource(interference)
    for name in ("FOREIGN_CORES", "LOAD_MARGIN", "CPU_WALL_FLOOR", "SLOW_FACTOR", "STARVED_FACTOR"):
        # each constant is followed by its docstring, and the module's docstring names it
        assert re.search(rf'^{name} = [^\n]+\n"""\S', source, re.MULTILINE), name
        assert name in (interference.__doc__ or ""), name


def test_quiet_runs_raise_nothing() -> None:
    assert reasons([QUIET_BASELINE, QUIET_BACKEND], load=1.4, cores=2, threads=1) == []
    assert QUIET_BASELINE.cpu_wall == pytest.approx(1.0)


@pytest.mark.parametrize(("load", "cores", "expected"), [
    (3.1, 2, "load 3.1 on 2 cores"),
    (3.0, 2, None),  # exactly cores + margin: not yet
    (2.9, 2, None),  # a busy loop beside a 1-thread run: the timed thread still has a core
    (1.6, 1, None),
    (2.5, 1, "load 2.5 on 1 core"),
    (None, 2, None),  # no load average on this platform
    (math.nan, 2, None),
])
def test_load_rule(load: float | None, cores: int, expected: str | None) -> None:
    assert load_rule(load, cores) == expected


def test_starved_rule_names_the_side_its_cpu_wall_and_the_threads() -> None:
    starved = runs("baseline", [1.22, 1.221, 1.219], [0.31, 0.31, 0.31])
    assert starved_rule(starved, 2) == "baseline CPU/wall 0.31 with 2 threads"
    assert starved_rule(starved, 1) == "baseline CPU/wall 0.31 with 1 thread"
    assert starved_rule(QUIET_BASELINE, 1) is None
    # on an accelerator the host waits for the device: a low CPU/wall says nothing
    assert starved_rule(runs("backend", [0.1, 0.1], [0.05, 0.05], host_bound=False), 1) is None


def test_a_consistently_slow_baseline_with_a_tiny_spread_is_caught() -> None:
    """Issue 14's case: eager at 1.22 s per ViT step instead of ~0.07 s, spread 0.003: the spread and
    the run-to-run comparison see nothing, the CPU/wall does."""
    slow = runs("baseline", [1.220, 1.222, 1.219, 1.221, 1.223], [0.4, 0.41, 0.4, 0.39, 0.4])
    assert uneven_rule(slow) is None
    assert reasons([slow, QUIET_BACKEND], load=1.9, cores=2, threads=2) == ["baseline CPU/wall 0.40 with 2 threads"]


def test_uneven_rule_fires_when_the_median_run_is_slow_and_starved() -> None:
    # two OpenMP threads; three of five runs lost a core: slower, and less CPU per wall second
    wall = [0.060, 0.061, 0.150, 0.160, 0.170]
    ratios = [1.9, 1.9, 1.3, 1.3, 1.2]
    hit = runs("baseline", wall, ratios)
    assert hit.cpu_wall == pytest.approx(1.3)  # above the floor: only the comparison shows it
    assert starved_rule(hit, 2) is None
    assert uneven_rule(hit) == "baseline: 3 of 5 runs slower with less CPU (CPU/wall 1.30 vs 1.90)"
    # two of five: the median is an undisturbed run, the figure stands
    assert uneven_rule(runs("baseline", [*wall[:3], 0.061, 0.062], [*ratios[:3], 1.9, 1.9])) is None
    # slower with the same CPU/wall (more work, not less CPU) or less CPU without being slower: no finding
    assert uneven_rule(runs("baseline", wall, [1.9] * 5)) is None
    assert uneven_rule(runs("baseline", [0.06] * 5, ratios)) is None
    # one run, or a side on an accelerator: nothing to compare
    assert uneven_rule(runs("baseline", [0.1], [0.5])) is None
    assert uneven_rule(runs("backend", wall, ratios, host_bound=False)) is None


def test_reasons_collects_every_rule_load_first() -> None:
    starved = runs("baseline", [1.2, 1.2, 1.2], [0.3, 0.3, 0.3])
    uneven = runs("backend", [0.1, 0.2, 0.2], [1.0, 0.7, 0.7])
    assert reasons([starved, uneven], load=4.0, cores=2, threads=1) == [
        "load 4.0 on 2 cores",
        "baseline CPU/wall 0.30 with 1 thread",
        "backend CPU/wall 0.70 with 1 thread",
        "backend: 2 of 3 runs slower with less CPU (CPU/wall 0.70 vs 1.00)",
    ]


def test_runs_without_wall_time_are_left_out() -> None:
    empty = Runs("baseline", (), ())
    assert empty.cpu_wall is None and empty.ratios == []
    assert starved_rule(empty, 1) is None and uneven_rule(empty) is None
    assert Runs("baseline", (0.0, 0.1), (0.0, 0.1)).ratios == [pytest.approx(1.0)]


def test_foreign_cores_other_processes_took_during_the_runs() -> None:
    # two runs of 0.1 s: the process took 0.1 s of CPU each, the machine 0.2 s: others took 1 core
    busy = Runs("baseline", (0.1, 0.1), (0.1, 0.1), True, (0.2, 0.2))
    assert busy.foreign_cores == pytest.approx(1.0)
    assert foreign_rule(busy) == "other processes used 1.00 cores during the baseline's runs"
    quiet = Runs("backend", (0.1, 0.1), (0.1, 0.12), True, (0.102, 0.125))
    assert quiet.foreign_cores == pytest.approx(0.035) and foreign_rule(quiet) is None
    # at the threshold: not flagged; just above: flagged; on any side, accelerator or not
    edge = Runs("backend", (1.0,), (1.0,), False, (1.0 + FOREIGN_CORES,))
    assert foreign_rule(edge) is None
    assert foreign_rule(Runs("backend", (1.0,), (1.0,), False, (1.3,))) is not None
    # not measured (another platform): no figure, no verdict; the process's own CPU above the machine's: 0
    assert Runs("baseline", (0.1,), (0.1,), True, (None,)).foreign_cores is None
    assert Runs("baseline", (0.1,), (0.1,)).foreign_cores is None
    assert Runs("baseline", (0.1,), (0.2,), True, (0.1,)).foreign_cores == 0.0
    assert reasons([busy, quiet], load=1.0, cores=2, threads=1) == [
        "other processes used 1.00 cores during the baseline's runs"]


def test_under_the_machine_lock_of_several_workers_the_measured_rules_replace_the_load() -> None:
    """The load average lags the other workers the lock stopped (mobilenet_v2 under -n 2: load 3.0, others
    0.00-0.07 cores): with the other processes measured, ``shared`` leaves the load rule out; not measured,
    the load still counts; the measured rules fire as ever."""
    quiet = Runs("baseline", (0.1, 0.1), (0.1, 0.1), True, (0.102, 0.101))
    busy = Runs("backend", (0.1, 0.1), (0.1, 0.1), True, (0.2, 0.2))
    assert reasons([quiet, quiet], load=3.2, cores=2, threads=1) == ["load 3.2 on 2 cores"]
    assert reasons([quiet, quiet], load=3.2, cores=2, threads=1, shared=True) == []
    assert reasons([quiet, busy], load=3.2, cores=2, threads=1, shared=True) == [
        "other processes used 1.00 cores during the backend's runs"]
    unmeasured = Runs("baseline", (0.1, 0.1), (0.1, 0.1))
    assert reasons([unmeasured, quiet], load=3.2, cores=2, threads=1, shared=True) == ["load 3.2 on 2 cores"]
