"""The XLA device of this process: its bring-up (once), a failed bring-up, and torch kept out until needed.

``PJRT_DEVICE`` defaults to ``CPU`` when unset or empty. :func:`ensure_runtime` brings the XLA runtime up
once per process, before any test runs a CPU backward (pytorch/xla#4174: a CPU backward before
the XLA runtime is up breaks every later XLA backward). Under pytest-xdist every worker is its own
process with its own PJRT client. Nothing here touches a device at import or collection time.

A bring-up that fails or is interrupted (a pytest-timeout or Ctrl-C in the middle of ``import
torch_xla`` leaves torch_xla half-imported: a later import fails with ``NameError: name 'runtime' is
not defined``) is not retried: the test that triggered it reports the error once, with how to fix it,
and from then on :func:`skip_reason` gives that reason, so later XLA tests skip with it and tests
that do not need XLA run as usual.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import types
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

INSTALL_HINT = "pip install torch==2.9.0 torch_xla==2.9.0 (or run the README's set-up command)"
TRACE_LOGGER = "torch.__trace"  # torch's structured-trace logger (TORCH_TRACE / tlparse)
_TRACE_ENV = ("TORCH_TRACE", "TORCH_DTRACE")


class RuntimeUnavailable(RuntimeError):
    """The XLA runtime could not be brought up in this process (the message says why and what to do)."""


def default_pjrt_device() -> None:
    """Set ``PJRT_DEVICE=CPU`` unless the user chose a device (set but empty, ``PJRT_DEVICE=``, chooses none:
    CPU too, as ``auto_baseline`` and the reports read it)."""
    if not os.environ.get("PJRT_DEVICE", "").strip():
        os.environ["PJRT_DEVICE"] = "CPU"


@cache
def missing_stack() -> tuple[str, ...]:
    """The modules of the torch/torch_xla stack that are not installed (checked without importing)."""
    return tuple(m for m in ("torch", "torch_xla") if importlib.util.find_spec(m) is None)


def xla_available() -> bool:
    """Whether torch and torch_xla are installed and the runtime has not failed to come up here."""
    return not missing_stack() and _failure is None


def skip_reason(extra: tuple[str, ...] = ()) -> str | None:
    """Why an XLA test cannot run here (None when it can): a missing module, or a failed bring-up."""
    missing = list(missing_stack()) + [m for m in extra if importlib.util.find_spec(m) is None]
    if missing:
        return f"needs {', '.join(missing)}, not installed: {INSTALL_HINT}"
    return _failure


# --- the structured-trace logger -----------------------------------------------------------------------


class _DropTorchTrace(logging.Filter):
    """Drops torch's structured-trace records unless ``TORCH_TRACE`` (or ``TORCH_DTRACE``) asks for
    them: without it they are empty ``DEBUG torch.__trace:`` lines in every captured log (pytest 9
    attaches its capture handler to non-propagating loggers such as this one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return any(os.environ.get(name) for name in _TRACE_ENV)


def quiet_torch_trace() -> None:
    """Keep torch's structured-trace records out of pytest's captured logs (idempotent; needs no
    torch: torch reconfigures the logger on import, but keeps its filters)."""
    logger = logging.getLogger(TRACE_LOGGER)
    if not any(isinstance(f, _DropTorchTrace) for f in logger.filters):
        logger.addFilter(_DropTorchTrace())


# --- the runtime ------------------------------------------------------------------------------------


_runtime_up = False
_failure: str | None = None  # why the bring-up failed in this process (then it is not retried)

_FIX_ERROR = ("check that PJRT_DEVICE names a device this machine has (PJRT_DEVICE=CPU works everywhere) and "
              "that torch_xla matches torch ({hint}); python -c \"import torch_xla; print(torch_xla.device())\" "
              "shows the error outside pytest")
_FIX_INTERRUPTED = ("torch_xla cannot be imported again in this process; give the first XLA test more time "
                    "(the bring-up takes several seconds: e.g. a larger --timeout), then run again")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def renderable_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the entries that have no line number (None; -1 on early 3.11 releases, 3.11.2 among them).

    A signal (pytest-timeout's, Ctrl-C) delivered inside ``import torch_xla`` can stop a frame at an
    instruction without a line (Python 3.11); pytest then fails rendering the report with an INTERNALERROR
    (``tb_lineno - 1``) instead of showing the interruption."""
    entries = []
    while tb is not None:
        if tb.tb_lineno is not None and tb.tb_lineno >= 0:
            entries.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(entries):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def make_renderable(exc: BaseException) -> None:
    """Drop the line-less traceback entries of ``exc`` and of the exceptions chained to it."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = renderable_traceback(current.__traceback__)
        todo += [current.__cause__, current.__context__]


def bringup_failure() -> str | None:
    """Why the XLA runtime bring-up failed in this process, with how to fix it; None if it did not."""
    return _failure


def ensure_runtime() -> torch.device:
    """Bring the XLA runtime up (idempotent) and return this process's XLA device.

    A failure is remembered: this call raises :class:`RuntimeUnavailable` (from the error) or lets an
    interruption through; every later call raises :class:`RuntimeUnavailable` with the same reason."""
    global _runtime_up, _failure
    if _failure is not None:
        raise RuntimeUnavailable(_failure)
    default_pjrt_device()
    quiet_torch_trace()
    try:
        import torch_xla

        device = torch_xla.device()
    except Exception as exc:
        _failure = (f"XLA runtime bring-up failed (PJRT_DEVICE={os.environ.get('PJRT_DEVICE', '')}): "
                    f"{_describe(exc)}; XLA tests after it are skipped. Fix: "
                    + _FIX_ERROR.format(hint=INSTALL_HINT))
        raise RuntimeUnavailable(_failure) from exc
    except BaseException as exc:  # a pytest-timeout (Failed), Ctrl-C: torch_xla is now half-imported
        _failure = (f"XLA runtime bring-up was interrupted ({_describe(exc)}); XLA tests after it are "
                    f"skipped. Fix: {_FIX_INTERRUPTED}")
        if hasattr(exc, "add_note"):  # Python 3.11+: the report of this test says it too
            exc.add_note(_failure)
        make_renderable(exc)
        raise
    quiet_torch_trace()
    _runtime_up = True
    return device


def runtime_up() -> bool:
    """Whether the XLA runtime is up in this process: brought up here (:func:`ensure_runtime`), or by anyone
    (checked without importing torch_xla). The one such check of the package."""
    if _runtime_up:
        return True
    module = sys.modules.get("torch_xla")
    if module is None:
        return False
    try:
        return bool(module._XLAC._xla_runtime_is_initialized())
    except Exception:  # an unexpected torch_xla: assume it is up, so nothing claims an effect it lacks
        return True


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
