"""Where a CPU case's memory lands, drawn anew before each timed step or run, fresh at every allocation, or on
huge pages (``xla_placements``).

Why: CPU eager's step depends on which physical pages its memory drew, and a process keeps its draw (glibc's
malloc raises its mmap threshold once a large block is freed, so a step's activations come back to the same heap
addresses at every step): a process's figure is one draw, which no number of runs inside it averages away
(docs/timing.md, "Placements drawn per step or run"). Redrawn before each timed run
(``xla_placements=run``), a process's median is a median over ``--xla-repeat`` draws; before each timed step
(``step``), each run is a mean over its iterations' draws too.

A redraw, untimed, of a case on the CPU: the spacers of the last redraw are let go and new ones taken (a
random number of heap blocks of random sizes, below malloc's mmap threshold: held until the next redraw, they
fill the heap's free blocks, so the next step's activations land elsewhere), then every parameter, buffer and
input gets a fresh copy of its storage (``param.data = param.data.clone()``: the same ``Parameter`` objects,
so the optimizer keeps them). The weights' values are unchanged. A case on an XLA device is left alone: XLA's
buffers are its runtime's, not malloc's heap. Memory: the spacers (20 MB on average, at most 72 MB) and, for a
moment, one tensor's copy.

``xla_placements=fresh`` (:func:`fresh_pages`, applied by :mod:`pytest_xla_dynamo.timing.plugin` once
collection has selected a timing test, before any model is built: fixed later, it changes nothing, as the heap's
free blocks from the warm-up serve the steps) instead fixes glibc malloc's mmap threshold at 128 KB for the rest
of the process: every block of 128 KB or more that malloc hands out in the process is then a fresh ``mmap`` of
new pages, so CPU eager's large activations land on new pages at every step and the process keeps no one draw.
The price: page faults and zeroing at every step (CPU eager's resnet18 training step 54-62 -> 85 ms), so the
speedups are not those of a user's eager and are compared only with a baseline measured the same way (the gate
refuses the mix: :mod:`pytest_xla_dynamo.gating.plugin`). A setting for a speed gate's steadiness, not for the
table.

``xla_placements=huge`` (:func:`huge_pages`, applied at the same moment) asks torch's CPU allocator for
transparent huge pages (torch's own switch, ``THP_MEM_ALLOC_ENABLE=1``, PyTorch's CPU tuning recipe): its buffers of
2 MB or more are advised ``MADV_HUGEPAGE``, so where eager's large buffers land is decided in 2 MB pages. Eager's
step is then faster and, in fresh processes, steadier; the speedups are not those of 4 KB pages, and are compared
only with a baseline measured the same way. torch reads the switch at its first CPU allocation: a timed case checks
that it took effect (:func:`huge_pages_in_effect`) and fails saying why where it did not.

Measured (docs/timing.md "Placements drawn per step or run", "Fresh pages", "Huge pages"): alone, a draw moves CPU
eager's step as a new process does; in the timing suite neither ``run`` nor ``step`` narrowed a case's spread
between sessions (the XLA side moves between processes too), so the default is ``once``.
"""

from __future__ import annotations

import functools
import os
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SPACER_BLOCKS = (50, 600)  # how many heap blocks a redraw holds (uniform)
SPACER_KB = (4, 120)  # each block's size in KB (uniform): below glibc's 128 KB initial mmap threshold
THP_ENV = "THP_MEM_ALLOC_ENABLE"  # torch's switch for huge pages in its CPU allocator (c10/core/impl/alloc_cpu.cpp)
HUGE_PAGE_BYTES = 2 * 1024 * 1024  # torch advises huge pages for buffers of this size or more
FRESH_THRESHOLD = 128 * 1024  # xla_placements=fresh: glibc's initial mmap threshold, fixed (bytes)
M_MMAP_THRESHOLD = -3  # mallopt's parameter (glibc's malloc.h)


def huge_pages() -> str | None:
    """``xla_placements=huge``: ask torch's CPU allocator for transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``:
    buffers of 2 MB or more ``madvise(MADV_HUGEPAGE)``, every buffer page-aligned). torch reads the variable at
    its first CPU allocation, so this takes effect only before any CPU tensor exists (:func:`huge_pages_in_effect`
    says whether it did). Returns the variable's value before (None: unset), for the caller to put back."""
    before = os.environ.get(THP_ENV)
    os.environ[THP_ENV] = "1"
    return before


@functools.cache
def huge_pages_in_effect() -> bool:
    """Whether this process's torch CPU allocator asks for huge pages: a 4 MB tensor's memory is advised
    ``MADV_HUGEPAGE`` (its mapping's ``hg`` flag in ``/proc/self/smaps``). False where that cannot be read. Probed
    once per process: torch fixes the answer at its first CPU allocation (this probe's, at the latest), so every
    later timed case reads the first answer instead of another allocation and read of smaps before its runs."""
    import torch

    probe = torch.empty(HUGE_PAGE_BYTES * 2, dtype=torch.uint8)
    address, inside = probe.data_ptr(), False
    try:
        with open("/proc/self/smaps") as smaps:
            for line in smaps:
                fields = line.split()
                if fields and "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's first line
                    low, _, high = fields[0].partition("-")
                    inside = int(low, 16) <= address < int(high, 16)
                elif inside and fields and fields[0] == "VmFlags:":
                    return "hg" in fields[1:]
    except (OSError, ValueError):
        return False
    finally:
        del probe
    return False


def fresh_pages(threshold: int = FRESH_THRESHOLD) -> None:
    """``xla_placements=fresh``: fix glibc malloc's mmap threshold at ``threshold`` bytes in this process
    (``mallopt(M_MMAP_THRESHOLD)``, which also stops glibc from raising it when a large block is freed), for the
    rest of the process. Idempotent. Where malloc is not glibc's the option is refused when the session's options
    are resolved (:mod:`pytest_xla_dynamo.config`), so a failure here is a RuntimeError."""
    import ctypes

    if ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, threshold) != 1:
        raise RuntimeError(f"mallopt(M_MMAP_THRESHOLD, {threshold}) failed (glibc only; at most 32 MB on 64-bit)")


@dataclass
class Placement:
    """The spacers one side of a case holds between redraws, and its own random draws (never the global RNG:
    the seeds of parity runs are not touched)."""

    rng: random.Random = field(default_factory=lambda: random.Random(os.urandom(16)))
    spacers: list[bytearray] = field(default_factory=list)
    redraws: int = 0

    def redraw(self, model: torch.nn.Module, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        """Draw new spacers and move ``model``'s parameters and buffers and ``inputs`` to fresh storage; the
        new inputs are returned (the caller keeps them). Tensors not on the CPU are left where they are."""
        self.spacers.clear()
        count = self.rng.randint(*SPACER_BLOCKS)
        self.spacers = [bytearray(self.rng.randint(*SPACER_KB) * 1024) for _ in range(count)]
        for tensor in (*model.parameters(), *model.buffers()):
            if tensor.device.type == "cpu":
                tensor.data = tensor.data.clone()
        self.redraws += 1
        return tuple(_fresh(t) for t in inputs)

    def release(self) -> None:
        """Let go of the spacers (after the timed runs)."""
        self.spacers = []


def _fresh(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value
