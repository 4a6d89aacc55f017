"""Training parity: each zoo model's steps under each backend match CPU eager."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.parity import XlaParity
    from pytest_xla_dynamo.zoo import ModelSpec

pytestmark = [pytest.mark.xla_mode("train"), pytest.mark.xla_shared_case]


def test_training_parity(xla_parity: XlaParity, xla_model: ModelSpec, xla_backend: Backend) -> None:
    """Loss, outputs, gradients, parameters and buffers of every step match eager."""
    xla_parity.check_case(xla_model, xla_backend)
