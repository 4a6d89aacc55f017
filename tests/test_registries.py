"""Tests of pytest_xla_dynamo.registries: the one registry style of models, backends and op patches.

Unit tests of :class:`NamedRegistry` (order, duplicates, replace, unknown names), that the three kinds are one
each per process, and a session whose conftest registers one of each through the hooks, in both forms the
hooks take (``registry.register(...)`` and ``register(...)``). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import backends, patches
from pytest_xla_dynamo.registries import NamedRegistry

pytest_plugins = ["pytester"]


@dataclass(frozen=True)
class Item:
    name: str
    value: int = 0


def test_registration_order_duplicates_and_replace() -> None:
    registry = NamedRegistry("item", Item, [Item("b"), Item("a")])
    assert registry.names() == ["b", "a"] and len(registry) == 2 and "a" in registry and "c" not in registry
    registry.register(Item("a"))  # the same item again: nothing changes
    with pytest.raises(ValueError, match="item 'a' is already registered"):
        registry.register(Item("a", 1))
    registry.register(Item("b", 2), replace=True)  # keeps its place
    assert [i.value for i in registry] == [2, 0] and registry.get("b") == Item("b", 2)
    with pytest.raises(TypeError, match="takes a"):
        registry.register("c")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="unknown item 'c'; valid: b, a"):
        registry.get("c")
    with pytest.raises(KeyError):
        registry.get(["a"])  # type: ignore[arg-type]


def test_each_kind_is_one_named_registry_per_process() -> None:
    assert isinstance(zoo.MODELS, NamedRegistry) and zoo.model_names() == zoo.MODELS.names()
    assert isinstance(patches.PATCHES, NamedRegistry) and patches.patch_names() == patches.PATCHES.names()
    assert isinstance(backends.BACKENDS, NamedRegistry) and backends.default_registry() is backends.BACKENDS
    assert backends.BACKENDS.get("openxla").name == "trace_once" and "openxla" in backends.BACKENDS  # an alias
    with pytest.raises(zoo.UnknownModelError):
        zoo.MODELS.get("resnet1000")
    with pytest.raises(patches.UnknownPatchError, match="unknown patch 'nope'"):
        patches.PATCHES.get("nope")
    with pytest.raises(KeyError, match="unknown backend 'nope'; valid: trace_once"):
        backends.BACKENDS.get("nope")


CONFTEST = """
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.patches import Patch
from pytest_xla_dynamo.zoo import ModelSpec


def pytest_xla_register_models(registry):
    registry.register(ModelSpec(name="tiny", source="user", build_model=lambda tier: None,
                                build_inputs=lambda tier, bs: (), batch_size={"small": 2, "full": 2}))


def pytest_xla_register_backends(register):
    register(Backend("mine", "a backend of my own", dynamo_backend="openxla"))


def pytest_xla_register_patches(register, registry):
    register(Patch("nothing", "changes nothing", lambda: {}, lambda module: None))
    assert "nothing" in registry
"""

TEST = """
from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import backends, patches
from pytest_xla_dynamo.session import get_session


def test_registered(request):
    session = get_session(request.config)
    assert session.backends is backends.BACKENDS and "mine" in session.backends
    assert zoo.model_names()[-1] == "tiny" and patches.patch_names()[-1] == "nothing"
    assert session.xcfg.models == ("tiny",) and session.xcfg.backends == ("mine",)
"""


def test_the_hooks_take_the_registry_or_its_register(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_registered=TEST)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-models=tiny", "--xla-backend=mine",
                                           "--xla-patch=nothing")
    result.assert_outcomes(passed=1)
