"""How the session was launched, and where the bundled suites and snapshots are installed.

``python -m pytest_xla_dynamo`` registers a marker object (:class:`MainMarker`) so that repro commands
can say how to rerun a case; the bundled ``suites/`` and ``snapshots/`` are the packages
``pytest_xla_dynamo.suites`` and ``pytest_xla_dynamo.snapshots``. No torch here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPRO_PREFIX = "python -m pytest_xla_dynamo"
SUITES_PACKAGE = "pytest_xla_dynamo.suites"
SNAPSHOTS_PACKAGE = "pytest_xla_dynamo.snapshots"


def package_dir(package: str) -> Path:
    """The folder of an installed package of this distribution (without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not installed (pip install pytest-xla-dynamo)")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def suites_dir() -> Path:
    return package_dir(SUITES_PACKAGE)


def snapshots_dir() -> Path:
    return package_dir(SNAPSHOTS_PACKAGE)


class MainMarker:
    """Registered as a plugin object by ``python -m pytest_xla_dynamo``, so the session knows how it
    was launched (an attribute, not isinstance: under ``python -m`` the entry module is ``__main__``)."""

    xla_dynamo_main = True


def launched_by_main(config: pytest.Config) -> bool:
    """Whether this session was started by ``python -m pytest_xla_dynamo``."""
    return any(getattr(p, "xla_dynamo_main", False) is True for p in config.pluginmanager.get_plugins())


def repro_prefix(config: pytest.Config) -> str:
    """The command that starts a session like this one: ``pytest`` or ``python -m pytest_xla_dynamo``."""
    return REPRO_PREFIX if launched_by_main(config) else "pytest"
