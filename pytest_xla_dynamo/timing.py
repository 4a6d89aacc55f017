"""Timing: each backend's steady-state time per iteration against the baseline, through pytest-benchmark.

One *timed run* is ``--xla-iterations-per-run`` N iterations of :meth:`PreparedCase.step` (each ending
in ``torch_xla.sync()``) followed by one ``xm.wait_device_ops()``, so tracing of step i+1 overlaps the
execution of step i, as in the seed (pytorch PR #88449) and pytorch's ``benchmarks/dynamo`` ``timed()``.
Before the first timed run both cases are reset to their initial weights, synced and waited on.
``--xla-repeat`` R runs of the baseline (``--xla-baseline-backend``, default CPU ``eager``) and of the
backend interleave, baseline first, so that machine drift cancels: pytest-benchmark's
``benchmark.pedantic(target=<backend run>, setup=<baseline run>, rounds=R, iterations=1)`` calls the
setup before each round, outside its timed region. pytest-benchmark therefore stores the backend's
seconds *per run* (its ``--benchmark-json``/``--benchmark-autosave``/``--benchmark-compare`` work as
usual; ``extra_info`` carries the context); the figures recorded here are per iteration:

* ``abs_latency`` = median(backend run seconds / N) in ms, ``baseline_latency`` likewise;
* ``speedup`` = median(baseline) / median(backend);
* ``spread`` = (max - min) / median of the backend's per-iteration times;
* ``compilation_latency`` = the backend's first warm-up step minus the baseline's (seconds, the
  harness's "first compiled call minus first eager call"). Compilation happens in the prepared case's
  warm-up (:data:`pytest_xla_dynamo.cases.WARMUP_STEPS` steps), before any timed run; XLA compilations
  during the timed runs are counted (``recompiles``) and warned about, since they would pollute the
  steady figure.

pytest-benchmark's switches keep their meaning: ``--benchmark-skip`` skips the timing tests,
``--benchmark-disable`` runs each case once (one baseline run, one backend run) and records it as
``not_measured`` without a speedup. Under pytest-xdist with more than one worker, timing is refused
(a skip naming the fix): the workers would compete for the cores. With one worker (``-n 1``)
pytest-benchmark disables itself, so the runs are timed by the same interleaved loop with
``time.perf_counter`` and the record says so (``extra["timer"]``).

No torch is imported at import time.
"""

from __future__ import annotations

import math
import os
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.config import get_config
from pytest_xla_dynamo.records import CaseRecord, record_case

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.backends import Backend
    from pytest_xla_dynamo.cases import PreparedCase, Warmup

SUITE = "timing"
NOT_MEASURED = "not_measured"  # status of a case run with --benchmark-disable
TIMER_BENCHMARK = "pytest-benchmark pedantic (perf_counter)"
TIMER_OWN = "perf_counter loop (pytest-benchmark disabled itself{why})"
STATS_UNIT = "seconds per timed run of iterations_per_run iterations"


# --- the arithmetic ---------------------------------------------------------------------------------


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
    def spread(self) -> float:
        return spread(self.backend)

    @property
    def baseline_spread(self) -> float:
        return spread(self.baseline)


# --- xdist --------------------------------------------------------------------------------------------


def xdist_workers(config: pytest.Config, environ: dict[str, str] | None = None) -> int:
    """The number of pytest-xdist workers of this session as seen from a worker (0: not under xdist)."""
    env = os.environ if environ is None else environ
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, dict) and workerinput.get("workercount"):
        return int(workerinput["workercount"])
    count = env.get("PYTEST_XDIST_WORKER_COUNT", "")
    if count.strip().isdigit():
        return int(count)
    if workerinput is not None or env.get("PYTEST_XDIST_WORKER"):
        return 2  # a worker that does not say how many: assume it has company
    return 0


def xdist_refusal(config: pytest.Config, environ: dict[str, str] | None = None) -> str | None:
    """Why timing is refused in this process (None: it may time)."""
    workers = xdist_workers(config, environ)
    if workers <= 1:
        return None
    cores = os.cpu_count() or 1
    return (f"timing is refused under pytest-xdist with {workers} workers: the workers compete for the "
            f"{cores} core{'s' if cores != 1 else ''}, so the timings would be wrong; run the timing suite "
            f"(suites/test_timing.py) with -n 0 (or -n 1)")


# --- the timed runs -----------------------------------------------------------------------------------


def run_iterations(case: PreparedCase, iterations: int) -> None:
    """One timed run's work: ``iterations`` steps (each ends in the backend's sync), then one wait."""
    for _ in range(iterations):
        case.step()
    case.backend.wait()


def timed_run(case: PreparedCase, iterations: int) -> float:
    """Seconds of one :func:`run_iterations`."""
    start = time.perf_counter()
    run_iterations(case, iterations)
    return time.perf_counter() - start


Pedantic = Callable[..., Any]


def interleaved(target: Callable[[], None], setup: Callable[[], None], rounds: int) -> None:
    """pytest-benchmark's ``pedantic(target, setup=setup, rounds=R, iterations=1)`` without it."""
    for _ in range(rounds):
        setup()
        target()


@dataclass
class Measurement:
    """The raw result of :func:`measure`: seconds per timed run, and the XLA compiles during them."""

    backend_runs: list[float] = field(default_factory=list)
    baseline_runs: list[float] = field(default_factory=list)
    recompiles: int = 0
    iterations_per_run: int = 1

    @property
    def figures(self) -> Figures:
        return Figures.from_runs(self.backend_runs, self.baseline_runs, self.iterations_per_run)


def measure(case: PreparedCase, baseline: PreparedCase, iterations: int, repeat: int,
            pedantic: Pedantic | None = None, prime: bool = True) -> Measurement:
    """Time ``repeat`` interleaved runs of ``baseline`` then ``case``, ``iterations`` steps each.

    ``pedantic`` is ``benchmark.pedantic`` (it times the backend's runs for pytest-benchmark; the
    baseline's run is its ``setup``); None runs the same interleaving directly. Both cases must be
    warmed up: compilation is not part of what is timed here.
    """
    from pytest_xla_dynamo import metrics

    result = Measurement(iterations_per_run=iterations)
    for c in (baseline, case):
        c.reset()  # initial weights, then sync
        if prime:
            run_iterations(c, 1)  # untimed: wakes the thread pools (the warm-up may be long past)
        c.backend.sync()
        c.backend.wait()  # before the first timed run: nothing pending on the device
    before = metrics.snapshot()

    def baseline_run() -> None:
        result.baseline_runs.append(timed_run(baseline, iterations))

    def backend_run() -> None:
        result.backend_runs.append(timed_run(case, iterations))

    if pedantic is None:
        interleaved(backend_run, baseline_run, repeat)
    else:
        pedantic(target=backend_run, setup=baseline_run, rounds=repeat, iterations=1, warmup_rounds=0)
    after = metrics.snapshot().delta(before)
    result.recompiles = after.compiles
    # pytest-benchmark may call the target again after the rounds (--benchmark-cprofile): not timed runs
    del result.backend_runs[repeat:]
    del result.baseline_runs[repeat:]
    return result


# --- graph figures from the warm-up -------------------------------------------------------------------


def warmup_counts(warmup: Warmup, backend: Backend) -> dict[str, int | None]:
    """Graph figures of the backend's warm-up: dynamo's (where it uses dynamo) and XLA's compiles."""
    total = warmup.total
    uses_dynamo = backend.dynamo_backend is not None
    stats = total.dynamo.get("stats", {})
    breaks = total.graph_breaks
    return {
        "unique_graphs": int(stats.get("unique_graphs", 0)) if uses_dynamo else None,
        "calls_captured": int(stats.get("calls_captured", 0)) if uses_dynamo else None,
        "graph_breaks": int(sum(breaks.values())) if uses_dynamo else None,
        "unique_graph_breaks": len(breaks) if uses_dynamo else None,
        "compiles": total.compiles if backend.is_xla else None,
    }


# --- the suite's entry point --------------------------------------------------------------------------


def _repro(nodeid: str, config: pytest.Config, backend: str) -> str:
    from pytest_xla_dynamo.parity import repro_command

    xcfg = get_config(config)
    text = repro_command(nodeid, xcfg, backend)
    text += f" --xla-iterations-per-run={xcfg.iterations_per_run} --xla-repeat={xcfg.repeat}"
    if xcfg.baseline_backend != "eager":
        text += f" --xla-baseline-backend={xcfg.baseline_backend}"
    return text + " -p no:xdist"


def _user_disabled(config: pytest.Config) -> bool:
    """``--benchmark-disable`` given (and not overridden by ``--benchmark-enable``)."""
    return bool(config.getoption("benchmark_disable", False)) and not config.getoption("benchmark_enable", False)


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # not on every platform
        return None


def run_timing(request: pytest.FixtureRequest, benchmark: Any, spec: zoo.ModelSpec, backend: Backend,
               mode: str) -> CaseRecord:
    """Time ``spec`` on ``backend`` in ``mode`` against the baseline, record it, and return the record.

    ``benchmark`` is pytest-benchmark's fixture. Raises (after recording ``fail_to_run`` or
    ``eager_fail_to_run``) when a case cannot be built or stepped; skips under xdist with more than
    one worker and when ``backend`` is the baseline itself.
    """
    from pytest_xla_dynamo.parity import engine_for
    from pytest_xla_dynamo.plugin import backend_registry

    config = request.config
    item = request.node
    assert isinstance(item, pytest.Item)
    refusal = xdist_refusal(config)
    if refusal is not None:
        pytest.skip(refusal)
    xcfg = get_config(config)
    base_backend = backend_registry(config).get(xcfg.baseline_backend)
    if backend.name == base_backend.name:
        pytest.skip(f"{backend.name} is the timing baseline (--xla-baseline-backend): its speedup is 1 by "
                    "definition")
    unsupported = [b.name for b in (backend, base_backend) if not b.supports(mode)]
    if unsupported:
        raise pytest.UsageError(f"timing: backend {', '.join(unsupported)} does not support mode {mode!r}")
    iterations, repeat = xcfg.iterations_per_run, xcfg.repeat
    repro = _repro(item.nodeid, config, backend.name)
    workers = xdist_workers(config)
    base_fields: dict[str, Any] = dict(
        suite=SUITE, name=spec.name, backend=backend.name, mode=mode, repro=repro, dev=backend.device_kind,
        batch_size=spec.batch(xcfg.tier), tier=xcfg.tier, baseline=base_backend.name,
        iterations_per_run=iterations, repeat=repeat)

    def fail(status: str, exc: BaseException, what: str) -> None:
        record_case(item, CaseRecord(status=status, message=f"{what}: {exc!r}", **base_fields,
                                     extra={"iterations_per_run": iterations, "repeat": repeat}))

    engine = engine_for(config)
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
    elif disabled:
        timer = TIMER_OWN.format(why=" under pytest-xdist" if workers else "")
    else:
        timer = TIMER_BENCHMARK
    if hasattr(benchmark, "group"):
        benchmark.group = f"{mode} {spec.name}"
    try:
        if user_disabled:  # pytest-benchmark runs setup and target once
            measured = measure(case, baseline, iterations, 1, benchmark.pedantic, prime=False)
        elif disabled:
            measured = measure(case, baseline, iterations, repeat, None)
        else:
            measured = measure(case, baseline, iterations, repeat, benchmark.pedantic)
    except Exception as exc:
        fail("fail_to_run", exc, f"timing {backend.name}")
        raise

    counts = warmup_counts(case.warmup, backend)
    comp_latency = compilation_latency(case.warmup.step_seconds, baseline.warmup.step_seconds)
    figures = measured.figures
    extra: dict[str, Any] = {
        "iterations_per_run": iterations, "repeat": repeat, "timer": timer,
        "backend_runs_ms": [round(s * 1000, 4) for s in figures.backend],
        "baseline_runs_ms": [round(s * 1000, 4) for s in figures.baseline],
        "warmup_seconds": [round(s, 4) for s in case.warmup.step_seconds],
        "baseline_warmup_seconds": [round(s, 4) for s in baseline.warmup.step_seconds],
        "compilation_seconds": case.warmup.step_seconds[0],
        "timed_compiles": measured.recompiles, "xdist_workers": workers, "loadavg_1min": _loadavg(),
    }
    measured_fields: dict[str, Any] = dict(
        compilation_latency=comp_latency, unique_graphs=counts["unique_graphs"], graph_breaks=counts["graph_breaks"],
        unique_graph_breaks=counts["unique_graph_breaks"], calls_captured=counts["calls_captured"],
        compiles=counts["compiles"], recompiles=measured.recompiles, **base_fields)
    if user_disabled:
        record = CaseRecord(status=NOT_MEASURED, message="--benchmark-disable: run once, not timed",
                            **measured_fields, extra=extra)
        return record_case(item, record)

    extra["baseline_spread"] = figures.baseline_spread
    record = CaseRecord(
        status="pass", speedup=figures.speedup, abs_latency=figures.abs_latency_ms,
        baseline_latency=figures.baseline_latency_ms, spread=figures.spread, **measured_fields, extra=extra)
    if hasattr(benchmark, "extra_info"):
        benchmark.extra_info.update({
            "model": spec.name, "backend": backend.name, "mode": mode, "baseline_backend": base_backend.name,
            "iterations_per_run": iterations, "repeat": repeat, "stats_unit": STATS_UNIT,
            "speedup": record.speedup, "abs_latency_ms": record.abs_latency,
            "baseline_latency_ms": record.baseline_latency, "spread": record.spread,
            "compilation_seconds": case.warmup.step_seconds[0], "compilation_latency": comp_latency,
            "unique_graphs": counts["unique_graphs"], "graph_breaks": counts["graph_breaks"],
            "calls_captured": counts["calls_captured"], "compiles": counts["compiles"],
            "timed_compiles": measured.recompiles, "timer": timer, "batch_size": record.batch_size,
            "tier": xcfg.tier,
        })
    if measured.recompiles:
        warnings.warn(pytest.PytestWarning(
            f"{item.nodeid}: {measured.recompiles} XLA compilation(s) during the timed runs of {backend.name} "
            f"(after {len(case.warmup.step_seconds)} warm-up steps): the steady-state time includes them"),
            stacklevel=2)
    return record_case(item, record)
