"""Model sizes on the meta device, the collection's largest-first order: counted without weights, a model that
cannot be built there is unknown (last), equal sizes keep their order."""

from __future__ import annotations

from typing import Any

import pytest
from sample_data import buildable, toy_spec

from pytest_xla_dynamo.core import sizes

torch = pytest.importorskip("torch")


def _linear(n: int) -> Any:
    def build(tier: str) -> Any:
        layer = torch.nn.Linear(n, n)  # n*n weights and n biases
        assert layer.weight.device.type == "meta", "built on the meta device"
        layer.register_buffer("steps", torch.zeros(3))
        layer.tied = layer.weight  # an alias: counted once
        return layer
    return build


def _fails(tier: str) -> Any:
    raise RuntimeError("needs real tensors")


def test_element_count_counts_parameters_and_buffers_once_on_meta() -> None:
    assert sizes.element_count(toy_spec(build_model=_linear(10)), "small") == 10 * 10 + 10 + 3
    assert sizes.element_count(toy_spec(build_model=_fails), "small") is None
    assert sizes.element_count(toy_spec(requires=("no_such_library_xyz",)), "small") is None


def test_largest_first_keeps_ties_and_puts_unknown_last() -> None:
    specs = [toy_spec("a", build_model=_linear(4)), toy_spec("broken", build_model=_fails),
             toy_spec("b", build_model=_linear(8)), toy_spec("c", build_model=_linear(4))]
    assert sizes.largest_first(specs, "small") == ["b", "a", "c", "broken"]


def test_the_seed_models_by_size() -> None:
    """vgg16 (138M parameters) before alexnet (57M at the small tier's 10 classes) before resnet18 (11M); the
    count is the one a real build has."""
    names = ["resnet18", "alexnet", "vgg16"]
    specs = [buildable(n) for n in names]
    assert sizes.largest_first(specs, "small") == ["vgg16", "alexnet", "resnet18"]
    real = specs[0].build_model("small")
    assert sizes.element_count(specs[0], "small") == sum(t.numel() for t in (*real.parameters(), *real.buffers()))
