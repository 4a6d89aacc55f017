"""The reference runs' saved activations on disk: a training step whose backward needs more than the machine has.

Autograd keeps the activations a backward needs from the forward until the backward has used them; at the
full tier that is most of a training step's memory (mobilenet_v2 at batch 96: over 20 GB for the fp64
reference alone). :func:`saved_on_disk` installs autograd's ``saved_tensors_hooks``: a CPU tensor of at
least :data:`MIN_BYTES` saved during the forward is written to a temporary folder as raw bytes and read back
when the backward needs it, with the same shape, strides and values, so the math is the same: the
references stay the eager computation they are, only where the bytes wait changes. Smaller tensors,
tensors on a device, weights and their views, and overlapping views stay in memory. The folder goes when the block ends.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MIN_BYTES = 16 * 2**20  # a saved tensor at least this large waits on disk
TEMP_PREFIX = "xla-parity-saved-"


class _OnDisk:
    """A saved tensor's bytes in a file: what it takes to make the tensor again. The file goes with it."""

    def __init__(self, path: str, tensor: torch.Tensor) -> None:
        import torch

        order = _dense_order(tensor)
        assert order is not None
        dense = tensor.detach().permute(order)
        self.path, self.dtype, self.order = path, tensor.dtype, order
        self.shape = tuple(dense.shape)
        with open(path, "wb") as fh:
            dense.reshape(-1).view(torch.uint8).numpy().tofile(fh)

    def load(self) -> torch.Tensor:
        import torch

        flat = torch.from_file(self.path, shared=False, size=os.path.getsize(self.path), dtype=torch.uint8)
        dense = flat.view(self.dtype).view(self.shape)
        inverse = sorted(range(len(self.order)), key=lambda d: self.order[d])
        return dense.permute(inverse)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _dense_order(tensor: torch.Tensor) -> list[int] | None:
    """The permutation of dims (by decreasing stride) making ``tensor`` contiguous; None for an overlapping or
    strided view, whose bytes are not exactly its elements."""
    strides = tensor.stride()
    order = sorted(range(tensor.dim()), key=lambda d: (-strides[d], d))
    return order if tensor.permute(order).is_contiguous() else None


def _is_weight(tensor: torch.Tensor) -> bool:
    """A parameter, or a view of one (``weight.t()`` saved by a linear layer): it stays in memory anyway."""
    base = tensor._base if tensor._base is not None else tensor
    return base.is_leaf and base.requires_grad


def _offloadable(tensor: torch.Tensor, min_bytes: int) -> bool:
    import torch

    return (tensor.device.type == "cpu" and tensor.layout == torch.strided
            and tensor.numel() * tensor.element_size() >= min_bytes and not _is_weight(tensor)
            and not tensor.is_conj() and not tensor.is_neg() and _dense_order(tensor) is not None)


@contextlib.contextmanager
def saved_on_disk(min_bytes: int = MIN_BYTES) -> Iterator[str]:
    """Within the block, autograd's large saved CPU tensors wait in a temporary folder (its path yielded)."""
    import torch

    folder = tempfile.mkdtemp(prefix=TEMP_PREFIX)
    names = itertools.count()

    def pack(tensor: torch.Tensor) -> Any:
        if not _offloadable(tensor, min_bytes):
            return tensor
        return _OnDisk(os.path.join(folder, f"{next(names)}.bin"), tensor)

    def unpack(saved: Any) -> torch.Tensor:
        return saved.load() if isinstance(saved, _OnDisk) else saved

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
