"""Hooks a downstream project implements (in a conftest.py or a plugin) to extend the plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import BackendRegistry


@pytest.hookspec
def pytest_xla_register_backends(registry: BackendRegistry) -> None:
    """Register backends: ``registry.register(Backend(...))``.

    They then show in validation and in ``--xla-backend=all`` (the ``pytest_xla_dynamo.core.backends``
    entry point group also lists them in ``--help``).
    """


@pytest.hookspec
def pytest_xla_register_models(register: Any) -> None:
    """Register models for the suites: ``register(ModelSpec(...))`` (see ``pytest_xla_dynamo.zoo``)."""


@pytest.hookspec
def pytest_xla_register_patches(register: Any) -> None:
    """Register op patches: ``register(Patch(...))`` (see ``pytest_xla_dynamo.core.patches``)."""


@pytest.hookspec
def pytest_xla_known_issues() -> list[dict[str, Any]] | None:
    """Return extra known-issue entries (dicts with the registry's fields)."""
