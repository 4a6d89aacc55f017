"""The census of what a model runs: module calls and torch.nn.functional calls in order, with a dropout's
probability and training flag, and what lies between a module and the next one with parameters."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
Tensor = Any  # torch is imported by importorskip: its types are not known to mypy here


def test_between_names_parameterless_modules_and_calls() -> None:
    from torch import nn

    from pytest_xla_dynamo.core.census import take

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.act, self.b = nn.Linear(4, 4), nn.ELU(), nn.Linear(4, 2)

        def forward(self, x: Tensor) -> Tensor:
            return self.b(torch.nn.functional.dropout(self.act(self.a(x)), 0.25, self.training))

    census = take(Net(), (torch.randn(2, 4),), True)
    assert [(e.kind, e.name, e.what) for e in census.between("a")] == [
        ("call", "act", "elu"), ("module", "act", "ELU"), ("call", "", "dropout")]
    drop = census.between("a")[-1]
    assert drop.floats == (("p", 0.25),) and drop.training is True
    assert take(Net(), (torch.randn(2, 4),), False).between("a")[-1].training is False


def test_attention_dropout_is_seen_with_its_probability() -> None:
    from torch import nn

    from pytest_xla_dynamo.core.census import take

    mha = nn.MultiheadAttention(8, 2, dropout=0.1)
    x = torch.randn(3, 2, 8)
    events = take(mha, (x, x, x), True).events
    call = next(e for e in events if e.what == "multi_head_attention_forward")
    assert call.floats == (("dropout_p", 0.1),) and call.training is True


def test_random_calls_are_the_ones_no_patch_reaches() -> None:
    """A functional dropout in a forward is a random call in training (not in eval); a Dropout module's call and
    MultiheadAttention's attention dropout are random calls the patch reaches (listed only with ``patchable``)."""
    from torch import nn

    from pytest_xla_dynamo.core.census import random_calls, random_ops, take

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.drop, self.attn = nn.Linear(4, 4), nn.Dropout(0.3), nn.MultiheadAttention(4, 2, dropout=0.1)

        def forward(self, x: Tensor) -> Tensor:
            h = torch.nn.functional.dropout(self.drop(self.a(x)), 0.25, self.training)
            return self.attn(h, h, h)[0]

    x = torch.randn(3, 2, 4)
    assert random_calls(take(Net(), (x,), True)) == ["(model) (dropout p=0.25)"]
    assert random_calls(take(Net(), (x,), True), patchable=True) == [
        "drop (dropout p=0.3)", "(model) (dropout p=0.25)", "attn (multi_head_attention_forward dropout_p=0.1)"]
    assert random_calls(take(Net(), (x,), False), patchable=True) == []
    net = Net()
    state = torch.random.get_rng_state()
    assert random_ops(net, (x,), True) == ["(model) (dropout p=0.25)"]
    assert torch.equal(torch.random.get_rng_state(), state)
