"""Timing: each zoo model's steady-state step under each backend against the baseline
(``--xla-baseline-backend``, ``auto``: CPU eager where the XLA device is the CPU, else trace everytime).

Compilation is warm-up (measured apart, as compilation latency); the timed runs go through
pytest-benchmark: ``xla_timing`` uses its ``benchmark`` fixture, so that ``--benchmark-skip``,
``--benchmark-json`` and the rest apply, except under pytest-xdist, where pytest-benchmark turns itself off
and the plugin times the runs with its own loop (the speedup tables are the same). Each case runs with the
thread budget (``xla_threads``), and a case disturbed by other load is re-measured, then recorded
``unreliable``. See ``pytest_xla_dynamo.timing`` for what is measured and how. Under xdist workers the timed
runs have the machine alone (the machine lock); alone, e.g.
``pytest suites/test_timing.py --xla-backend=trace_once,trace_everytime --xla-iterations-per-run=10``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.timing.check import XlaTiming
    from pytest_xla_dynamo.zoo import ModelSpec

pytest.importorskip("pytest_benchmark", reason="the timing suite needs pytest-benchmark: pip install pytest-benchmark")

pytestmark = [pytest.mark.xla_shared_case]


@pytest.mark.xla_mode("train")
def test_timing_train(xla_timing: XlaTiming, xla_model: ModelSpec, xla_backend: Backend) -> None:
    """Training steps (zero_grad, forward, loss, backward, SGD step) per second against the baseline."""
    xla_timing.check_case(xla_model, xla_backend)


@pytest.mark.xla_mode("infer")
def test_timing_infer(xla_timing: XlaTiming, xla_model: ModelSpec, xla_backend: Backend) -> None:
    """Inference forwards per second against the baseline."""
    xla_timing.check_case(xla_model, xla_backend)
