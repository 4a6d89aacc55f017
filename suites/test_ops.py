"""Op conformance: every selected OpInfo entry of torch, forward and backward, on each backend, against eager."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.ops.plugin import OpCheck


def test_op(xla_ops: OpCheck, xla_op: str, xla_backend: Backend, xla_direction: str) -> None:
    """The op's outputs (forward) or gradients (backward) on the backend match CPU eager, sample by sample."""
    xla_ops.check(xla_op, xla_backend, xla_direction)
