"""Tests of pytest_xla_dynamo.timing.placement: a redraw moves a CPU case's weights, buffers and inputs to fresh
storage with the same values and objects, and holds new heap spacers (torch on the CPU, in process)."""

from __future__ import annotations

import ctypes
import os
import random
import subprocess
import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pytest_xla_dynamo.core.machine import thp_mode  # noqa: E402
from pytest_xla_dynamo.timing import placement as placement_module  # noqa: E402
from pytest_xla_dynamo.timing.options import THP_MODES  # noqa: E402
from pytest_xla_dynamo.timing.placement import Placement  # noqa: E402


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32))


def test_a_redraw_moves_weights_buffers_and_inputs_and_keeps_their_values_and_objects() -> None:
    model = _model()
    params, buffers = list(model.parameters()), list(model.buffers())
    values = {k: v.clone() for k, v in model.state_dict().items()}
    pointers = [t.data_ptr() for t in (*params, *buffers)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, labels = torch.randn(8, 64, requires_grad=True), torch.arange(8)
    state = random.getstate()
    place = Placement()
    new_x, new_labels = place.redraw(model, (x, labels))
    assert random.getstate() == state  # its own draws: the global RNG (parity's seeds) is not touched
    assert all(a is b for a, b in zip(model.parameters(), params, strict=True))  # the same Parameter objects
    assert optimizer.param_groups[0]["params"][0] is params[0]
    moved = [t.data_ptr() for t in (*model.parameters(), *model.buffers())]
    assert all(a != b for a, b in zip(moved, pointers, strict=True))
    for key, value in model.state_dict().items():
        assert torch.equal(value, values[key]), key
    assert torch.equal(new_x, x) and new_x.data_ptr() != x.data_ptr() and new_x.requires_grad
    assert torch.equal(new_labels, labels) and new_labels.data_ptr() != labels.data_ptr()
    low, high = placement_module.SPACER_BLOCKS
    assert low <= len(place.spacers) <= high and place.redraws == 1
    assert all(placement_module.SPACER_KB[0] * 1024 <= len(b) <= placement_module.SPACER_KB[1] * 1024
               for b in place.spacers)
    first = place.spacers
    place.redraw(model, ())
    assert place.spacers is not first and place.redraws == 2  # the last redraw's spacers let go, new ones held
    place.release()
    assert place.spacers == []


def test_a_redraw_leaves_tensors_off_the_cpu_where_they_are() -> None:
    """The meta device stands in for an XLA device: its tensors keep their storage (the same storage object)."""
    model = torch.nn.Linear(4, 4, device="meta")
    storage = model.weight.untyped_storage()
    x = torch.empty(2, 4, device="meta")
    (same,) = Placement().redraw(model, (x,))
    assert same is x and model.weight.untyped_storage() is storage
    assert model.weight.clone().untyped_storage() is not storage  # a copy, as a CPU tensor gets, would have shown


def _probe(script: str, mode: str, drop: tuple[str, ...], timeout: float) -> str:
    """What ``script`` prints, run with ``mode`` in a child process (memory settings are process-wide) whose
    environment lacks the variables ``drop`` that would set them from outside."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    done = subprocess.run([sys.executable, "-c", script, mode], env=env, capture_output=True, text=True, check=True,
                          timeout=timeout)
    return done.stdout.strip()


# an 8 MB block freed (glibc raises its mmap threshold to 8 MB unless it is fixed), then a 512 KB block taken:
# prints how many mmapped blocks that took (mallinfo2's hblks): 0 from the heap, 1 a fresh mmap
FRESH_PROBE = """
import ctypes, sys
from pytest_xla_dynamo.timing.placement import fresh_pages
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype, libc.malloc.restype, libc.free.argtypes = Info, ctypes.c_void_p, [ctypes.c_void_p]
if sys.argv[1] == "fresh":
    fresh_pages()
libc.free(libc.malloc(8 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(512 << 10)
print(libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc >= 2.33 (mallinfo2) only")
def test_fresh_pages_keeps_large_blocks_on_fresh_mmaps_after_a_large_free() -> None:
    """xla_placements=fresh: without it glibc serves a 512 KB block from the heap after an 8 MB one was freed
    (the threshold rose); with it the block is a fresh mmap. In a child process: the setting is process-wide."""
    drop = ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")
    assert tuple(_probe(FRESH_PROBE, mode, drop, 60) for mode in ("default", "fresh")) == ("0", "1")


def test_thp_mode_reads_the_kernels_setting(tmp_path: Any) -> None:
    setting = tmp_path / "enabled"
    setting.write_text("always [madvise] never\n")
    assert thp_mode(setting) == "madvise"
    setting.write_text("[always] madvise never\n")
    assert thp_mode(setting) == "always"
    setting.write_text("garbled\n")
    assert thp_mode(setting) is None
    assert thp_mode(tmp_path / "absent") is None  # not Linux, or no THP in the kernel


def test_huge_pages_sets_torchs_switch_and_returns_what_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(placement_module.THP_ENV, raising=False)
    assert placement_module.huge_pages() is None and os.environ[placement_module.THP_ENV] == "1"
    monkeypatch.setenv(placement_module.THP_ENV, "0")
    assert placement_module.huge_pages() == "0" and os.environ[placement_module.THP_ENV] == "1"


# whether torch's CPU allocator advises huge pages: the switch set before torch's first CPU allocation, after it, or
# never (torch reads it once)
HUGE_PROBE = """
import sys
from pytest_xla_dynamo.timing.placement import huge_pages, huge_pages_in_effect
import torch
if sys.argv[1] == "late":
    torch.ones(4)
if sys.argv[1] != "off":
    huge_pages()
print(huge_pages_in_effect())
"""


@pytest.mark.skipif(thp_mode() not in THP_MODES,
                    reason="needs the kernel's transparent huge pages")
def test_huge_pages_take_effect_only_before_torchs_first_cpu_allocation() -> None:
    """In child processes (torch reads the switch once per process): on before any CPU tensor, the allocator
    advises huge pages; set after one, or not at all, it does not, and the probe says so."""
    drop = (placement_module.THP_ENV,)
    assert tuple(_probe(HUGE_PROBE, mode, drop, 120) for mode in ("on", "late", "off")) == ("True", "False", "False")
