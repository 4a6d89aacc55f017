"""Tests of pytest_xla_dynamo.zoo.inputs: the image and token-id input factories and randomize_inputs (real torch)."""

from __future__ import annotations

import pytest

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.zoo import inputs

torch = pytest.importorskip("torch")


def test_public_name() -> None:
    assert zoo.randomize_inputs is inputs.randomize_inputs


def test_images() -> None:
    build = inputs.images({"small": 8, "full": 16})
    torch.manual_seed(0)
    (small,) = build("small", 3)
    (full,) = build("full", 1)
    assert small.shape == (3, 3, 8, 8) and full.shape == (1, 3, 16, 16)
    assert small.dtype == torch.float32 and not small.requires_grad
    torch.manual_seed(0)
    assert torch.equal(build("small", 3)[0], small)
    with pytest.raises(ValueError, match="unknown tier 'tiny'"):
        build("tiny", 1)


def test_token_ids() -> None:
    build = inputs.token_ids({"small": 5, "full": 50}, {"small": 4, "full": 9})
    torch.manual_seed(0)
    (small,) = build("small", 100)
    (full,) = build("full", 2)
    assert small.shape == (100, 4) and full.shape == (2, 9)
    assert small.dtype == torch.int64
    assert int(small.min()) == 0 and int(small.max()) == 4  # the whole range [0, 5) is drawn
    assert int(full.max()) < 50
    with pytest.raises(ValueError, match="unknown tier 'tiny'"):
        build("tiny", 1)


def test_randomize_inputs_replaces_floats_keeps_the_rest() -> None:
    x = torch.zeros(2, 3, requires_grad=True)
    ids = torch.arange(4)
    mask = torch.tensor([True, False])
    half = torch.zeros(2, dtype=torch.float16)
    out = zoo.randomize_inputs((x, [ids, (half, mask)], 7, "s"), seed=3)
    assert isinstance(out, tuple) and len(out) == 4
    fresh, (same_ids, (fresh_half, same_mask)), seven, text = out
    assert fresh.shape == x.shape and fresh.dtype == x.dtype and fresh.requires_grad
    assert not torch.equal(fresh, x)
    assert same_ids is ids and same_mask is mask
    assert isinstance(out[1], list) and isinstance(out[1][1], tuple)
    assert fresh_half.dtype == torch.float16 and not fresh_half.requires_grad
    assert (seven, text) == (7, "s")


def test_randomize_inputs_depends_only_on_the_seed() -> None:
    x = torch.zeros(5)
    torch.manual_seed(0)
    a = zoo.randomize_inputs([x], seed=11)
    torch.manual_seed(123)
    b = zoo.randomize_inputs([x], seed=11)
    c = zoo.randomize_inputs([x], seed=12)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(11)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert torch.equal(a[0], torch.randn(5, generator=gen))


def test_randomize_inputs_single_tensor() -> None:
    (out,) = zoo.randomize_inputs(torch.ones(2), seed=0)
    assert out.shape == (2,) and not torch.equal(out, torch.ones(2))
