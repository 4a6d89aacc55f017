"""Dropout on XLA itself (the seed's pytorch#90097 class of bug: a cached graph replaying one mask)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.core.devices import skip_reason

if TYPE_CHECKING:
    from pytest_xla_dynamo.config import XlaConfig
    from pytest_xla_dynamo.core.backends import Backend

torch = pytest.importorskip("torch", reason=skip_reason())

pytestmark = pytest.mark.xla_mode("train")

STEPS = 3


def _masks(fn: Callable[[Any], Any], x: Any, seed: int) -> list[Any]:
    import torch_xla

    torch_xla.manual_seed(seed)
    masks = []
    for _ in range(STEPS):
        out = fn(x)
        torch_xla.sync()
        masks.append((out == 0).cpu())
    return masks


@pytest.mark.xla_backend("trace_once", "trace_everytime")
def test_dropout_masks_change_per_step(xla_backend: Backend, xla_device: Any, xla_config_obj: XlaConfig) -> None:
    """Under one seed, each step draws a new mask; the same seed draws the same masks again."""
    model = torch.nn.Dropout(p=0.5).train()
    fn = xla_backend.wrap(model)
    x = torch.ones(64, 64, device=xla_device)
    fn(x)  # compile outside the seeded runs: compiling may draw random numbers of its own
    first = _masks(fn, x, xla_config_obj.seed)
    for step, (a, b) in enumerate(pairwise(first), start=1):
        assert not torch.equal(a, b), f"{xla_backend.name}: step {step + 1} replayed the mask of step {step}"
    for step, mask in enumerate(first, start=1):
        rate = mask.float().mean().item()
        assert 0.4 < rate < 0.6, f"{xla_backend.name}: step {step} dropped {rate:.0%} of elements, p=0.5"
    again = _masks(fn, x, xla_config_obj.seed)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True)), (
        f"{xla_backend.name}: torch_xla.manual_seed({xla_config_obj.seed}) did not reproduce the masks")
