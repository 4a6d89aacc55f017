"""pytest-benchmark in a timing session: whether the ``xla_timing`` fixture asks for its ``benchmark`` fixture, the
test names it reads at collection, and what times the runs (a record's ``timer``).

pytest-benchmark's switches keep their meaning: ``--benchmark-skip`` skips the timing tests, ``--benchmark-disable``
runs each case once (one baseline run, one backend run) and records it as ``not_measured`` without a speedup. Under
pytest-xdist pytest-benchmark disables itself, so the fixture does not ask for ``benchmark`` (:func:`benchmark_wanted`:
it would only warn that it was not used), the runs are timed by the same interleaved loop with ``time.perf_counter``
and the record says so. pytest-benchmark stores the backend's seconds *per run*; the records' figures are per
iteration. Its per-case tables are grouped, one per mode (:data:`BENCHMARK_GROUP`).
"""

from __future__ import annotations

from typing import Any

import pytest

TIMER_BENCHMARK = "pytest-benchmark pedantic (perf_counter)"
TIMER_OWN = "perf_counter loop (pytest-benchmark disabled itself{why})"
TIMER_NO_BENCHMARK = "perf_counter loop (the test does not use pytest-benchmark's benchmark fixture)"
TIMER_REMEASURED = ("perf_counter loop (re-measured after interference; pytest-benchmark's figures are the "
                    "first attempt's)")
TIMER_USER_DISABLED = "none (--benchmark-disable: one run each, not measured)"
STATS_UNIT = "seconds per timed run of calibrated_iterations_per_run iterations"
BENCHMARK_GROUP = "xla-dynamo timing: {mode}"  # one pytest-benchmark table per mode


def user_disabled(config: pytest.Config) -> bool:
    """``--benchmark-disable`` given (and not overridden by ``--benchmark-enable``)."""
    return bool(config.getoption("benchmark_disable", False)) and not config.getoption("benchmark_enable", False)


def benchmark_off(config: pytest.Config) -> bool:
    """Whether pytest-benchmark is installed and turned itself off: under pytest-xdist (controller and workers),
    or without ``statistics``. Not ``--benchmark-disable`` (the user's: it runs each case once through the
    fixture) nor ``--benchmark-skip`` (the fixture skips the test)."""
    bench = getattr(config, "_benchmarksession", None)
    return bench is not None and bool(bench.disabled) and not bench.skip and not user_disabled(config)


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


def timer(config: pytest.Config, benchmark: Any, workers: int) -> tuple[str, bool, bool]:
    """(what times the runs, whether pytest-benchmark is disabled, whether the user disabled it) for a test whose
    ``benchmark`` fixture is ``benchmark`` (None: not asked for) with ``workers`` xdist workers."""
    disabled = bool(getattr(benchmark, "disabled", True))
    by_user = disabled and user_disabled(config)
    if by_user:
        text = TIMER_USER_DISABLED
    elif benchmark is None and not benchmark_off(config):
        text = TIMER_NO_BENCHMARK
    elif disabled:
        text = TIMER_OWN.format(why=" under pytest-xdist" if workers else "")
    else:
        text = TIMER_BENCHMARK
    return text, disabled, by_user
