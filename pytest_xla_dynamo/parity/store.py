"""The steps of a reference run, kept for a later comparison: in memory while small, else on disk.

A parity check compares every tensor of every step of the backend with the eager reference and its fp64
copy. Holding the three runs side by side costs their summed memory (for vgg16's training step: 1.1 GB of
eager tensors, 2.2 GB of fp64 ones, the backend's, and three models). Instead each reference run is
stepped alone and its steps are stored here; the backend then runs alone and compares each of its steps
with the stored ones as it comes. A step larger than :data:`IN_MEMORY_BYTES` is written to disk in
chunks of about :data:`CHUNK_BYTES`, and read back one chunk at a time, in the order the comparison
reads it: the peak is one run plus a chunk, not three runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from pytest_xla_dynamo.cases import TensorSet

IN_MEMORY_BYTES = 64 * 2**20  # a step up to this size stays in memory
CHUNK_BYTES = 64 * 2**20  # the size of the files a larger step is written in
TEMP_PREFIX = "xla-parity-steps-"


def nbytes(tensors: Mapping[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


class StoredStep(Mapping[str, "torch.Tensor"]):
    """One stored step as a read-only mapping name -> tensor, in the step's order. A spilled step loads the
    chunk holding a name on first access and keeps only that chunk: read it in order (as
    :func:`~pytest_xla_dynamo.parity.compare.compare_step` does) and each chunk is read once."""

    def __init__(self, names: list[str], chunks: list[Path] | None = None, where: dict[str, int] | None = None,
                 tensors: TensorSet | None = None) -> None:
        self._names = names
        self._chunks = chunks or []
        self._where = where or {}
        self._tensors = tensors
        self._loaded: tuple[int, TensorSet] | None = None

    def __getitem__(self, name: str) -> torch.Tensor:
        if self._tensors is not None:
            return self._tensors[name]
        index = self._where[name]  # KeyError for a name the step does not have
        if self._loaded is None or self._loaded[0] != index:
            import torch

            self._loaded = None  # free the previous chunk before reading the next
            self._loaded = (index, torch.load(self._chunks[index], weights_only=True))
        return self._loaded[1][name]

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

    def add(self, tensors: TensorSet) -> None:
        """Keep the next step's tensors (the caller lets go of ``tensors`` afterwards)."""
        names = list(tensors)
        size = nbytes(tensors)
        if size <= self.in_memory_bytes:
            self._steps.append(StoredStep(names, tensors=dict(tensors)))
            return
        import torch

        folder = self._folder()
        chunks: list[Path] = []
        where: dict[str, int] = {}
        chunk: dict[str, torch.Tensor] = {}
        chunk_size = 0

        def flush() -> None:
            path = folder / f"step{len(self._steps) + 1}-{len(chunks)}.pt"
            torch.save(chunk, path)
            chunks.append(path)

        for name in names:
            tensor = tensors[name]
            chunk[name] = tensor
            where[name] = len(chunks)
            chunk_size += tensor.numel() * tensor.element_size()
            if chunk_size >= self.chunk_bytes:
                flush()
                chunk, chunk_size = {}, 0
        if chunk:
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
