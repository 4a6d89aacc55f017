"""Graph and fallback conformance: each case's graph signature, checked against a syrupy snapshot.

``signature`` (pure: the signature, recompiles, conformance, diffs), ``snapshots`` (syrupy storage;
imported only where syrupy is installed) and ``check`` (the ``xla_graphs`` fixture's object).
"""

from __future__ import annotations

from pytest_xla_dynamo.graphs.signature import (
    SIGNATURE_VERSION,
    STEADY_STEPS,
    build_signature,
    clean_reason,
    conformance_problems,
    diff_signatures,
    recompiles,
)

__all__ = ["SIGNATURE_VERSION", "STEADY_STEPS", "build_signature", "clean_reason", "conformance_problems",
           "diff_signatures", "recompiles"]
