"""Parity: a backend's training steps (or inference outputs) compared with CPU eager.

* :mod:`.compare` - tolerances, one tensor, a whole step; every divergence kept (:class:`Divergence`)
* :mod:`.run` - the eager reference (stored), the backend's run compared step by step, the vote (:func:`run`,
  :class:`ParityResult`)
* :mod:`.fixture` - :class:`XlaParity`, the ``xla_parity`` fixture's object (records and triage)
* :mod:`.plain_math` - eager's fast paths off for the references (:func:`plain_math`), and the check whether
  eager's fast path explains a failure

Training: identical initial weights and inputs; ``steps`` of zero_grad, forward, loss, backward and SGD
step on eager and on the backend, every tensor of every step compared (loss, outputs, gradients,
parameters, buffers) with ``torch._dynamo.utils.same`` against an fp64 reference, as pytorch's benchmark
harness does. Inference: the outputs. Importing this package imports no torch.
"""

from __future__ import annotations

from pytest_xla_dynamo.parity.compare import (
    DEFAULT_TOLERANCE,
    GROUPS,
    Divergence,
    Tolerance,
    compare_step,
    compare_tensor,
    divergence_lines,
    tolerance_for,
)
from pytest_xla_dynamo.parity.fixture import XlaParity
from pytest_xla_dynamo.parity.run import EagerError, ParityError, ParityResult, Reference, reference, run

__all__ = [
    "DEFAULT_TOLERANCE",
    "GROUPS",
    "Divergence",
    "EagerError",
    "ParityError",
    "ParityResult",
    "Reference",
    "Tolerance",
    "XlaParity",
    "compare_step",
    "compare_tensor",
    "divergence_lines",
    "reference",
    "run",
    "tolerance_for",
]
