"""Hooks a downstream project implements (in a conftest.py or a plugin) to extend the plugin.

The three registration hooks have one form: each is given the process's registry of its kind (``registry``, a
:class:`~pytest_xla_dynamo.registries.NamedRegistry`) and that registry's ``register`` method (``register``); an
implementation names the one it uses (``registry.register(item)`` or ``register(item)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend, BackendRegistry
    from pytest_xla_dynamo.core.patches import Patch
    from pytest_xla_dynamo.registries import NamedRegistry
    from pytest_xla_dynamo.zoo import ModelSpec


@pytest.hookspec
def pytest_xla_register_backends(registry: BackendRegistry, register: Callable[[Backend], None]) -> None:
    """Register backends: ``registry.register(Backend(...))`` (or ``register(Backend(...))``).

    They then show in validation and in ``--xla-backend=all`` (the ``pytest_xla_dynamo.backends``
    entry point group also lists them in ``--help``).
    """


@pytest.hookspec
def pytest_xla_register_models(registry: NamedRegistry[ModelSpec], register: Callable[[ModelSpec], None]) -> None:
    """Register models for the suites: ``register(ModelSpec(...))`` (or ``registry.register(...)``; see
    ``pytest_xla_dynamo.zoo``)."""


@pytest.hookspec
def pytest_xla_register_patches(registry: NamedRegistry[Patch], register: Callable[[Patch], None]) -> None:
    """Register op patches: ``register(Patch(...))`` (or ``registry.register(...)``; see
    ``pytest_xla_dynamo.core.patches``)."""


@pytest.hookspec
def pytest_xla_known_issues() -> list[dict[str, Any]] | None:
    """Return extra known-issue entries (dicts with the registry's fields)."""
