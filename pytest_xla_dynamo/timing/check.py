"""The timing check: one case timed against the baseline and recorded (the ``xla_timing`` fixture's object).

pytest-benchmark's switches keep their meaning: ``--benchmark-skip`` skips the timing tests,
``--benchmark-disable`` runs each case once (one baseline run, one backend run) and records it as
``not_measured`` without a speedup. Under pytest-xdist with more than one worker, timing is refused
(a skip naming the fix): the workers would compete for the cores. With one worker (``-n 1``)
pytest-benchmark disables itself, so the runs are timed by the same interleaved loop with
``time.perf_counter`` and the record says so (``extra["timer"]``). pytest-benchmark stores the
backend's seconds *per run*; the figures recorded here are per iteration. Its per-case tables are
grouped, one per mode (``benchmark.group``). XLA compilations during the timed runs are counted
(``recompiles``) and warned about, since they would pollute the steady figure.

Both cases run with the session's thread budget (:mod:`~pytest_xla_dynamo.timing.threads`). A case whose
runs look disturbed (:mod:`~pytest_xla_dynamo.timing.interference`) is measured again, at most
``REMEASURE_LIMIT`` times; still disturbed, it is recorded ``unreliable`` with the reasons, its speedup
kept but flagged, and a warning.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.markers import case_mode
from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord
from pytest_xla_dynamo.repro import repro_command
from pytest_xla_dynamo.timing import interference
from pytest_xla_dynamo.timing.measure import Measurement, measure
from pytest_xla_dynamo.timing.memory import device_memory, memory_columns
from pytest_xla_dynamo.timing.stats import SPEEDUP_STATISTIC, compilation_latency
from pytest_xla_dynamo.timing.threads import apply_torch_threads

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.session import XlaSession

SUITE = "timing"
NOT_MEASURED = "not_measured"  # status of a case run with --benchmark-disable
TIMER_BENCHMARK = "pytest-benchmark pedantic (perf_counter)"
TIMER_OWN = "perf_counter loop (pytest-benchmark disabled itself{why})"
TIMER_NO_BENCHMARK = "perf_counter loop (the test does not use pytest-benchmark's benchmark fixture)"
TIMER_REMEASURED = ("perf_counter loop (re-measured after interference; pytest-benchmark's figures are the "
                    "first attempt's)")
STATS_UNIT = "seconds per timed run of iterations_per_run iterations"
BENCHMARK_GROUP = "xla-dynamo timing: {mode}"  # one pytest-benchmark table per mode


def xdist_refusal(workers: int, cores: int | None = None) -> str | None:
    """Why timing is refused with ``workers`` pytest-xdist workers (None: it may time)."""
    if workers <= 1:
        return None
    cores = cores or os.cpu_count() or 1
    return (f"timing is refused under pytest-xdist with {workers} workers: the workers compete for the "
            f"{cores} core{'s' if cores != 1 else ''}, so the timings would be wrong; run the timing suite "
            f"(suites/test_timing.py) with -n 0 (or -n 1)")


def _user_disabled(config: pytest.Config) -> bool:
    """``--benchmark-disable`` given (and not overridden by ``--benchmark-enable``)."""
    return bool(config.getoption("benchmark_disable", False)) and not config.getoption("benchmark_enable", False)


def host_bound(backend: Backend) -> bool:
    """Whether ``backend``'s work runs on this host's cores (a CPU backend, or XLA with ``PJRT_DEVICE=CPU``)."""
    return not backend.is_xla or (os.environ.get("PJRT_DEVICE", "").strip().upper() or "CPU") == "CPU"


def judge(measured: Measurement, base: Backend, backend: Backend, cores: int, threads: int) -> dict[str, Any]:
    """One attempt's interference figures and the reasons to distrust it (``reasons`` empty: none)."""
    sides = [interference.Runs("baseline", tuple(measured.baseline_runs), tuple(measured.baseline_cpu),
                               host_bound(base), tuple(measured.baseline_machine)),
             interference.Runs("backend", tuple(measured.backend_runs), tuple(measured.backend_cpu),
                               host_bound(backend), tuple(measured.backend_machine))]
    found = interference.reasons(sides, load=measured.load, cores=cores, threads=threads)
    ratio = {s.label: (None if s.cpu_wall is None else round(s.cpu_wall, 3)) for s in sides}
    others = {s.label: (None if s.foreign_cores is None else round(s.foreign_cores, 3)) for s in sides}
    return {"load": measured.load, "baseline_cpu_wall": ratio["baseline"], "backend_cpu_wall": ratio["backend"],
            "baseline_foreign_cores": others["baseline"], "backend_foreign_cores": others["backend"],
            "reasons": found}


def _ms(values: list[float], iterations: int) -> list[float]:
    return [round(s / iterations * 1000, 4) for s in values]


class XlaTiming:
    """The ``xla_timing`` fixture: ``xla_timing.check_case(spec, backend)`` times a zoo case against the
    baseline (``--xla-baseline-backend``), records it and returns the record."""

    def __init__(self, session: XlaSession, item: pytest.Item, benchmark: Any) -> None:
        self.session = session
        self.item = item
        self.benchmark = benchmark

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str | None = None) -> CaseRecord:
        """Time ``spec`` on ``backend`` (mode: the ``xla_mode`` marker by default) and record it.

        Raises (after recording ``fail_to_run`` or ``eager_fail_to_run``) when a case cannot be built
        or stepped; skips under xdist with more than one worker and when ``backend`` is the baseline.
        """
        session, item, benchmark = self.session, self.item, self.benchmark
        config = session.config
        mode = case_mode(item, mode)
        workers = session.worker_count
        refusal = xdist_refusal(workers)
        if refusal is not None:
            pytest.skip(refusal)
        xcfg = session.xcfg
        base_backend = session.backends.get(xcfg.baseline_backend)
        if backend.name == base_backend.name:
            pytest.skip(f"{backend.name} is the timing baseline (--xla-baseline-backend): its speedup is 1 by "
                        "definition")
        unsupported = [b.name for b in (backend, base_backend) if not b.supports(mode)]
        if unsupported:
            raise pytest.UsageError(f"timing: backend {', '.join(unsupported)} does not support mode {mode!r}")
        iterations, repeat = xcfg.iterations_per_run, xcfg.repeat
        budget = session.thread_budget
        thread_info = {**budget.to_dict(), "torch": apply_torch_threads(budget.threads)}
        repro = repro_command(item.nodeid, xcfg, backend.name, timing=True, prefix=session.repro_prefix)
        base_fields: dict[str, Any] = dict(
            suite=SUITE, name=spec.name, backend=backend.name, mode=mode, repro=repro, dev=backend.device_kind,
            batch_size=spec.batch(xcfg.tier), tier=xcfg.tier, baseline=base_backend.name,
            iterations_per_run=iterations, repeat=repeat)
        context: dict[str, Any] = {
            "iterations_per_run": iterations, "repeat": repeat, "threads": budget.threads,
            "thread_budget": thread_info,
            "baseline_choice": "auto (PJRT_DEVICE)" if xcfg.baseline_auto else "--xla-baseline-backend"}

        def fail(status: str, exc: BaseException, what: str) -> None:
            session.record(item, CaseRecord(status=status, message=f"{what}: {exc!r}", **base_fields,
                                            extra=dict(context)))

        engine = session.engine
        try:
            baseline = engine.prepared(spec, base_backend, mode)
        except Exception as exc:
            fail("eager_fail_to_run" if base_backend.name == "eager" else "fail_to_run", exc,
                 f"baseline {base_backend.name}")
            raise
        try:
            case = engine.prepared(spec, backend, mode)
        except Exception as exc:
            fail("fail_to_run", exc, backend.name)
            raise
        assert case.warmup is not None and baseline.warmup is not None

        disabled = bool(getattr(benchmark, "disabled", True))
        user_disabled = disabled and _user_disabled(config)
        if user_disabled:
            timer = "none (--benchmark-disable: one run each, not measured)"
        elif benchmark is None:
            timer = TIMER_NO_BENCHMARK
        elif disabled:
            timer = TIMER_OWN.format(why=" under pytest-xdist" if workers else "")
        else:
            timer = TIMER_BENCHMARK
        if hasattr(benchmark, "group"):
            benchmark.group = BENCHMARK_GROUP.format(mode=mode)
        attempts: list[dict[str, Any]] = []
        try:
            if user_disabled:  # pytest-benchmark runs setup and target once
                measured = measure(case, baseline, iterations, 1, getattr(benchmark, "pedantic", None), prime=False)
            else:
                measured = measure(case, baseline, iterations, repeat, None if disabled else benchmark.pedantic)
                attempts.append(judge(measured, base_backend, backend, budget.cores, budget.threads))
                recompiles = measured.recompiles
                while attempts[-1]["reasons"] and len(attempts) <= interference.REMEASURE_LIMIT:
                    measured = measure(case, baseline, iterations, repeat, None)  # pedantic runs once per test
                    attempts.append(judge(measured, base_backend, backend, budget.cores, budget.threads))
                    recompiles += measured.recompiles
                    timer = TIMER_REMEASURED
                measured.recompiles = recompiles
        except Exception as exc:
            fail("fail_to_run", exc, f"timing {backend.name}")
            raise

        counts = case.warmup.figures(backend)
        comp_latency = compilation_latency(case.warmup.step_seconds, baseline.warmup.step_seconds)
        figures = measured.figures
        extra: dict[str, Any] = {
            **context, "timer": timer,
            "backend_runs_ms": _ms(measured.backend_runs, iterations),
            "baseline_runs_ms": _ms(measured.baseline_runs, iterations),
            "backend_cpu_ms": _ms(measured.backend_cpu, iterations),
            "baseline_cpu_ms": _ms(measured.baseline_cpu, iterations),
            "warmup_seconds": [round(s, 4) for s in case.warmup.step_seconds],
            "baseline_warmup_seconds": [round(s, 4) for s in baseline.warmup.step_seconds],
            "compilation_seconds": case.warmup.step_seconds[0],
            "timed_compiles": measured.recompiles, "xdist_workers": workers, "loadavg_1min": measured.load,
        }
        measured_fields: dict[str, Any] = dict(
            compilation_latency=comp_latency, recompiles=measured.recompiles, **counts, **base_fields)
        if user_disabled:
            record = CaseRecord(status=NOT_MEASURED, message="--benchmark-disable: run once, not timed",
                                **measured_fields, extra=extra)
            return session.record(item, record)

        columns, memory = memory_columns(base_backend, backend, device_memory(base_backend), device_memory(backend),
                                         isolated=session.child_output is not None)
        final = attempts[-1]
        extra.update({
            "speedup_statistic": SPEEDUP_STATISTIC, "baseline_spread": figures.baseline_spread,
            "backend_min_ms": round(figures.backend_min_ms, 4), "baseline_min_ms": round(figures.baseline_min_ms, 4),
            "baseline_cpu_wall": final["baseline_cpu_wall"], "backend_cpu_wall": final["backend_cpu_wall"],
            "interference": {"attempts": attempts, "remeasured": len(attempts) - 1, "reasons": final["reasons"]},
            "memory": memory, **columns})
        status, message = "pass", ""
        if final["reasons"]:
            status = UNRELIABLE
            message = (f"timing unreliable: {'; '.join(final['reasons'])} (measured {len(attempts)} times; the "
                       "speedup is kept but not trusted)")
        record = CaseRecord(
            status=status, message=message, speedup=figures.speedup, abs_latency=figures.abs_latency_ms,
            baseline_latency=figures.baseline_latency_ms, spread=figures.spread, **measured_fields, extra=extra)
        if hasattr(benchmark, "extra_info"):
            benchmark.extra_info.update({
                "model": spec.name, "backend": backend.name, "mode": mode, "baseline_backend": base_backend.name,
                "iterations_per_run": iterations, "repeat": repeat, "stats_unit": STATS_UNIT,
                "status": status, "speedup": record.speedup, "speedup_statistic": SPEEDUP_STATISTIC,
                "abs_latency_ms": record.abs_latency, "baseline_latency_ms": record.baseline_latency,
                "backend_min_ms": extra["backend_min_ms"], "baseline_min_ms": extra["baseline_min_ms"],
                "spread": record.spread, "threads": budget.threads, "interference": final["reasons"],
                "compilation_seconds": case.warmup.step_seconds[0], "compilation_latency": comp_latency,
                **counts, "timed_compiles": measured.recompiles, "timer": timer,
                "batch_size": record.batch_size, "tier": xcfg.tier,
            })
        if measured.recompiles:
            warnings.warn(pytest.PytestWarning(
                f"{item.nodeid}: {measured.recompiles} XLA compilation(s) during the timed runs of {backend.name} "
                f"(after {len(case.warmup.step_seconds)} warm-up steps): the steady-state time includes them"),
                stacklevel=2)
        if status == UNRELIABLE:
            warnings.warn(pytest.PytestWarning(f"{item.nodeid}: {message}"), stacklevel=2)
        return session.record(item, record)
