"""Unit tests of pytest_xla_dynamo.zoo: registry, name resolution and spec validation.

Pure logic, no torch: the factories are never called here (benchmarks/zoo_probe.py exercises them).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo import zoo

SEED_ORDER = [
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "alexnet",
    "mobilenet_v2",
    "mnasnet1_0",
    "vgg16",
    "BERT_pytorch",
    "timm_vision_transformer",
]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _restore_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(zoo, "_REGISTRY", dict(zoo._REGISTRY))
    yield


def _spec(name: str = "toy", **kw: Any) -> zoo.ModelSpec:
    args: dict[str, Any] = {
        "name": name,
        "source": "user",
        "build_model": lambda tier: None,
        "build_inputs": lambda tier, bs: (),
        "batch_size": {"small": 2, "full": 8},
    }
    args.update(kw)
    return zoo.ModelSpec(**args)


# --- built-in models ---------------------------------------------------------------------


def test_seed_names_in_seed_order() -> None:
    assert zoo.model_names() == SEED_ORDER


def test_tiers() -> None:
    assert zoo.TIERS == ("small", "full")


@pytest.mark.parametrize("name", SEED_ORDER)
def test_builtin_specs_are_complete(name: str) -> None:
    spec = zoo.get_model(name)
    assert spec.name == name
    assert spec.source in ("torchvision", "transformers", "timm")
    assert spec.source in spec.requires
    assert spec.batch("small") >= 1 and spec.batch("full") >= spec.batch("small")
    assert "small" in spec.description and "full" in spec.description
    assert callable(spec.build_model) and callable(spec.build_inputs) and callable(spec.loss)


def test_builtin_sources_and_dropout() -> None:
    sources = {n: zoo.get_model(n).source for n in SEED_ORDER}
    assert sources["BERT_pytorch"] == "transformers"
    assert sources["timm_vision_transformer"] == "timm"
    assert {sources[n] for n in SEED_ORDER[:7]} == {"torchvision"}
    dropout = {n for n in SEED_ORDER if zoo.get_model(n).has_dropout}
    assert dropout == {"alexnet", "mobilenet_v2", "mnasnet1_0", "vgg16", "BERT_pytorch", "timm_vision_transformer"}


def test_full_tier_uses_torchbench_train_batch_sizes() -> None:
    full = {n: zoo.get_model(n).batch("full") for n in SEED_ORDER}
    assert full == {
        "resnet18": 16,
        "resnet50": 32,
        "resnext50_32x4d": 8,
        "alexnet": 128,
        "mobilenet_v2": 96,
        "mnasnet1_0": 32,
        "vgg16": 64,
        "BERT_pytorch": 16,
        "timm_vision_transformer": 32,
    }


def test_tolerance_only_for_torchbench_higher_bucket() -> None:
    with_tol = {n: zoo.get_model(n).tolerance for n in SEED_ORDER if zoo.get_model(n).tolerance is not None}
    assert with_tol == {"alexnet": 1e-3, "vgg16": 1e-3}
    for name in with_tol:
        reason = zoo.get_model(name).tolerance_reason
        assert "torchbench.yaml" in reason and "higher" in reason and "88449" in reason


def test_batch_size_is_read_only() -> None:
    spec = zoo.get_model("resnet18")
    with pytest.raises(TypeError):
        spec.batch_size["small"] = 99  # type: ignore[index]


# --- resolve_models ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "all", " all ", [], ["all"], ",", " , "])
def test_resolve_all(value: Any) -> None:
    assert zoo.resolve_models(value) == tuple(SEED_ORDER)


def test_resolve_comma_list_keeps_given_order() -> None:
    assert zoo.resolve_models("vgg16,resnet18") == ("vgg16", "resnet18")
    assert zoo.resolve_models(" alexnet , BERT_pytorch ,") == ("alexnet", "BERT_pytorch")


def test_resolve_dedupes() -> None:
    assert zoo.resolve_models("resnet18,vgg16,resnet18") == ("resnet18", "vgg16")
    assert zoo.resolve_models(["vgg16", "vgg16,alexnet"]) == ("vgg16", "alexnet")


def test_resolve_sequence() -> None:
    assert zoo.resolve_models(("mnasnet1_0", "resnet50")) == ("mnasnet1_0", "resnet50")


def test_resolve_all_inside_list_expands_in_place() -> None:
    assert zoo.resolve_models("vgg16,all") == ("vgg16", *[n for n in SEED_ORDER if n != "vgg16"])


def test_resolve_unknown_names_bad_and_valid() -> None:
    with pytest.raises(zoo.UnknownModelError) as info:
        zoo.resolve_models("resnet18,resnet19,nope")
    msg = str(info.value)
    assert "'resnet19'" in msg and "'nope'" in msg
    assert "'resnet18'" not in msg.split(";")[0]  # the good one is not reported as bad
    for name in SEED_ORDER:
        assert name in msg
    assert info.value.unknown == ("resnet19", "nope")
    assert info.value.valid == tuple(SEED_ORDER)
    assert isinstance(info.value, ValueError)


def test_resolve_is_case_sensitive_but_hints() -> None:
    with pytest.raises(zoo.UnknownModelError, match=r"did you mean.*'BERT_pytorch'"):
        zoo.resolve_models("bert_pytorch")


def test_resolve_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        zoo.resolve_models(["resnet18", 3])  # type: ignore[list-item]


# --- registry ----------------------------------------------------------------------------


def test_get_model_unknown() -> None:
    with pytest.raises(zoo.UnknownModelError) as info:
        zoo.get_model("resnet1000")
    assert "'resnet1000'" in str(info.value)
    assert "resnet18" in str(info.value) and "timm_vision_transformer" in str(info.value)


def test_register_appends_and_resolves() -> None:
    zoo.register_model(_spec("toy"))
    assert zoo.model_names() == [*SEED_ORDER, "toy"]
    assert zoo.get_model("toy").source == "user"
    assert zoo.resolve_models("toy,resnet18") == ("toy", "resnet18")
    assert zoo.resolve_models(None)[-1] == "toy"


def test_register_duplicate_raises() -> None:
    zoo.register_model(_spec("toy"))
    with pytest.raises(ValueError, match="already registered"):
        zoo.register_model(_spec("toy"))
    with pytest.raises(ValueError, match="already registered"):
        zoo.register_model(_spec("resnet18"))


def test_register_replace_keeps_position() -> None:
    replacement = _spec("resnet50", description="mine")
    zoo.register_model(replacement, replace=True)
    assert zoo.get_model("resnet50") is replacement
    assert zoo.model_names() == SEED_ORDER


def test_register_needs_a_spec() -> None:
    with pytest.raises(TypeError):
        zoo.register_model("resnet18")  # type: ignore[arg-type]


def test_registry_is_restored_between_tests() -> None:
    assert "toy" not in zoo.model_names()


# --- ModelSpec validation ----------------------------------------------------------------


def test_tolerance_requires_reason() -> None:
    with pytest.raises(ValueError, match="tolerance_reason"):
        _spec(tolerance=1e-3)
    with pytest.raises(ValueError, match="tolerance_reason"):
        _spec(tolerance=1e-3, tolerance_reason="   ")
    spec = _spec(tolerance=1e-3, tolerance_reason="drifts on XLA")
    assert spec.tolerance == 1e-3


@pytest.mark.parametrize("tol", [0.0, -1e-3])
def test_tolerance_must_be_positive(tol: float) -> None:
    with pytest.raises(ValueError, match="> 0"):
        _spec(tolerance=tol, tolerance_reason="x")


def test_batch_rejects_unknown_tier() -> None:
    spec = _spec()
    assert spec.batch("small") == 2 and spec.batch("full") == 8
    with pytest.raises(ValueError) as info:
        spec.batch("medium")
    assert "'medium'" in str(info.value) and "small" in str(info.value) and "full" in str(info.value)


def test_validate_tier() -> None:
    assert zoo.validate_tier("full") == "full"
    with pytest.raises(ValueError, match="'tiny'"):
        zoo.validate_tier("tiny")


@pytest.mark.parametrize(
    "sizes, match",
    [
        ({"small": 2}, "missing: full"),
        ({"small": 2, "full": 8, "huge": 64}, "unknown: huge"),
        ({"small": 0, "full": 8}, "positive int"),
        ({"small": 2, "full": 2.5}, "positive int"),
        ({"small": True, "full": 8}, "positive int"),
    ],
)
def test_batch_size_validation(sizes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _spec(batch_size=sizes)


def test_unknown_source() -> None:
    with pytest.raises(ValueError, match="source 'torchhub'"):
        _spec(source="torchhub")


@pytest.mark.parametrize("name", ["", "  ", "a,b", " x", "all"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        _spec(name)


def test_spec_is_frozen_and_hashable() -> None:
    spec = _spec()
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    assert hash(spec) == hash(spec)


def test_default_loss_is_lazy_reduce_to_scalar_loss() -> None:
    assert _spec().loss is zoo.ModelSpec.__dataclass_fields__["loss"].default


def test_missing_requirements() -> None:
    assert _spec(requires=("pytest", "sys")).missing_requirements() == []
    missing = _spec(requires=("pytest", "surely_not_installed_xyz", "no_such_pkg.sub")).missing_requirements()
    assert missing == ["surely_not_installed_xyz", "no_such_pkg.sub"]


def test_missing_requirements_does_not_import() -> None:
    code = (
        "import sys; from pytest_xla_dynamo import zoo; "
        "zoo.ModelSpec('t', 'user', lambda t: None, lambda t, b: (), {'small': 1, 'full': 1}, "
        "requires=('tabulate',)).missing_requirements(); "
        "assert 'tabulate' not in sys.modules, 'find_spec imported the module'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- import hygiene ----------------------------------------------------------------------


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, pytest_xla_dynamo.zoo as z; z.resolve_models('all'); z.get_model('vgg16').batch('small'); "
        "heavy = [m for m in ('torch', 'torchvision', 'timm', 'transformers', 'torch_xla') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
