"""The timing check: one case timed against the baseline and recorded (the ``xla_timing`` fixture's object).

pytest-benchmark's switches keep their meaning: ``--benchmark-skip`` skips the timing tests,
``--benchmark-disable`` runs each case once (one baseline run, one backend run) and records it as
``not_measured`` without a speedup. Under pytest-xdist with more than one worker the timed runs hold the
machine lock exclusive (:mod:`~pytest_xla_dynamo.workers.machine_lock`: the other workers wait); where there is
no lock, timing is refused (a skip naming the fix). Under pytest-xdist pytest-benchmark disables itself, so
the ``xla_timing`` fixture does not ask for its ``benchmark`` fixture (:func:`benchmark_wanted`: it would only
warn that it was not used), the runs are timed by the same interleaved loop with ``time.perf_counter`` and the
record says so (``TimingRuns.timer``). pytest-benchmark stores the
backend's seconds *per run*; the figures recorded here are per iteration. Its per-case tables are
grouped, one per mode (``benchmark.group``). XLA compilations during the timed runs are counted
(``recompiles``) and warned about, since they would pollute the steady figure.

Both cases run with the session's thread budget (:mod:`~pytest_xla_dynamo.timing.threads`). A case whose
runs look disturbed (:mod:`~pytest_xla_dynamo.timing.interference`) is measured again, at most
``REMEASURE_LIMIT`` times; still disturbed, it is recorded ``unreliable`` with the reasons, its speedup
kept but flagged, and a warning.

With ``--xla-min-run-time`` the runs are calibrated (:mod:`~pytest_xla_dynamo.timing.calibrate`; the record
keeps the requested and the calibrated iterations per run), and every record of 3 or more runs carries its
speedup's noise (:mod:`~pytest_xla_dynamo.timing.noise`), which the speed gate reads. With
``--xla-timing-processes N`` (N > 1) the case is measured in N fresh processes instead and recorded as their
combination (:mod:`~pytest_xla_dynamo.timing.across`).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.core.stages import TRIAGED
from pytest_xla_dynamo.records import (
    UNRELIABLE,
    Attempt,
    CaseRecord,
    Interference,
    RecordStore,
    TimingContext,
    TimingFigures,
    TimingRuns,
    TimingStats,
)
from pytest_xla_dynamo.session import CaseCheck, XlaSession
from pytest_xla_dynamo.timing import across, affinity, interference, placement
from pytest_xla_dynamo.timing.measure import Measurement, measure, settle
from pytest_xla_dynamo.timing.memory import device_memory, memory_figures
from pytest_xla_dynamo.timing.noise import noise_fields
from pytest_xla_dynamo.timing.plugin import session_budget
from pytest_xla_dynamo.timing.stats import SPEEDUP_STATISTIC, compilation_latency
from pytest_xla_dynamo.timing.threads import apply_torch_threads
from pytest_xla_dynamo.workers import isolation
from pytest_xla_dynamo.workers.machine_lock import MachineLock, NoLock, session_lock

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.core.cases import PreparedCase

SUITE = "timing"
NOT_MEASURED = "not_measured"  # status of a case run with --benchmark-disable
TIMER_BENCHMARK = "pytest-benchmark pedantic (perf_counter)"
TIMER_OWN = "perf_counter loop (pytest-benchmark disabled itself{why})"
TIMER_NO_BENCHMARK = "perf_counter loop (the test does not use pytest-benchmark's benchmark fixture)"
TIMER_REMEASURED = ("perf_counter loop (re-measured after interference; pytest-benchmark's figures are the "
                    "first attempt's)")
STATS_UNIT = "seconds per timed run of calibrated_iterations_per_run iterations"
BENCHMARK_GROUP = "xla-dynamo timing: {mode}"  # one pytest-benchmark table per mode
HUGE_NOT_IN_EFFECT = (
    f"--xla-placements=huge: torch's CPU allocator is not asking for huge pages in this process, so the case would be "
    f"timed on 4 KB pages: torch reads {placement.THP_ENV} once, at its first CPU allocation, and something (a "
    f"conftest or plugin building a tensor at import or collection) allocated before the plugin set it; set "
    f"{placement.THP_ENV}=1 in the environment of the pytest command, or run without --xla-placements=huge")


def xdist_refusal(workers: int, cores: int | None = None, locked: bool = False) -> str | None:
    """Why timing is refused with ``workers`` pytest-xdist workers (None: it may time). ``locked``: the workers
    share the machine lock, so the timed runs have the cores alone (:mod:`~pytest_xla_dynamo.workers.machine_lock`)."""
    if workers <= 1 or locked:
        return None
    cores = cores or os.cpu_count() or 1
    return (f"timing is refused under pytest-xdist with {workers} workers: the workers compete for the "
            f"{cores} core{'s' if cores != 1 else ''} and this platform has no lock (POSIX flock) to give the "
            f"timed runs the cores alone; run the timing suite (suites/test_timing.py) with -n 0 (or -n 1)")


def _user_disabled(config: pytest.Config) -> bool:
    """``--benchmark-disable`` given (and not overridden by ``--benchmark-enable``)."""
    return bool(config.getoption("benchmark_disable", False)) and not config.getoption("benchmark_enable", False)


def benchmark_off(config: pytest.Config) -> bool:
    """Whether pytest-benchmark is installed and turned itself off: under pytest-xdist (controller and workers),
    or without ``statistics``. Not ``--benchmark-disable`` (the user's: it runs each case once through the
    fixture) nor ``--benchmark-skip`` (the fixture skips the test)."""
    bench = getattr(config, "_benchmarksession", None)
    return bench is not None and bool(bench.disabled) and not bench.skip and not _user_disabled(config)


def benchmark_wanted(config: pytest.Config) -> bool:
    """Whether a timing test uses pytest-benchmark's ``benchmark`` fixture: where pytest-benchmark is installed
    and not turned off (:func:`benchmark_off`). Where it is off the fixture would only warn, once per test,
    "Benchmark fixture was not used at all in this test!", and the runs are timed by the plugin's own loop."""
    return hasattr(config, "_benchmarksession") and not benchmark_off(config)


def name_benchmark(items: list[pytest.Item]) -> None:
    """Where pytest-benchmark is wanted (:func:`benchmark_wanted`), the tests that use ``xla_timing`` name its
    ``benchmark`` fixture as if they requested it (``xla_timing`` asks for it when it runs): pytest-benchmark
    reads the names at collection, so that ``--benchmark-only`` keeps these tests and ``--benchmark-skip``
    skips them. The names are shared by a function's parametrized tests: added once."""
    if not items or not benchmark_wanted(items[0].config):
        return
    for item in items:
        names = getattr(item, "fixturenames", None)
        if isinstance(names, list) and "xla_timing" in names and "benchmark" not in names:
            names.append("benchmark")


def host_bound(backend: Backend) -> bool:
    """Whether ``backend``'s work runs on this host's cores (a CPU backend, or XLA with ``PJRT_DEVICE=CPU``)."""
    return not backend.is_xla or (os.environ.get("PJRT_DEVICE", "").strip().upper() or "CPU") == "CPU"


def judge(measured: Measurement, base: Backend, backend: Backend, cores: int, threads: int,
          shared: bool = False) -> Attempt:
    """One attempt's interference figures and the reasons to distrust it (``reasons`` empty: none); ``shared``:
    measured under the machine lock of several xdist workers (:func:`interference.reasons`)."""
    sides = [interference.Runs("baseline", tuple(measured.baseline_runs), tuple(measured.baseline_cpu),
                               host_bound(base), tuple(measured.baseline_machine)),
             interference.Runs("backend", tuple(measured.backend_runs), tuple(measured.backend_cpu),
                               host_bound(backend), tuple(measured.backend_machine))]
    found = interference.reasons(sides, load=measured.load, cores=cores, threads=threads, shared=shared)
    ratio = {s.label: (None if s.cpu_wall is None else round(s.cpu_wall, 3)) for s in sides}
    others = {s.label: (None if s.foreign_cores is None else round(s.foreign_cores, 3)) for s in sides}
    return Attempt(measured.load, ratio["baseline"], ratio["backend"], others["baseline"], others["backend"], found)


def verdict(interference: Interference) -> tuple[str, str]:
    """The status and message of a measured case: ``unreliable`` while its last measurement looks disturbed."""
    reasons = interference.reasons
    if not reasons:
        return "pass", ""
    return UNRELIABLE, (f"timing unreliable: {'; '.join(reasons)} (measured {len(interference.attempts)} times; "
                        "the speedup is kept but not trusted)")


def calibration_fields(measured: Measurement) -> dict[str, Any]:
    """The record's calibration figures: the iterations per run asked for and run, the step estimate the
    count came from (ms; None when not calibrated), how the placements were drawn (``--xla-placements``,
    the redraws of both sides) and the CPUs the runs were pinned to (``--xla-timing-cpus``; None: not pinned)."""
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


class XlaTiming(CaseCheck):
    """The ``xla_timing`` fixture: ``xla_timing.check_case(spec, backend)`` times a zoo case against the
    baseline (``--xla-baseline-backend``), records it and returns the record."""

    suite = SUITE

    def __init__(self, session: XlaSession, item: pytest.Item, benchmark: Any) -> None:
        super().__init__(session, item)
        self.benchmark = benchmark
        self._lock = session_lock(session.config)  # shared with the other xdist workers, else a no-op

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str | None = None) -> CaseRecord:
        """Time ``spec`` on ``backend`` (mode: the ``xla_mode`` marker by default) and record it.

        Raises (after recording ``fail_to_run`` or ``eager_fail_to_run``) when a case cannot be built
        or stepped; skips under xdist with more than one worker and no machine lock, and when ``backend`` is
        the baseline.
        """
        mode = self._mode(mode)
        run = self._open(spec, backend, mode)
        if self.session.xcfg.timing_processes > 1 and self.session.child_output is None:
            return self._across_processes(run)
        engine = self.session.engine
        try:
            baseline = engine.prepared(spec, run.base_backend, mode)
        except Exception as exc:
            run.fail(self, "eager_fail_to_run" if run.base_backend.name == "eager" else "fail_to_run", exc,
                     f"baseline {run.base_backend.name}")
            raise
        try:
            case = engine.prepared(spec, backend, mode)
        except Exception as exc:
            run.fail(self, "fail_to_run", exc, backend.name)
            raise
        assert case.warmup is not None and baseline.warmup is not None
        try:
            timed = self._measure(run, case, baseline)
        except Exception as exc:
            run.fail(self, "fail_to_run", exc, f"timing {backend.name}")
            raise
        return self._record(run, case, baseline, timed)

    def _open(self, spec: zoo.ModelSpec, backend: Backend, mode: str) -> _Run:
        """Refuse what cannot be timed (skips, usage errors), set the threads and say what the record holds."""
        session, xcfg = self.session, self.session.xcfg
        refusal = xdist_refusal(session.worker_count, locked=not isinstance(self._lock, NoLock))
        if refusal is not None:
            pytest.skip(refusal)
        base_backend = session.backends.get(xcfg.baseline_backend)
        if backend.name == base_backend.name:
            pytest.skip(f"{backend.name} is the timing baseline (--xla-baseline-backend): its speedup is 1 by "
                        "definition")
        self._supports(mode, backend, base_backend, what="timing: ")
        iterations, repeat = xcfg.iterations_per_run, xcfg.repeat
        budget = session_budget(session)
        thread_info = {**budget.to_dict(), "torch": apply_torch_threads(budget.threads)}
        base_fields: dict[str, Any] = dict(
            **self._fields(spec, backend, mode, self._repro(backend, timing=True)), baseline=base_backend.name,
            iterations_per_run=iterations, repeat=repeat)
        context = TimingContext(iterations, repeat, budget.threads, thread_info,
                                "auto (PJRT_DEVICE)" if xcfg.baseline_auto else "--xla-baseline-backend",
                                xcfg.min_run_time)
        return _Run(spec, backend, base_backend, mode, budget.threads, budget.cores, base_fields, context)

    @property
    def _shared_lock(self) -> bool:
        """Whether the machine lock is shared with other xdist workers (else it is a no-op)."""
        return isinstance(self._lock, MachineLock)

    @contextlib.contextmanager
    def _machine_alone(self) -> Iterator[float]:
        """Hold the machine alone for timed work: the lock exclusive (other xdist workers wait; a no-op without
        them), then until the other workers' last work (a report sent, a model freed) has ended; yields the
        seconds waited, the settling included."""
        with self._lock.exclusive() as waited:
            yield waited + (settle() if self._shared_lock else 0.0)

    def _across_processes(self, run: _Run) -> CaseRecord:
        """Measure the case in ``--xla-timing-processes`` fresh processes, one after the other (each holding the
        machine lock exclusive, compile included), and record their combination (:mod:`timing.across`)."""
        session, count = self.session, self.session.xcfg.timing_processes
        if hasattr(self.benchmark, "_mode"):
            # pytest-benchmark times nothing in this process (the children do, each with its own benchmark
            # fixture): marked used, so that it does not warn "Benchmark fixture was not used at all"; it then has no
            # figures of this test for its tables (their figures are in the plugin's records)
            self.benchmark._mode = "xla-dynamo: timed in --xla-timing-processes children"
        records: list[CaseRecord] = []
        base: list[CaseRecord] = []
        python = session.xcfg.timing_base_python
        for index in range(1, count + 1):
            sides: list[tuple[tuple[str, ...], list[CaseRecord]]] = [((), records)]
            if python:  # A/B: pair i is a process of the base build and one of this build; the first alternates
                sides.insert(0 if index % 2 else 1, (python, base))
            for command, into in sides:
                which = (f"base build's ({' '.join(command)}) timing process {index} of {count}" if command
                         else f"timing process {index} of {count}")
                with self._machine_alone():
                    child = isolation.run_child(self.item, session.xcfg, session.xcfg.isolate_timeout,
                                                python=command)
                into.append(self._process_record(run, child, which))
        record = across.pair(records, base, count) if python else across.combine(records, count)
        if record.status == UNRELIABLE:
            warnings.warn(pytest.PytestWarning(f"{self.item.nodeid}: {record.message}"), stacklevel=2)
        if hasattr(self.benchmark, "extra_info"):
            self.benchmark.extra_info.update({
                "model": run.spec.name, "backend": run.backend.name, "mode": run.mode, "status": record.status,
                "speedup": record.speedup, "timing_processes": count, "process_speedups": [r.speedup for r in records],
                **({"base_process_speedups": [r.speedup for r in base]} if base else {})})
        return session.record(self.item, replace(record, repro=run.fields["repro"]))

    def _process_record(self, run: _Run, child: isolation.ChildRun, which: str) -> CaseRecord:
        """The record one timing process left. Where the process's test did not pass, this test ends as it did
        (the process's record kept): failed with its report (a crash or time-out included), xfailed by its known
        issue, or skipped."""
        store = RecordStore()
        if child.records:
            store.loads(child.records)
        found = [r for r in store.by_suite(SUITE) if (r.name, r.backend, r.mode) ==
                 (run.spec.name, run.backend.name, run.mode)]
        reports = isolation.child_reports(self.item, child)
        failed = [r for r in reports if r.failed]
        skipped = [r for r in reports if r.skipped]
        if found and not failed and not skipped:
            return found[0]
        for record in found:
            self.session.record(self.item, record)
        if not found:
            run.fail(self, "fail_to_run", RuntimeError(f"{which} left no record"), which)
        what = f"{which} of {run.spec.name} / {run.backend.name} / {run.mode}"
        if not failed and skipped and hasattr(skipped[0], "wasxfail"):
            pytest.xfail(f"{what}: {skipped[0].wasxfail}")
        if not failed and skipped:
            longrepr = skipped[0].longrepr
            pytest.skip(f"{what}: {longrepr[2] if isinstance(longrepr, tuple) else longrepr}")
        text = failed[0].longreprtext if failed else "(no report)"
        failure = pytest.fail.Exception(f"{what} failed:\n{text}", pytrace=False)
        setattr(failure, TRIAGED, True)  # the process's report, triage included, is the message
        raise failure

    def _timer(self) -> tuple[str, bool, bool]:
        """(what times the runs, whether pytest-benchmark is disabled, whether the user disabled it)."""
        benchmark = self.benchmark
        disabled = bool(getattr(benchmark, "disabled", True))
        user_disabled = disabled and _user_disabled(self.session.config)
        if user_disabled:
            timer = "none (--benchmark-disable: one run each, not measured)"
        elif benchmark is None and not benchmark_off(self.session.config):
            timer = TIMER_NO_BENCHMARK
        elif disabled:
            timer = TIMER_OWN.format(why=" under pytest-xdist" if self.session.worker_count else "")
        else:
            timer = TIMER_BENCHMARK
        return timer, disabled, user_disabled

    def _measure(self, run: _Run, case: PreparedCase, baseline: PreparedCase) -> _Timed:
        """Time the case against the baseline, again while the runs look disturbed (at most
        ``REMEASURE_LIMIT`` times)."""
        benchmark, iterations, repeat = self.benchmark, run.fields["iterations_per_run"], run.fields["repeat"]
        timer, disabled, user_disabled = self._timer()
        if hasattr(benchmark, "group"):
            benchmark.group = BENCHMARK_GROUP.format(mode=run.mode)
        attempts: list[Attempt] = []
        shared = self._shared_lock
        cpus = self.session.xcfg.timing_cpus
        if self.session.xcfg.placements == "huge" and not placement.huge_pages_in_effect():
            raise pytest.fail.Exception(HUGE_NOT_IN_EFFECT, pytrace=False)
        with self._machine_alone() as waited, affinity.pinned(cpus):
            pinned = affinity.current() if cpus else ()  # what the OS says, not what was asked
            if user_disabled:  # pytest-benchmark runs setup and target once
                measured = measure(case, baseline, iterations, 1, getattr(benchmark, "pedantic", None), prime=False)
                return _Timed(measured, attempts, timer, user_disabled, waited)
            min_run_time, placements = self.session.xcfg.min_run_time, self.session.xcfg.placements
            measured = measure(case, baseline, iterations, repeat, None if disabled else benchmark.pedantic,
                               min_run_time=min_run_time, placements=placements)
            attempts.append(judge(measured, run.base_backend, run.backend, run.cores, run.threads, shared))
            recompiles = measured.recompiles
            while attempts[-1].reasons and len(attempts) <= interference.REMEASURE_LIMIT:
                measured = measure(case, baseline, iterations, repeat, None,  # pedantic runs once per test
                                   min_run_time=min_run_time, placements=placements)
                attempts.append(judge(measured, run.base_backend, run.backend, run.cores, run.threads, shared))
                recompiles += measured.recompiles
                timer = TIMER_REMEASURED
        measured.recompiles, measured.cpus = recompiles, pinned
        return _Timed(measured, attempts, timer, user_disabled, waited)

    def _record(self, run: _Run, case: PreparedCase, baseline: PreparedCase, timed: _Timed) -> CaseRecord:
        """Record the timed case (``not_measured`` under ``--benchmark-disable``, ``unreliable`` when still
        disturbed), give pytest-benchmark its figures and warn about recompiles and interference."""
        assert case.warmup is not None and baseline.warmup is not None
        session, item, measured, iterations = self.session, self.item, timed.measured, timed.measured.iterations_per_run
        counts = case.warmup.figures(run.backend)
        comp_latency = compilation_latency(case.warmup.step_seconds, baseline.warmup.step_seconds)
        runs = TimingRuns(
            timed.timer, _ms(measured.backend_runs, iterations), _ms(measured.baseline_runs, iterations),
            _ms(measured.backend_cpu, iterations), _ms(measured.baseline_cpu, iterations),
            [round(s, 4) for s in case.warmup.step_seconds], [round(s, 4) for s in baseline.warmup.step_seconds],
            case.warmup.step_seconds[0], measured.recompiles, session.worker_count, measured.load,
            round(timed.lock_wait, 3) if session.worker_count > 1 else None, **calibration_fields(measured),
            backend_major_faults=_counted(measured.backend_faults),
            baseline_major_faults=_counted(measured.baseline_faults))
        measured_fields: dict[str, Any] = dict(
            compilation_latency=comp_latency, recompiles=measured.recompiles, **counts, **run.fields)
        if timed.user_disabled:
            record = CaseRecord(status=NOT_MEASURED, message="--benchmark-disable: run once, not timed",
                                **measured_fields, timing=TimingFigures(run.context, runs))
            return session.record(item, record)
        stats = self._stats(run, timed)
        status, message = verdict(stats.interference)
        figures = measured.figures
        record = CaseRecord(
            status=status, message=message, speedup=figures.speedup, abs_latency=figures.abs_latency_ms,
            baseline_latency=figures.baseline_latency_ms, spread=figures.spread, **measured_fields,
            timing=TimingFigures(run.context, runs, stats))
        self._benchmark_info(run, case, record, timed, stats, comp_latency, counts)
        if measured.recompiles:
            warnings.warn(pytest.PytestWarning(
                f"{item.nodeid}: {measured.recompiles} XLA compilation(s) during the timed runs of {run.backend.name} "
                f"(after {len(case.warmup.step_seconds)} warm-up steps): the steady-state time includes them"),
                stacklevel=2)
        if status == UNRELIABLE:
            warnings.warn(pytest.PytestWarning(f"{item.nodeid}: {message}"), stacklevel=2)
        return session.record(item, record)

    def _stats(self, run: _Run, timed: _Timed) -> TimingStats:
        """A measured case's statistics, interference and memory."""
        figures, final = timed.measured.figures, timed.attempts[-1]
        memory = memory_figures(run.base_backend, run.backend, device_memory(run.base_backend),
                                device_memory(run.backend), isolated=self.session.child_output is not None)
        return TimingStats(SPEEDUP_STATISTIC, figures.baseline_spread, round(figures.backend_min_ms, 4),
                           round(figures.baseline_min_ms, 4), final.baseline_cpu_wall, final.backend_cpu_wall,
                           Interference(timed.attempts), memory,
                           **noise_fields(timed.measured.baseline_runs, timed.measured.backend_runs))

    def _benchmark_info(self, run: _Run, case: PreparedCase, record: CaseRecord, timed: _Timed,
                        stats: TimingStats, comp_latency: float | None, counts: dict[str, Any]) -> None:
        """pytest-benchmark's ``extra_info`` of the case (its JSON), per iteration as the record."""
        if not hasattr(self.benchmark, "extra_info"):
            return
        assert case.warmup is not None
        self.benchmark.extra_info.update({
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


@dataclass
class _Run:
    """One timing check's case and what its records hold whatever happens (``fields``, ``context``)."""

    spec: zoo.ModelSpec
    backend: Backend
    base_backend: Backend
    mode: str
    threads: int
    cores: int
    fields: dict[str, Any]
    context: TimingContext

    def fail(self, check: XlaTiming, status: str, exc: BaseException, what: str) -> None:
        check.session.record(check.item, CaseRecord(status=status, message=f"{what}: {exc!r}", **self.fields,
                                                    timing=TimingFigures(self.context)))


@dataclass
class _Timed:
    """What the timed runs gave: the last measurement, every attempt's interference figures, the timer."""

    measured: Measurement
    attempts: list[Attempt]
    timer: str
    user_disabled: bool
    lock_wait: float = 0.0  # seconds the timed runs waited for the machine lock
