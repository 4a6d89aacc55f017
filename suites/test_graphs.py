"""Graph and fallback conformance: each zoo model's graph signature under each backend, checked
against its snapshot in ``snapshots/test_graphs/``.

The signature (see ``pytest_xla_dynamo.graphs``) holds dynamo's captured graphs and graph breaks,
the XLA graphs built and executed per warm-up and per steady step, and the CPU fallbacks per
steady step. The cases are the parity suites' prepared models (compiled once per process), so
this suite compiles nothing of its own. A changed signature fails with the counters that changed
and a diff; a compilation after warm-up fails with its own message; ``--snapshot-update``
rewrites the snapshots. Run: ``pytest suites/test_graphs.py --xla-backend=trace_once,trace_everytime``.
"""

import pytest

pytest.importorskip("syrupy")

pytest_plugins = ["pytest_xla_dynamo.graphs"]  # the xla_graphs and xla_snapshot fixtures

pytestmark = pytest.mark.xla_shared_case


@pytest.mark.xla_mode("train")
def test_graph_signature_train(xla_graphs, xla_model, xla_backend):
    """Training steps: one combined graph per step without dynamo, forward/backward/optimizer
    graphs with it; no recompilation after warm-up; the signature matches its snapshot."""
    xla_graphs.check_case(xla_model, xla_backend, "train")


@pytest.mark.xla_mode("infer")
def test_graph_signature_infer(xla_graphs, xla_model, xla_backend):
    """Inference forwards: no recompilation after warm-up; the signature matches its snapshot."""
    xla_graphs.check_case(xla_model, xla_backend, "infer")
