"""Settings for the plugin's own tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``-n 2`` this process is an xdist worker; its PYTEST_XDIST_* variables must not leak into
    the pytester sessions it starts (syrupy, for one, would then take them for workers and stay silent)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
