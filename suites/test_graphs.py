"""Graph and fallback conformance: each zoo model's graph signature under each backend, checked
against its snapshot in ``snapshots/test_graphs/``.

The signature (see ``pytest_xla_dynamo.graphs.signature``) holds dynamo's captured graphs and graph breaks,
the XLA graphs built and executed per warm-up and per steady step, and the CPU fallbacks per
steady step. The cases are the parity suites' prepared models (compiled once per process), so
this suite compiles nothing of its own. A changed signature fails with the counters that changed
and a diff; a compilation after warm-up fails with its own message; ``--snapshot-update``
rewrites the snapshots. Run: ``pytest suites/test_graphs.py --xla-backend=trace_once,trace_everytime``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.graphs.check import GraphCheck
    from pytest_xla_dynamo.zoo import ModelSpec

pytestmark = pytest.mark.xla_shared_case


@pytest.mark.xla_mode("train")
def test_graph_signature_train(xla_graphs: GraphCheck, xla_model: ModelSpec, xla_backend: Backend) -> None:
    """Training steps: one combined graph per step without dynamo, forward/backward/optimizer
    graphs with it; no recompilation after warm-up; the signature matches its snapshot."""
    xla_graphs.check_case(xla_model, xla_backend)


@pytest.mark.xla_mode("infer")
def test_graph_signature_infer(xla_graphs: GraphCheck, xla_model: ModelSpec, xla_backend: Backend) -> None:
    """Inference forwards: no recompilation after warm-up; the signature matches its snapshot."""
    xla_graphs.check_case(xla_model, xla_backend)
