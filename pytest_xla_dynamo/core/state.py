"""Per-test global state: each XLA test starts from a known state and leaves it as it found it, and gives
back the memory it no longer holds."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

from pytest_xla_dynamo.core import devices


def _save_rng() -> dict[str, Any]:
    import torch

    saved: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        saved["numpy"] = np.random.get_state()
    if devices.runtime_up():
        import torch_xla.core.xla_model as xm

        saved["xla"] = xm.get_rng_state()
    return saved


def _restore_rng(saved: dict[str, Any]) -> None:
    import torch

    random.setstate(saved["python"])
    torch.set_rng_state(saved["torch"])
    if "numpy" in saved:
        import numpy as np

        np.random.set_state(saved["numpy"])
    if "xla" in saved:
        import torch_xla.core.xla_model as xm

        xm.set_rng_state(saved["xla"])


def flush_pending() -> None:
    """Run what earlier tests left pending on the XLA device (a step that raised half-way leaves its lazy
    graph behind, held by its traceback), so that the next ``torch_xla.sync()`` of this test does not
    compile and count it as this test's (a steady-state "recompile" of a case that compiled nothing)."""
    if devices.runtime_up():
        import torch_xla
        import torch_xla.core.xla_model as xm

        torch_xla.sync()
        xm.wait_device_ops()


def release_memory(reset_dynamo: bool = True) -> None:
    """Give back what freed tests and cases held: dynamo's compiled code and guards (which hold models;
    with ``reset_dynamo``), the garbage (cases are freed by the cycle collector), and the C heap's free
    pages (glibc keeps them mapped until ``malloc_trim``: 1.3 GB after timm cspresnet50's causal test)."""
    import ctypes
    import gc

    import torch

    if reset_dynamo:
        torch._dynamo.reset()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def reset_counters() -> None:
    """Clear dynamo's counters and torch_xla's metrics (not the compiled code)."""
    from torch._dynamo.utils import counters

    counters.clear()
    if devices.runtime_up():
        import torch_xla.debug.metrics as met

        met.clear_all()


@contextlib.contextmanager
def clean_state(seed: int, *, reset_dynamo: bool = True) -> Iterator[None]:
    """Reset dynamo (unless the test reuses prepared compiled models), clear counters and metrics,
    seed every RNG from ``seed``; restore the RNG states afterwards and, after a test of its own, give
    back its memory (:func:`release_memory`)."""
    import torch

    saved = _save_rng()
    grad_enabled = torch.is_grad_enabled()
    if reset_dynamo:
        torch._dynamo.reset()
    flush_pending()
    reset_counters()
    devices.seed_everything(seed)
    try:
        yield
    finally:
        torch.set_grad_enabled(grad_enabled)
        _restore_rng(saved)
        if reset_dynamo:  # a test of its own (not a shared case, whose engine frees it): give its memory back
            release_memory(reset_dynamo=False)
