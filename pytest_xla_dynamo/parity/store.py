"""The steps of a reference run, kept for a later comparison: in memory while small, else on disk.

A parity check compares every tensor of every step of the backend with the eager reference and its fp64
copy. Holding the three runs side by side costs their summed memory (for vgg16's training step: 1.1 GB of
eager tensors, 2.2 GB of fp64 ones, the backend's, and three models). Instead each reference run is
stepped alone and its steps are stored here; the backend then runs alone and compares each of its steps
with the stored ones as it comes. A step larger than :data:`IN_MEMORY_BYTES` is written to disk in
chunks of about :data:`CHUNK_BYTES` (a tensor larger than that in a chunk of its own), and read back one
chunk at a time, in the order the comparison reads it: the peak is one run plus a chunk, not three runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import torch

    from pytest_xla_dynamo.core.cases import TensorSet

IN_MEMORY_BYTES = 64 * 2**20  # a step up to this size stays in memory
CHUNK_BYTES = 64 * 2**20  # the size of the files a larger step is written in
TEMP_PREFIX = "xla-parity-steps-"


@dataclass(frozen=True)
class _Spilled:
    """Where a spilled tensor's bytes are: its chunk file and offset, and how to view them again."""

    chunk: int
    offset: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]


ALIGN = 64  # each tensor's bytes start at a multiple of this in its chunk


def _write(tensor: torch.Tensor, fh: BinaryIO) -> int:
    """Write the tensor's bytes raw, padded to :data:`ALIGN`; the bytes written. Not pickled: ``torch.save``
    leaves reference cycles that hold what it saved until the cycle collector runs."""
    import torch

    flat = tensor.detach().contiguous().reshape(-1)
    nbytes = flat.numel() * flat.element_size()
    if nbytes:
        flat.view(torch.uint8).numpy().tofile(fh)
    pad = -nbytes % ALIGN
    fh.write(b"\0" * pad)
    return nbytes + pad


def _read(path: Path) -> bytearray:
    """The chunk's bytes, read into one buffer (``read_bytes`` would hold a second copy for a moment)."""
    data = bytearray(path.stat().st_size)
    with path.open("rb") as fh:
        fh.readinto(data)
    return data


class StoredStep(Mapping[str, "torch.Tensor"]):
    """One stored step as a read-only mapping name -> tensor, in the step's order. A spilled step reads the
    chunk holding a name on first access and keeps only that chunk: read it in order (as
    :func:`~pytest_xla_dynamo.parity.compare.compare_step` does) and each chunk is read once."""

    def __init__(self, names: list[str], chunks: list[Path] | None = None, where: dict[str, _Spilled] | None = None,
                 tensors: TensorSet | None = None) -> None:
        self._names = names
        self._chunks = chunks or []
        self._where = where or {}
        self._tensors = tensors
        self._loaded: tuple[int, bytearray] | None = None

    def __getitem__(self, name: str) -> torch.Tensor:
        if self._tensors is not None:
            return self._tensors[name]
        import torch

        spot = self._where[name]  # KeyError for a name the step does not have
        if self._loaded is None or self._loaded[0] != spot.chunk:
            self._loaded = None  # free the previous chunk before reading the next
            self._loaded = (spot.chunk, _read(self._chunks[spot.chunk]))
        if not spot.nbytes:
            return torch.empty(spot.shape, dtype=spot.dtype)
        # a view of the chunk's bytes (the tensor keeps them alive while it lives)
        raw = torch.frombuffer(self._loaded[1], dtype=torch.uint8, count=spot.nbytes, offset=spot.offset)
        return raw.view(spot.dtype).reshape(spot.shape)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._where if self._tensors is None else name in self._tensors

    def release(self) -> None:
        """Drop the chunk held in memory (a spilled step reads it again when asked)."""
        self._loaded = None


class StepStore:
    """The stored steps of one run (see the module docstring); :meth:`close` deletes its files (they go
    at garbage collection or the interpreter's exit too)."""

    def __init__(self, in_memory_bytes: int = IN_MEMORY_BYTES, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.in_memory_bytes = in_memory_bytes
        self.chunk_bytes = chunk_bytes
        self._steps: list[StoredStep] = []
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.spilled_bytes = 0

    def _folder(self) -> Path:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix=TEMP_PREFIX)
        return Path(self._dir.name)

    def add(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Keep the next step's tensors, read from ``tensors`` one at a time (a
        :class:`~pytest_xla_dynamo.core.cases.LiveStep` copies each from the device as it is read): a step that
        stays within :attr:`in_memory_bytes` is kept in memory, a larger one is written chunk by chunk."""
        names = list(tensors)
        held: dict[str, torch.Tensor] = {}  # read but not yet written
        held_bytes = size = 0
        where: dict[str, _Spilled] = {}
        chunks: list[Path] = []

        def flush() -> None:
            path = self._folder() / f"step{len(self._steps) + 1}-{len(chunks)}.bin"
            offset = 0
            with path.open("wb") as fh:
                for name, tensor in held.items():
                    nbytes = tensor.numel() * tensor.element_size()
                    where[name] = _Spilled(len(chunks), offset, nbytes, tensor.dtype, tuple(tensor.shape))
                    offset += _write(tensor, fh)
            chunks.append(path)
            held.clear()

        for name in names:
            tensor = tensors[name]
            nbytes = tensor.numel() * tensor.element_size()
            size += nbytes
            if size > self.in_memory_bytes and held and nbytes >= self.chunk_bytes:
                flush()  # a large tensor gets a chunk of its own: reading a neighbour does not read it too
                held_bytes = 0
            held[name] = tensor
            held_bytes += nbytes
            if size > self.in_memory_bytes and held_bytes >= self.chunk_bytes:
                flush()
                held_bytes = 0
        if not chunks:
            self._steps.append(StoredStep(names, tensors=held))
            return
        if held:
            flush()
        self.spilled_bytes += size
        self._steps.append(StoredStep(names, chunks, where))

    def __len__(self) -> int:
        return len(self._steps)

    def step(self, step: int) -> StoredStep:
        """Step ``step`` (1-based)."""
        return self._steps[step - 1]

    def close(self) -> None:
        self._steps = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
