"""The XLA device of this process, and the checks that keep torch out until it is needed.

``PJRT_DEVICE`` defaults to ``CPU`` when unset. :func:`ensure_runtime` brings the XLA runtime up
once per process, before any test runs a CPU backward (pytorch/xla#4174: a CPU backward before
the XLA runtime is up breaks every later XLA backward). Under pytest-xdist every worker is its own
process with its own PJRT client. Nothing here touches a device at import or collection time.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

INSTALL_HINT = "pip install torch==2.9.0 torch_xla==2.9.0 (or run the README's set-up command)"


def default_pjrt_device() -> None:
    """Set ``PJRT_DEVICE=CPU`` unless the user chose a device."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")


@cache
def missing_stack() -> tuple[str, ...]:
    """The modules of the torch/torch_xla stack that are not installed (checked without importing)."""
    return tuple(m for m in ("torch", "torch_xla") if importlib.util.find_spec(m) is None)


def xla_available() -> bool:
    return not missing_stack()


def skip_reason(extra: tuple[str, ...] = ()) -> str | None:
    """Why an XLA test cannot run here (None when it can)."""
    missing = list(missing_stack()) + [m for m in extra if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return f"needs {', '.join(missing)}, not installed: {INSTALL_HINT}"


_runtime_up = False


def ensure_runtime() -> torch.device:
    """Bring the XLA runtime up (idempotent) and return this process's XLA device."""
    global _runtime_up
    default_pjrt_device()
    import torch_xla

    device = torch_xla.device()
    # torch (re)configures its structured-trace logger (TORCH_TRACE) on import: a DEBUG record per
    # compile event, which pytest's log capture would otherwise keep and print with every failure
    logging.getLogger("torch.__trace").propagate = False
    _runtime_up = True
    return device


def runtime_up() -> bool:
    return _runtime_up


def xla_device() -> torch.device:
    """This process's XLA device (``torch_xla.device()``), bringing the runtime up if needed."""
    return ensure_runtime()


def seed_everything(seed: int) -> None:
    """Seed python, numpy, torch and (when the runtime is up) the XLA RNG."""
    import random

    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # numpy is optional for torch
        pass
    else:
        np.random.seed(seed)
    import torch

    torch.manual_seed(seed)
    if _runtime_up:
        import torch_xla

        torch_xla.manual_seed(seed)
