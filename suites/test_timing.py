"""Timing: each zoo model's steady-state step under each backend against the baseline (CPU eager).

Compilation is warm-up (measured apart, as compilation latency); the timed runs go through
pytest-benchmark. See ``pytest_xla_dynamo.timing`` for what is measured and how. Run it alone, without
xdist workers competing for the cores, e.g.
``pytest suites/test_timing.py --xla-backend=trace_once,trace_everytime --xla-iterations-per-run=10``.
"""

import pytest

from pytest_xla_dynamo.timing import run_timing

pytestmark = [pytest.mark.xla_shared_case]


@pytest.mark.xla_mode("train")
def test_timing_train(request, benchmark, xla_model, xla_backend):
    """Training steps (zero_grad, forward, loss, backward, SGD step) per second against the baseline."""
    run_timing(request, benchmark, xla_model, xla_backend, "train")


@pytest.mark.xla_mode("infer")
def test_timing_infer(request, benchmark, xla_model, xla_backend):
    """Inference forwards per second against the baseline."""
    run_timing(request, benchmark, xla_model, xla_backend, "infer")
