"""Training parity: each zoo model's steps under each backend match CPU eager."""

import pytest

pytestmark = [pytest.mark.xla_mode("train"), pytest.mark.xla_shared_case]


def test_training_parity(xla_parity, xla_model, xla_backend):
    """Loss, outputs, gradients, parameters and buffers of every step match eager."""
    xla_parity.check_case(xla_model, xla_backend, "train")
