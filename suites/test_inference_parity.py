"""Inference parity: each zoo model's outputs under each backend match CPU eager."""

import pytest

pytestmark = [pytest.mark.xla_mode("infer"), pytest.mark.xla_shared_case]


def test_inference_parity(xla_parity, xla_model, xla_backend):
    """The outputs of an eval-mode forward match eager."""
    xla_parity.check_case(xla_model, xla_backend, "infer")
