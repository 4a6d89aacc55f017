"""Unit tests of pytest_xla_dynamo.zoo.registry: registration, look-up, name resolution, unknown names.

Pure logic, no torch: the factories are never called here (tests/test_zoo_models.py builds the models).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sample_data import SEED_ORDER, toy_spec

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.zoo import registry


@pytest.fixture(autouse=True)
def _restore_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(registry.MODELS, "_items", dict(registry.MODELS._items))
    yield


def test_public_names_are_the_registry_modules() -> None:
    assert zoo.UnknownModelError is registry.UnknownModelError
    assert zoo.get_model is registry.get_model and zoo.model_names is registry.model_names
    assert zoo.register_model is registry.register_model and zoo.resolve_models is registry.resolve_models


# --- resolve_models ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "all", " all ", [], ["all"], ",", " , "])
def test_resolve_all(value: Any) -> None:
    assert zoo.resolve_models(value) == tuple(zoo.model_names())  # every model, the broad collections too


def test_resolve_comma_list_keeps_given_order() -> None:
    assert zoo.resolve_models("vgg16,resnet18") == ("vgg16", "resnet18")
    assert zoo.resolve_models(" alexnet , BERT_pytorch ,") == ("alexnet", "BERT_pytorch")


def test_resolve_dedupes() -> None:
    assert zoo.resolve_models("resnet18,vgg16,resnet18") == ("resnet18", "vgg16")
    assert zoo.resolve_models(["vgg16", "vgg16,alexnet"]) == ("vgg16", "alexnet")


def test_resolve_sequence() -> None:
    assert zoo.resolve_models(("mnasnet1_0", "resnet50")) == ("mnasnet1_0", "resnet50")


def test_resolve_all_inside_list_expands_in_place() -> None:
    assert zoo.resolve_models("vgg16,all") == ("vgg16", *[n for n in zoo.model_names() if n != "vgg16"])


def test_resolve_unknown_names_bad_and_valid() -> None:
    with pytest.raises(zoo.UnknownModelError) as info:
        zoo.resolve_models("resnet18,resnet19,nope")
    msg = str(info.value)
    assert "'resnet19'" in msg and "'nope'" in msg
    assert "'resnet18'" not in msg.split(";")[0]  # the good one is not reported as bad
    for name in SEED_ORDER:
        assert name in msg
    assert info.value.unknown == ("resnet19", "nope")
    assert info.value.valid == tuple(zoo.model_names())
    assert isinstance(info.value, ValueError)


def test_resolve_is_case_sensitive_but_hints() -> None:
    with pytest.raises(zoo.UnknownModelError, match=r"did you mean.*'BERT_pytorch'"):
        zoo.resolve_models("bert_pytorch")


def test_resolve_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        zoo.resolve_models(["resnet18", 3])  # type: ignore[list-item]


# --- UnknownModelError -------------------------------------------------------------------


def test_unknown_model_error_defaults_to_registered_names() -> None:
    err = zoo.UnknownModelError("resnet19")
    assert err.unknown == ("resnet19",) and err.valid == tuple(zoo.model_names())
    assert str(err).startswith("unknown model 'resnet19'; valid models: resnet18, resnet50,")
    assert "(did you mean: 'resnet19' -> 'resnet18'?)" in str(err)


def test_unknown_model_error_with_nothing_registered() -> None:
    err = zoo.UnknownModelError(["a", "b"], [])
    assert str(err) == "unknown models 'a', 'b'; valid models: (none registered)"


# --- registry ----------------------------------------------------------------------------


def test_get_model_unknown() -> None:
    with pytest.raises(zoo.UnknownModelError) as info:
        zoo.get_model("resnet1000")
    assert "'resnet1000'" in str(info.value)
    assert "resnet18" in str(info.value) and "timm_vision_transformer" in str(info.value)


def test_get_model_unhashable_name() -> None:
    with pytest.raises(zoo.UnknownModelError, match=r"unknown model \"\['resnet18'\]\""):
        zoo.get_model(["resnet18"])  # type: ignore[arg-type]


def test_register_appends_and_resolves() -> None:
    zoo.register_model(toy_spec("toy"))
    assert zoo.model_names()[-1] == "toy"
    assert zoo.models_in(["seed"]) == [*SEED_ORDER, "toy"]  # a user model's collection: seed
    assert zoo.get_model("toy").source == "user"
    assert zoo.resolve_models("toy,resnet18") == ("toy", "resnet18")
    assert zoo.resolve_models(None)[-1] == "toy"


def test_register_duplicate_raises() -> None:
    zoo.register_model(toy_spec("toy"))
    with pytest.raises(ValueError, match="already registered"):
        zoo.register_model(toy_spec("toy"))
    with pytest.raises(ValueError, match="already registered"):
        zoo.register_model(toy_spec("resnet18"))


def test_register_replace_keeps_position() -> None:
    replacement = toy_spec("resnet50", description="mine")
    zoo.register_model(replacement, replace=True)
    assert zoo.get_model("resnet50") is replacement
    assert zoo.models_in(["seed"]) == SEED_ORDER


def test_register_needs_a_spec() -> None:
    with pytest.raises(TypeError):
        zoo.register_model("resnet18")  # type: ignore[arg-type]


def test_registry_is_restored_between_tests() -> None:
    assert "toy" not in zoo.model_names()
