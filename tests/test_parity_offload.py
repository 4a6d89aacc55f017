"""The reference runs' saved activations on disk: the same step, bit for bit, with the large activations
waiting in a folder that goes when the block ends; weights and small tensors stay in memory."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from pytest_xla_dynamo.parity import offload

torch = pytest.importorskip("torch")


class Net(torch.nn.Module):  # type: ignore[name-defined]
    """Convolutions on a channels-last input (strided saved activations), a linear layer (a saved weight
    view), batch norm (its running statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 16 * 16, 10)

    def forward(self, x: Any) -> Any:
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.flatten(1) * 2.0)


def _step(model: Any, x: Any) -> tuple[Any, list[Any]]:
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [p.grad for p in model.parameters()]


def test_a_step_is_bit_identical_with_its_activations_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 3, 16, 16).to(memory_format=torch.channels_last)
    plain, disk = copy.deepcopy(model), copy.deepcopy(model)
    want_out, want_grads = _step(plain, x)
    written: list[str] = []
    real = offload._OnDisk.__init__

    def spy(self: Any, path: str, tensor: Any) -> None:
        written.append(path)
        real(self, path, tensor)

    monkeypatch.setattr(offload._OnDisk, "__init__", spy)
    with offload.saved_on_disk(min_bytes=1024) as folder:
        got_out, got_grads = _step(disk, x)
        assert os.path.isdir(folder)
    assert written, "nothing was offloaded: the test would prove nothing"
    assert not os.path.exists(folder)
    assert torch.equal(got_out, want_out)
    assert all(torch.equal(a, b) for a, b in zip(got_grads, want_grads, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), disk.state_dict().values(), strict=True))


def test_weights_small_and_overlapping_tensors_stay_in_memory() -> None:
    weight = torch.nn.Parameter(torch.randn(64, 64))
    assert not offload._offloadable(weight, 1)
    assert not offload._offloadable(weight.t(), 1)  # a linear layer saves this view
    assert not offload._offloadable(torch.randn(4, 4), 1024)  # 64 bytes: small
    assert not offload._offloadable(torch.randn(1, 64).expand(64, 64), 1)  # overlapping: stride 0
    assert not offload._offloadable(torch.randn(64, 128)[:, ::2], 1)  # strided: its bytes are not its elements
    assert offload._offloadable(torch.randn(64, 64).t(), 1)  # a transposed dense tensor is written dense


def test_a_permuted_tensor_comes_back_with_its_strides(tmp_path: Any) -> None:
    t = torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)
    saved = offload._OnDisk(str(tmp_path / "t.bin"), t)
    back = saved.load()
    assert torch.equal(back, t) and back.stride() == t.stride()
    del saved
    assert not (tmp_path / "t.bin").exists()
