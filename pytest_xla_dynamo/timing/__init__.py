"""Timing: each backend's steady-state time per iteration against the baseline, through pytest-benchmark.

``stats`` (pure arithmetic: median, minimum, spread, speedup, compilation latency), ``measure`` (the
timed, interleaved runs: wall and CPU time), ``interference`` (pure rules: was a measurement disturbed?),
``threads`` (the thread budget, ``--xla-threads``), ``memory`` (peak memory where the device reports an
honest one), ``calibrate`` (pure: the iterations per run ``--xla-min-run-time`` asks for), ``noise`` (pure: the
speedup's own noise, for the speed gate) and ``check`` (the ``xla_timing`` fixture's object: one case timed,
judged and recorded).
Compilation happens in the prepared case's warm-up (:data:`pytest_xla_dynamo.core.cases.WARMUP_STEPS`
steps), before any timed run. No torch is imported at import time.
"""

from __future__ import annotations

from pytest_xla_dynamo.timing.measure import (
    Measurement,
    RunTime,
    interleaved,
    loadavg,
    measure,
    run_iterations,
    timed_run,
)
from pytest_xla_dynamo.timing.stats import Figures, compilation_latency, median, per_iteration, speedup, spread

__all__ = ["Figures", "Measurement", "RunTime", "compilation_latency", "interleaved", "loadavg", "measure",
           "median", "per_iteration", "run_iterations", "speedup", "spread", "timed_run"]
