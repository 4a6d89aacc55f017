"""patches.py, unit tests with torch: what the plugin's autouse fixture activates for a test, undone after.

Without torch (a test that asked for patches skips, any other is left alone): test_faults.py, in a
virtual environment that has no torch.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_xla_dynamo import patches

torch = pytest.importorskip("torch")
from torch.nn.modules import dropout, pooling  # noqa: E402


class Item:
    def __init__(self, *marks: pytest.MarkDecorator, fixturenames: tuple[str, ...] = ()) -> None:
        self.marks = [m.mark for m in marks]
        self.fixturenames = fixturenames

    def iter_markers(self, name: str | None = None) -> Any:
        return (m for m in self.marks if name is None or m.name == name)


def test_activate_swaps_and_restores() -> None:
    with patches.activate(["maxpool_to_avgpool", "maxpool_to_avgpool"]) as active:
        assert active == ["maxpool_to_avgpool"]
        assert isinstance(torch.nn.MaxPool2d(2), pooling.AvgPool2d)
        assert torch.nn.Dropout is dropout.Dropout
    assert torch.nn.MaxPool2d is pooling.MaxPool2d


def test_activate_nothing() -> None:
    with patches.activate([]) as active:
        assert active == []
        assert torch.nn.MaxPool2d is pooling.MaxPool2d
    with patches.activate([], required=False) as active:
        assert active == []


def test_activate_restores_when_the_test_fails() -> None:
    with pytest.raises(RuntimeError), patches.activate(["dropout_to_identity"]):
        assert torch.nn.Dropout is not dropout.Dropout
        raise RuntimeError("the test failed")
    assert torch.nn.Dropout is dropout.Dropout


def test_activate_checks_every_name_first() -> None:
    with pytest.raises(patches.UnknownPatchError, match="unknown patch 'nope'; valid: maxpool_to_avgpool"):
        with patches.activate(["maxpool_to_avgpool", "nope"]):
            pass
    assert torch.nn.MaxPool2d is pooling.MaxPool2d


def test_for_test_adds_the_markers_to_the_session_patches() -> None:
    item = Item(pytest.mark.xla_patch("dropout_to_identity"), pytest.mark.xla_patch("maxpool_to_avgpool"))
    with patches.for_test(item, ["maxpool_to_avgpool"]) as active:  # type: ignore[arg-type]
        assert active == ["maxpool_to_avgpool", "dropout_to_identity"]
        assert isinstance(torch.nn.Dropout(0.1), torch.nn.Identity)
    assert torch.nn.Dropout is dropout.Dropout
    with patches.for_test(Item(), []) as active:  # type: ignore[arg-type]
        assert active == []


def test_torch_is_found() -> None:
    assert patches.torch_missing() is False
