"""Tensor modes: every zoo model's forward and backward, with real XLA tensors or fake ones.

The ``fake`` mode (default) runs under FakeTensorMode with XLA-device fake parameters and inputs:
no compile, so it is a fast smoke check of the whole zoo (shapes, dtypes, devices).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.core.devices import skip_reason

pytest.importorskip("torch", reason=skip_reason())

from pytest_xla_dynamo.core.cases import build_inputs, build_model
from pytest_xla_dynamo.core.tensor_modes import check_model

if TYPE_CHECKING:
    from pytest_xla_dynamo.config import XlaConfig
    from pytest_xla_dynamo.core.tensor_modes import TensorMode
    from pytest_xla_dynamo.zoo import ModelSpec


def test_forward_backward_signature(xla_model: ModelSpec, tensor_mode: TensorMode, xla_device: Any,
                                    xla_config_obj: XlaConfig) -> None:
    """Outputs and gradients have eager's shapes and dtypes, on the XLA device."""
    cfg = xla_config_obj
    model = build_model(xla_model, cfg.tier, cfg.seed, ())
    inputs = build_inputs(xla_model, cfg.tier, cfg.seed, cfg.randomize_input)
    problems = check_model(model, inputs, xla_model.loss, tensor_mode, xla_device)
    assert not problems, f"{tensor_mode.name} mode on {xla_device}: " + "; ".join(problems)
