"""Settings for the plugin's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``-n 2`` this process is an xdist worker; its PYTEST_XDIST_* variables must not leak into
    the pytester sessions it starts (syrupy, for one, would then take them for workers and stay silent)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_delivered() -> None:
    """Several tests send Ctrl-C (SIGINT) to this process or to sessions they start. A shell without job
    control starts a background job (``./run.sh test &``) with SIGINT ignored, and Python then keeps it
    ignored, as does every child: give this process Python's default handler back (children start with the
    default disposition)."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
