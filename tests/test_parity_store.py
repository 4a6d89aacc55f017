"""The stored steps of a reference run: kept in memory while small, spilled to disk in chunks otherwise,
read back in order one chunk at a time, deleted on close."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo.parity.store import StepStore

torch = pytest.importorskip("torch")


def _step(seed: int) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    return {"loss": torch.rand((), generator=gen), "output[0]": torch.rand(4, 8, generator=gen),
            "grad w": torch.rand(64, 64, generator=gen), "param w": torch.rand(64, 64, generator=gen),
            "buffer n": torch.tensor(3), "buffer mask": torch.rand(5, generator=gen) > 0.5,
            "buffer half": torch.rand(3, 3, generator=gen).to(torch.bfloat16), "buffer empty": torch.empty(0, 2)}


def test_small_steps_stay_in_memory() -> None:
    store = StepStore()
    store.add(_step(1))
    assert store.spilled_bytes == 0
    got = store.step(1)
    assert list(got) == list(_step(1)) and all(torch.equal(got[k], v) for k, v in _step(1).items())


def test_large_steps_spill_in_chunks_and_read_back_equal() -> None:
    store = StepStore(in_memory_bytes=1024, chunk_bytes=10_000)  # each 64x64 fp32 tensor is 16 KiB
    for seed in (1, 2):
        store.add(_step(seed))
    assert len(store) == 2 and store.spilled_bytes > 0
    folder = Path(store._dir.name) if store._dir else None
    assert folder is not None and len(list(folder.glob("step1-*.bin"))) >= 2  # several chunks per step
    for step, seed in ((1, 1), (2, 2)):
        got, want = store.step(step), _step(seed)
        assert list(got) == list(want)  # the step's order
        assert "grad w" in got and "nothing" not in got
        for name, tensor in want.items():
            assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), (step, name)
        got.release()
    with pytest.raises(KeyError):
        store.step(1)["nothing"]
    spots = store.step(1)._where
    assert spots["param w"].chunk != spots["grad w"].chunk  # a tensor past the chunk size is alone
    store.close()
    assert not folder.exists()
