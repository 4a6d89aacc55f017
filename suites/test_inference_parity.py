"""Inference parity: each zoo model's outputs under each backend match CPU eager."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.parity import XlaParity
    from pytest_xla_dynamo.zoo import ModelSpec

pytestmark = [pytest.mark.xla_mode("infer"), pytest.mark.xla_shared_case]


def test_inference_parity(xla_parity: XlaParity, xla_model: ModelSpec, xla_backend: Backend) -> None:
    """The outputs of an eval-mode forward match eager."""
    xla_parity.check_case(xla_model, xla_backend)
