"""The default measurement method: the case's runs interleaved with the baseline's in this process.

Both cases are built (compiled in their warm-up), then timed by :func:`~pytest_xla_dynamo.timing.measure.measure`
with the machine held alone (under pytest-xdist the machine lock: the other workers wait) and, with
``xla_timing_cpus``, every thread pinned. A measurement that looks disturbed
(:mod:`~pytest_xla_dynamo.timing.interference`) is taken again, at most ``xla_remeasure`` times; still disturbed,
the case is recorded ``unreliable`` with the reasons, its speedup kept but flagged, and a warning. XLA compilations
during the timed runs are counted (``recompiles``) and warned about. With ``xla_min_run_time`` the runs are
calibrated (:mod:`~pytest_xla_dynamo.timing.calibrate`), and a record of 3 or more runs carries its speedup's noise
(:mod:`~pytest_xla_dynamo.timing.noise`), which the speed gate reads.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.records import (
    UNRELIABLE,
    Attempt,
    CaseRecord,
    Interference,
    TimingFigures,
    TimingRuns,
    TimingStats,
)
from pytest_xla_dynamo.timing import affinity, interference, placement
from pytest_xla_dynamo.timing.benchmark import BENCHMARK_GROUP, STATS_UNIT, TIMER_REMEASURED, timer
from pytest_xla_dynamo.timing.measure import Measurement, measure
from pytest_xla_dynamo.timing.memory import device_memory, memory_figures
from pytest_xla_dynamo.timing.method import CaseRun, Harness
from pytest_xla_dynamo.timing.noise import noise_fields
from pytest_xla_dynamo.timing.stats import SPEEDUP_STATISTIC, compilation_latency

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.core.cases import PreparedCase

NOT_MEASURED = "not_measured"  # status of a case run with --benchmark-disable
HUGE_NOT_IN_EFFECT = (
    f"xla_placements=huge: torch's CPU allocator is not asking for huge pages in this process, so the case would be "
    f"timed on 4 KB pages: torch reads {placement.THP_ENV} once, at its first CPU allocation, and something (a "
    f"conftest or plugin building a tensor at import or collection) allocated before the plugin set it; set "
    f"{placement.THP_ENV}=1 in the environment of the pytest command, or run without xla_placements=huge")


def host_bound(backend: Backend) -> bool:
    """Whether ``backend``'s work runs on this host's cores (a CPU backend, or XLA with ``PJRT_DEVICE=CPU``)."""
    return not backend.is_xla or (os.environ.get("PJRT_DEVICE", "").strip().upper() or "CPU") == "CPU"


def judge(measured: Measurement, base: Backend, backend: Backend, cores: int, threads: int,
          shared: bool = False) -> Attempt:
    """One attempt's interference figures and the reasons to distrust it (``reasons`` empty: none); ``shared``:
    measured under the machine lock of several xdist workers (:func:`interference.reasons`)."""
    sides = [measured.side(label).frozen(label, host_bound(which))
             for label, which in (("baseline", base), ("backend", backend))]
    found = interference.reasons(sides, load=measured.load, cores=cores, threads=threads, shared=shared)
    ratio = {s.label: (None if s.cpu_wall is None else round(s.cpu_wall, 3)) for s in sides}
    others = {s.label: (None if s.foreign_cores is None else round(s.foreign_cores, 3)) for s in sides}
    return Attempt(measured.load, ratio["baseline"], ratio["backend"], others["baseline"], others["backend"], found)


def verdict(found: Interference) -> tuple[str, str]:
    """The status and message of a measured case: ``unreliable`` while its last measurement looks disturbed."""
    reasons = found.reasons
    if not reasons:
        return "pass", ""
    return UNRELIABLE, (f"timing unreliable: {'; '.join(reasons)} (measured {len(found.attempts)} times; "
                        "the speedup is kept but not trusted)")


def calibration_fields(measured: Measurement) -> dict[str, Any]:
    """The record's calibration figures: the iterations per run asked for and run, the step estimate the
    count came from (ms; None when not calibrated), how the placements were drawn (``xla_placements``,
    the redraws of both sides) and the CPUs the runs were pinned to (``xla_timing_cpus``; None: not pinned)."""
    step = measured.step_estimate
    return {"requested_iterations_per_run": measured.requested_iterations,
            "calibrated_iterations_per_run": measured.iterations_per_run,
            "calibration_step_ms": None if step is None else round(step * 1000, 4),
            "placements": measured.placements, "placement_redraws": sum(measured.redraws.values()),
            "timing_cpus": list(measured.cpus) or None}


def _counted(values: list[int | None]) -> list[int] | None:
    """Per-run counts where every run was counted, else None."""
    return None if not values or any(v is None for v in values) else [int(v) for v in values if v is not None]


def _ms(values: list[float], iterations: int) -> list[float]:
    return [round(s / iterations * 1000, 4) for s in values]


@dataclass
class _Timed:
    """What the timed runs gave: the last measurement, every attempt's interference figures, the timer."""

    measured: Measurement
    attempts: list[Attempt]
    timer: str
    user_disabled: bool
    lock_wait: float = 0.0  # seconds the timed runs waited for the machine lock


class InProcess:
    """Interleaved runs of the case and its baseline in this process (see the module docstring)."""

    def time(self, harness: Harness, run: CaseRun) -> CaseRecord:
        """Build both cases, time them and record the case (``fail_to_run`` / ``eager_fail_to_run`` recorded, then
        raised, where a case cannot be built, stepped or timed)."""
        engine = harness.session.engine
        try:
            baseline = engine.prepared(run.spec, run.base_backend, run.mode)
        except Exception as exc:
            run.fail(harness, "eager_fail_to_run" if run.base_backend.name == "eager" else "fail_to_run", exc,
                     f"baseline {run.base_backend.name}")
            raise
        try:
            case = engine.prepared(run.spec, run.backend, run.mode)
        except Exception as exc:
            run.fail(harness, "fail_to_run", exc, run.backend.name)
            raise
        assert case.warmup is not None and baseline.warmup is not None
        try:
            timed = self._measure(harness, run, case, baseline)
        except Exception as exc:
            run.fail(harness, "fail_to_run", exc, f"timing {run.backend.name}")
            raise
        return self._record(harness, run, case, baseline, timed)

    def _measure(self, harness: Harness, run: CaseRun, case: PreparedCase, baseline: PreparedCase) -> _Timed:
        """Time the case against the baseline, again while the runs look disturbed (at most ``xla_remeasure``
        times)."""
        settings, benchmark = harness.settings, harness.benchmark
        iterations, repeat = run.fields["iterations_per_run"], run.fields["repeat"]
        text, disabled, user_disabled = timer(harness.session.config, benchmark, harness.session.worker_count)
        if hasattr(benchmark, "group"):
            benchmark.group = BENCHMARK_GROUP.format(mode=run.mode)
        attempts: list[Attempt] = []
        if settings.placements == "huge" and not placement.huge_pages_in_effect():
            raise pytest.fail.Exception(HUGE_NOT_IN_EFFECT, pytrace=False)
        with harness.machine_alone() as waited, affinity.pinned(settings.timing_cpus):
            pinned = affinity.current() if settings.timing_cpus else ()  # what the OS says, not what was asked
            if user_disabled:  # pytest-benchmark runs setup and target once
                measured = measure(case, baseline, iterations, 1, getattr(benchmark, "pedantic", None), prime=False)
                return _Timed(measured, attempts, text, user_disabled, waited)
            timed = functools.partial(measure, case, baseline, iterations, repeat, min_run_time=settings.min_run_time,
                                      placements=settings.placements)
            measured = timed(None if disabled else benchmark.pedantic)
            attempts.append(judge(measured, run.base_backend, run.backend, run.cores, run.threads, harness.shared_lock))
            recompiles = measured.recompiles
            while attempts[-1].reasons and len(attempts) <= settings.remeasure:
                measured = timed(None)  # pedantic runs once per test
                attempts.append(judge(measured, run.base_backend, run.backend, run.cores, run.threads,
                                      harness.shared_lock))
                recompiles += measured.recompiles
                text = TIMER_REMEASURED
        measured.recompiles, measured.cpus = recompiles, pinned
        return _Timed(measured, attempts, text, user_disabled, waited)

    def _record(self, harness: Harness, run: CaseRun, case: PreparedCase, baseline: PreparedCase,
                timed: _Timed) -> CaseRecord:
        """Record the timed case (``not_measured`` under ``--benchmark-disable``, ``unreliable`` when still
        disturbed), give pytest-benchmark its figures and warn about recompiles and interference."""
        assert case.warmup is not None and baseline.warmup is not None
        session, item, measured = harness.session, harness.item, timed.measured
        iterations = measured.iterations_per_run
        counts = case.warmup.figures(run.backend)
        comp_latency = compilation_latency(case.warmup.step_seconds, baseline.warmup.step_seconds)
        mine, base = measured.backend, measured.baseline
        runs = TimingRuns(
            timed.timer, _ms(mine.runs, iterations), _ms(base.runs, iterations), _ms(mine.cpu, iterations),
            _ms(base.cpu, iterations), [round(s, 4) for s in case.warmup.step_seconds],
            [round(s, 4) for s in baseline.warmup.step_seconds], case.warmup.step_seconds[0], measured.recompiles,
            session.worker_count, measured.load, round(timed.lock_wait, 3) if session.worker_count > 1 else None,
            **calibration_fields(measured), backend_major_faults=_counted(mine.faults),
            baseline_major_faults=_counted(base.faults))
        measured_fields: dict[str, Any] = dict(
            compilation_latency=comp_latency, recompiles=measured.recompiles, **counts, **run.fields)
        if timed.user_disabled:
            record = CaseRecord(status=NOT_MEASURED, message="--benchmark-disable: run once, not timed",
                                **measured_fields, timing=TimingFigures(run.context, runs))
            return session.record(item, record)
        stats = self._stats(harness, run, timed)
        status, message = verdict(stats.interference)
        figures = measured.figures
        record = CaseRecord(
            status=status, message=message, speedup=figures.speedup, abs_latency=figures.abs_latency_ms,
            baseline_latency=figures.baseline_latency_ms, spread=figures.spread, **measured_fields,
            timing=TimingFigures(run.context, runs, stats))
        self._benchmark_info(harness, run, case, record, timed, stats, comp_latency, counts)
        if measured.recompiles:
            warnings.warn(pytest.PytestWarning(
                f"{item.nodeid}: {measured.recompiles} XLA compilation(s) during the timed runs of {run.backend.name} "
                f"(after {len(case.warmup.step_seconds)} warm-up steps): the steady-state time includes them"),
                stacklevel=2)
        if status == UNRELIABLE:
            warnings.warn(pytest.PytestWarning(f"{item.nodeid}: {message}"), stacklevel=2)
        return session.record(item, record)

    def _stats(self, harness: Harness, run: CaseRun, timed: _Timed) -> TimingStats:
        """A measured case's statistics, interference and memory."""
        figures, final = timed.measured.figures, timed.attempts[-1]
        memory = memory_figures(run.base_backend, run.backend, device_memory(run.base_backend),
                                device_memory(run.backend), isolated=harness.session.child_output is not None)
        return TimingStats(SPEEDUP_STATISTIC, figures.baseline_spread, round(figures.backend_min_ms, 4),
                           round(figures.baseline_min_ms, 4), final.baseline_cpu_wall, final.backend_cpu_wall,
                           Interference(timed.attempts), memory,
                           **noise_fields(timed.measured.baseline.runs, timed.measured.backend.runs))

    def _benchmark_info(self, harness: Harness, run: CaseRun, case: PreparedCase, record: CaseRecord,
                        timed: _Timed, stats: TimingStats, comp_latency: float | None,
                        counts: dict[str, Any]) -> None:
        """pytest-benchmark's ``extra_info`` of the case (its JSON), per iteration as the record."""
        if not hasattr(harness.benchmark, "extra_info"):
            return
        assert case.warmup is not None
        harness.benchmark.extra_info.update({
            "model": run.spec.name, "backend": run.backend.name, "mode": run.mode,
            "baseline_backend": run.base_backend.name, "iterations_per_run": run.fields["iterations_per_run"],
            "calibrated_iterations_per_run": timed.measured.iterations_per_run,
            "min_run_time": timed.measured.min_run_time, "speedup_noise": stats.speedup_noise,
            "repeat": run.fields["repeat"], "stats_unit": STATS_UNIT,
            "status": record.status, "speedup": record.speedup, "speedup_statistic": SPEEDUP_STATISTIC,
            "abs_latency_ms": record.abs_latency, "baseline_latency_ms": record.baseline_latency,
            "backend_min_ms": stats.backend_min_ms, "baseline_min_ms": stats.baseline_min_ms,
            "spread": record.spread, "threads": run.threads, "interference": stats.interference.reasons,
            "compilation_seconds": case.warmup.step_seconds[0], "compilation_latency": comp_latency,
            **counts, "timed_compiles": timed.measured.recompiles, "timer": timed.timer,
            "batch_size": record.batch_size, "tier": record.tier,
        })
