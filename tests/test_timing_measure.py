"""Tests of pytest_xla_dynamo.timing.measure: the interleaving, and wall and CPU time per run with the load
around the runs, on stand-in cases (in process; ``measure`` reads dynamo's counters, so it imports torch)."""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_xla_dynamo.timing import measure as timing
from pytest_xla_dynamo.timing.measure import Measurement, RunTime

# the module (``timing.measure`` is also the name of its function, which the package exports)
measure_module = importlib.import_module("pytest_xla_dynamo.timing.measure")


class FakeBackend:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def sync(self) -> None:
        self.log.append(f"{self.name} sync")

    def wait(self) -> None:
        self.log.append(f"{self.name} wait")


class FakeClock:
    """Wall and process-CPU clocks that advance only when a stand-in step says so: CPU/wall ratios that
    do not depend on what else runs on the machine."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def perf_counter(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.cpu


class FakeCase:
    """A prepared case whose step burns the CPU (``busy``) or sleeps for ``seconds``: for real, or on a
    :class:`FakeClock` when one is given."""

    def __init__(self, log: list[str], name: str, seconds: float, busy: bool, clock: FakeClock | None = None) -> None:
        self.log, self.name, self.seconds, self.busy, self.clock = log, name, seconds, busy, clock
        self.backend = FakeBackend(log, name)

    def reset(self) -> None:
        self.log.append(f"{self.name} reset")

    def drop_grads(self) -> None:
        self.log.append(f"{self.name} drop_grads")

    def step(self) -> None:
        self.log.append(f"{self.name} step")
        if self.clock is not None:
            self.clock.wall += self.seconds
            self.clock.cpu += self.seconds if self.busy else 0.0
        elif self.busy:
            end = time.perf_counter() + self.seconds
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(self.seconds)


def test_interleaved_runs_the_baseline_before_each_backend_run() -> None:
    calls: list[str] = []
    timing.interleaved(lambda: calls.append("backend"), lambda: calls.append("baseline"), 3)
    assert calls == ["baseline", "backend"] * 3


def test_timed_run_measures_wall_and_process_cpu_time() -> None:
    log: list[str] = []
    busy = timing.timed_run(FakeCase(log, "b", 0.05, busy=True), 2)  # type: ignore[arg-type]
    # N steps, one wait; then (untimed) the gradients go, so the other case steps beside weights only
    assert log == ["b step", "b step", "b wait", "b drop_grads"]
    # burning the CPU: CPU time accrues (how much of the wall time depends on what else runs here)
    assert busy.wall >= 0.1 and 0 < busy.cpu <= busy.wall * 1.05 + 0.01
    asleep = timing.timed_run(FakeCase(log, "s", 0.05, busy=False), 2)  # type: ignore[arg-type]
    assert asleep.wall >= 0.1 and asleep.cpu / asleep.wall < 0.3  # sleeping: wall time without CPU time


def test_measurement_keeps_both_times_per_side_and_the_higher_load() -> None:
    m = Measurement(iterations_per_run=2)
    m.side("baseline").add(RunTime(0.4, 0.38))
    m.side("backend").add(RunTime(0.2, 0.25))
    assert (m.baseline.runs, m.baseline.cpu, m.backend.runs, m.backend.cpu) == ([0.4], [0.38], [0.2], [0.25])
    assert m.figures.speedup == pytest.approx(2.0)
    assert m.load is None
    m.load_before, m.load_after = 1.5, 2.25
    assert m.load == 2.25
    m.load_after = None
    assert m.load == 1.5


def test_measure_interleaves_times_both_and_reads_the_load_around_the_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = iter([1.25, 3.5])
    monkeypatch.setattr(measure_module, "loadavg", lambda: next(loads))
    clock = FakeClock()
    monkeypatch.setattr(measure_module, "time", clock)
    log: list[str] = []
    case, baseline = FakeCase(log, "case", 0.01, True, clock), FakeCase(log, "base", 0.02, False, clock)
    result = timing.measure(case, baseline, 2, 3)  # type: ignore[arg-type]
    assert len(result.backend.runs) == len(result.backend.cpu) == 3
    assert len(result.baseline.runs) == len(result.baseline.cpu) == 3
    assert (result.load_before, result.load_after, result.load) == (1.25, 3.5, 3.5)
    # per run: wall = 2 steps; CPU = the wall for the burning backend, none for the sleeping baseline
    assert result.backend.runs == pytest.approx([0.02] * 3) and result.backend.cpu == pytest.approx([0.02] * 3)
    assert result.baseline.runs == pytest.approx([0.04] * 3) and result.baseline.cpu == pytest.approx([0.0] * 3)
    timed = [entry for entry in log if entry.endswith(("step", "grads"))][4:]  # after one priming step each
    assert timed == ["base step", "base step", "base drop_grads", "case step", "case step", "case drop_grads"] * 3
    assert result.recompiles == 0


def test_measure_through_pedantic_keeps_only_the_timed_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-benchmark may call the target once more after the rounds (--benchmark-cprofile)."""
    monkeypatch.setattr(measure_module, "loadavg", lambda: None)
    seen: dict[str, Any] = {}

    def pedantic(target: Callable[[], None], setup: Callable[[], None], rounds: int, iterations: int,
                 warmup_rounds: int) -> None:
        seen.update(rounds=rounds, iterations=iterations, warmup_rounds=warmup_rounds)
        for _ in range(rounds):
            setup()
            target()
        target()

    log: list[str] = []
    result = timing.measure(FakeCase(log, "case", 0.001, True), FakeCase(log, "base", 0.001, True),  # type: ignore[arg-type]
                            1, 2, pedantic)
    assert seen == {"rounds": 2, "iterations": 1, "warmup_rounds": 0}
    assert len(result.backend.runs) == len(result.backend.cpu) == 2
    assert len(result.baseline.runs) == len(result.baseline.cpu) == 2
    assert result.load is None


def test_loadavg_is_a_rounded_number_or_none() -> None:
    load = timing.loadavg()
    assert load is None or (load >= 0 and round(load, 2) == load)


def test_machine_busy_counts_every_process_and_reaches_the_runs() -> None:
    before = measure_module.machine_busy()
    if before is None:
        pytest.skip("no /proc/stat on this platform: the machine's busy time is not measured")
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:  # this process burns a core: the machine's busy time grows with it
        pass
    after = measure_module.machine_busy()
    assert after is not None and after - before >= 0.1
    log: list[str] = []
    run = timing.timed_run(FakeCase(log, "b", 0.05, busy=True), 2)  # type: ignore[arg-type]
    assert run.machine is not None and run.machine >= run.cpu * 0.5


def test_measure_calibrates_one_count_for_both_sides_from_the_untimed_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """xla_min_run_time 0.05 s: the faster side's prime step (0.01 s) sets 5 iterations per run for both."""
    monkeypatch.setattr(measure_module, "loadavg", lambda: None)
    clock = FakeClock()
    monkeypatch.setattr(measure_module, "time", clock)
    log: list[str] = []
    case, baseline = FakeCase(log, "case", 0.01, True, clock), FakeCase(log, "base", 0.02, False, clock)
    result = timing.measure(case, baseline, 2, 3, min_run_time=0.05)  # type: ignore[arg-type]
    assert (result.requested_iterations, result.iterations_per_run, result.min_run_time) == (2, 5, 0.05)
    assert result.step_estimate == pytest.approx(0.01)
    assert result.backend.runs == pytest.approx([0.05] * 3) and result.baseline.runs == pytest.approx([0.1] * 3)
    assert result.figures.backend == pytest.approx((0.01,) * 3)  # per iteration: over the calibrated count
    timed = [entry for entry in log if entry.endswith("step")][2:]
    assert timed == ["base step"] * 5 + ["case step"] * 5 + ["base step"] * 5 + ["case step"] * 5 + [
        "base step"] * 5 + ["case step"] * 5
    # a warm-up step below the prime step counts (the lower of the two); the first warm-up step (compile) does not
    case.warmup = SimpleNamespace(step_seconds=[0.0001, 0.005])  # type: ignore[attr-defined]
    assert timing.measure(case, baseline, 1, 1, min_run_time=0.05).iterations_per_run == 10  # type: ignore[arg-type]
    # 0: off, exactly as asked; without priming (--benchmark-disable) nothing is calibrated either
    assert timing.measure(case, baseline, 2, 1, min_run_time=0.0).iterations_per_run == 2  # type: ignore[arg-type]
    off = timing.measure(case, baseline, 2, 1, prime=False, min_run_time=0.05)  # type: ignore[arg-type]
    assert (off.iterations_per_run, off.step_estimate) == (2, None)


def test_settle_waits_for_the_other_processes_to_go_quiet() -> None:
    """A real busy process for 0.8 s: settle waits while it takes a core (at least most of its life), then
    returns, at the latest after its limit and one more look (on a busy machine, e.g. beside another xdist
    worker, it waits the limit); a threshold no machine can pass returns after one look; no /proc/stat: no wait."""
    import subprocess
    import sys

    code = "import time\nend = time.time() + 0.8\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.1)  # started
        waited = measure_module.settle(quiet_cores=0.3, window=0.1, limit=3.0)
    finally:
        busy.wait()
    assert 0.4 <= waited < 3.0 + 0.1 + 0.5  # the limit, one window, the scheduler's slack
    start = time.perf_counter()
    assert measure_module.settle(quiet_cores=float(os.cpu_count() or 1) + 1, window=0.05) < 1.0
    assert time.perf_counter() - start < 1.0


def test_settle_without_proc_stat_does_not_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure_module, "machine_busy", lambda: None)
    assert measure_module.settle(window=5.0) < 1.0


def test_measure_draws_a_cpu_sides_placement_before_each_of_its_timed_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """xla_placements=run: before each timed run a side on the CPU gets a new placement and one untimed step
    (not in its run's time); a side on another device (meta stands in for XLA) is left alone."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(measure_module, "loadavg", lambda: None)
    clock = FakeClock()
    monkeypatch.setattr(measure_module, "time", clock)
    log: list[str] = []
    case, baseline = FakeCase(log, "case", 0.01, True, clock), FakeCase(log, "base", 0.02, False, clock)
    inputs = (torch.ones(1, 2),)
    baseline.device, baseline.model, baseline.inputs = torch.device("cpu"), torch.nn.Linear(2, 2), inputs  # type: ignore[attr-defined]
    case.device, case.model, case.inputs = torch.device("meta"), torch.nn.Linear(2, 2, device="meta"), ()  # type: ignore[attr-defined]
    result = timing.measure(case, baseline, 2, 3, placements="run")  # type: ignore[arg-type]
    assert (result.placements, result.redraws) == ("run", {"baseline": 3})
    assert baseline.inputs is not inputs and torch.equal(baseline.inputs[0], inputs[0])  # type: ignore[attr-defined]
    assert result.baseline.runs == pytest.approx([0.04] * 3) and result.backend.runs == pytest.approx([0.02] * 3)
    timed = [entry for entry in log if entry.endswith(("step", "grads"))][4:]  # after one priming step each
    assert timed == ["base step", "base drop_grads",  # the redraw's untimed step
                     "base step", "base step", "base drop_grads", "case step", "case step", "case drop_grads"] * 3
    # "step": a draw and its untimed step before every timed step; the run's time is its timed steps' sum
    log.clear()
    result = timing.measure(case, baseline, 2, 3, placements="step")  # type: ignore[arg-type]
    assert result.redraws == {"baseline": 6} and result.baseline.runs == pytest.approx([0.04] * 3)
    timed = [entry for entry in log if entry.endswith(("step", "grads"))][4:]
    drawn_step = ["base step", "base drop_grads", "base step"]  # the draw's untimed step, then a timed one
    assert timed == (drawn_step * 2 + ["base drop_grads", "case step", "case step", "case drop_grads"]) * 3
    assert timing.measure(case, baseline, 2, 1).redraws == {}  # type: ignore[arg-type]  # the default: "once"
    # "fresh" (the session's malloc setting, timing.plugin): recorded, nothing drawn, the steps as "once" takes them
    log.clear()
    result = timing.measure(case, baseline, 2, 3, placements="fresh")  # type: ignore[arg-type]
    assert (result.placements, result.redraws) == ("fresh", {})
    assert [e for e in log if e.endswith(("step", "grads"))][4:] == [
        "base step", "base step", "base drop_grads", "case step", "case step", "case drop_grads"] * 3
