"""Test-only: slow the backend side of the timing cases by a known fraction (the injected regression of
``benchmarks/timing_gate.py``). Never the baseline.

    XLA_GATE_SLOWDOWN=0.10 python -m pytest suites/test_timing.py -p benchmarks.slowdown_plugin ...

(from the repository's root, so that ``benchmarks`` is importable). After every run of
:func:`pytest_xla_dynamo.timing.measure.run_iterations` of a case whose backend is slowed (the timed runs, and
the untimed prime step the calibration reads), after its device wait, it runs CPU matmuls (``torch.mm`` of
two 128 x 128 float32 matrices, on the thread budget the case runs with) for F / (1 - F) of that run's own
wall time, so the backend's time per iteration grows by 1 / (1 - F) and its speedup falls to (1 - F) x
what it was: F = 0.10 is a speedup 10% lower, the drop ``--xla-min-speedup-ratio=0.9`` is meant to catch.
The work is counted in matmuls (timed once per process), not spun to a deadline, so it is real work with
the machine's noise, done after the wait so that nothing overlaps it.

``XLA_GATE_SLOWDOWN``: F, 0 <= F < 1 (0 or unset: nothing is slowed; the plugin can then be loaded in the
unmodified runs too, so that every process of a comparison loads the same code). ``XLA_GATE_SLOWDOWN_BACKENDS``: the
backends to slow, comma list (default: every backend but the session's ``--xla-baseline-backend``); naming the
baseline is a usage error. Each slowed run's extra matmuls are counted in the record's ``extra`` as
``injected_matmuls`` (total over the case's runs, and over its processes), for the script to check.

Under ``--xla-timing-processes M`` the children time the case (each loads this plugin, ``-p`` is forwarded) and
the parent combines their records: a child's record is left a plain timing record, which the parent can read
back with its typed figures (the injected keys would make it uninterpreted, and the parent would then keep the
first process's figure instead of the median of M: the slowed side of the stop-38 gate runs). A child adds its
count to a file the parent names in ``XLA_GATE_SLOWDOWN_COUNTS``; the parent sums them into its record.

``XLA_GATE_IGNORE_INTERFERENCE=1`` (test-only, for a demonstration on a loaded machine): the interference
rules (:mod:`pytest_xla_dynamo.timing.interference`) find nothing, so no record is ``unreliable`` and the gate
judges every figure. The figures of such a run say nothing about the gate's false-alarm rate; they show its
verdicts work.
"""

from __future__ import annotations

import importlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

SIZE = 128
ENV = "XLA_GATE_SLOWDOWN"
ENV_BACKENDS = "XLA_GATE_SLOWDOWN_BACKENDS"
ENV_IGNORE = "XLA_GATE_IGNORE_INTERFERENCE"
ENV_COUNTS = "XLA_GATE_SLOWDOWN_COUNTS"

_state: dict[str, Any] = {"fraction": 0.0, "backends": None, "baseline": None, "matmul": None, "count": 0}


def _fraction() -> float:
    raw = os.environ.get(ENV, "").strip()
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        raise pytest.UsageError(f"{ENV}: invalid value {raw!r}; valid: a number 0 <= F < 1") from None
    if not 0 <= value < 1:
        raise pytest.UsageError(f"{ENV}: invalid value {raw!r}; valid: a number 0 <= F < 1")
    return value


def _matmul_seconds() -> float:
    """Seconds of one ``torch.mm`` of the working size (median of 5 blocks of 50, after a warm block)."""
    if _state["matmul"] is None:
        import torch

        a, b = torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)
        blocks = []
        for _ in range(6):
            start = time.perf_counter()
            for _ in range(50):
                torch.mm(a, b)
            blocks.append((time.perf_counter() - start) / 50)
        _state["matmul"] = (statistics.median(blocks[1:]), a, b)
    return float(_state["matmul"][0])


def extra_work(seconds: float) -> int:
    """Run matmuls for about ``seconds`` (counted from the timed matmul); how many ran."""
    import torch

    per = _matmul_seconds()
    _, a, b = _state["matmul"]
    count = max(0, round(seconds / per))
    for _ in range(count):
        torch.mm(a, b)
    return count


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(ENV_IGNORE, "").strip() in ("1", "true", "yes", "on"):
        interference = importlib.import_module("pytest_xla_dynamo.timing.interference")
        interference.reasons = lambda *args, **kwargs: []  # type: ignore[attr-defined]
    fraction = _fraction()
    _state["fraction"] = fraction
    if not fraction:
        return
    if not os.environ.get(ENV_COUNTS):  # the parent (its timing children inherit the variable): they add counts here
        handle, name = tempfile.mkstemp(prefix="xla-gate-slowdown-", suffix=".txt")
        os.close(handle)
        os.environ[ENV_COUNTS] = _state["counts"] = name
    measure = importlib.import_module("pytest_xla_dynamo.timing.measure")  # the module (timing.measure is its function)
    original = measure.run_iterations

    def run_iterations(case: Any, iterations: int) -> None:
        start = time.perf_counter()
        original(case, iterations)
        if _slowed(config, case.backend.name):
            elapsed = time.perf_counter() - start
            _state["count"] += extra_work(elapsed * fraction / (1.0 - fraction))

    measure.run_iterations = run_iterations  # type: ignore[attr-defined]


def _slowed(config: pytest.Config, backend: str) -> bool:
    if _state["backends"] is None:
        from pytest_xla_dynamo.timing.settings import timing_settings

        baseline = timing_settings(config).baseline_backend
        named = [b.strip() for b in os.environ.get(ENV_BACKENDS, "").split(",") if b.strip()]
        if baseline in named:
            raise pytest.UsageError(f"{ENV_BACKENDS}: {baseline} is the timing baseline; the slowdown is for the "
                                    "backend side only")
        _state["baseline"] = baseline
        _state["backends"] = set(named) if named else None
        if not named:
            _state["backends"] = {"*"}
    backends: set[str] = _state["backends"]
    return backend != _state["baseline"] and ("*" in backends or backend in backends)


def _children_count() -> int:
    """The matmuls the parent's timing children ran since the last call (their file emptied)."""
    name = _state.get("counts")
    if not name:
        return 0
    path = Path(name)
    total = sum(int(line) for line in path.read_text().split())
    path.write_text("")
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """The matmuls a test's slowed runs added (its own and its timing children's), in its timing record's
    ``extra``; a child only reports its count to the parent (module docstring)."""
    _state["count"] = 0
    yield
    if not _state["fraction"]:
        return
    from pytest_xla_dynamo.session import get_session

    if get_session(item.config).child_output is not None:
        if name := os.environ.get(ENV_COUNTS):
            with open(name, "a", encoding="utf-8") as handle:
                handle.write(f"{_state['count']}\n")
        return
    count = _state["count"] + _children_count()
    for record in reversed(list(get_session(item.config).store)):
        if record.nodeid == item.nodeid and record.suite == "timing":
            # beside the typed figures, as a key the package does not write: a slowed run's report reads back
            # with its timing figures uninterpreted, so it cannot serve as anyone's baseline
            record.unparsed_extra["injected_slowdown"] = _state["fraction"]
            record.unparsed_extra["injected_matmuls"] = count
            break


def pytest_unconfigure(config: pytest.Config) -> None:
    if name := _state.pop("counts", None):
        Path(name).unlink(missing_ok=True)
