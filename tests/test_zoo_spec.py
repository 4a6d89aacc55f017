"""Unit tests of pytest_xla_dynamo.zoo.spec: ModelSpec validation, tiers, the default loss, requirements.

Pure logic, no torch: the factories are never called here (tests/test_zoo_models.py builds the models).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sample_data import toy_spec

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.zoo import spec as zoo_spec

ROOT = Path(__file__).resolve().parents[1]


def test_tiers() -> None:
    assert zoo.TIERS == ("small", "full")


def test_public_names_are_the_spec_modules() -> None:
    assert zoo.ModelSpec is zoo_spec.ModelSpec
    assert zoo.TIERS is zoo_spec.TIERS and zoo.SOURCES is zoo_spec.SOURCES
    assert zoo.validate_tier is zoo_spec.validate_tier
    assert zoo.SOURCES == ("torchvision", "transformers", "timm", "torch", "diffusers", "torch_geometric", "torchaudio",
                           "user")


def test_tolerance_requires_reason() -> None:
    with pytest.raises(ValueError, match="tolerance_reason"):
        toy_spec(tolerance=1e-3)
    with pytest.raises(ValueError, match="tolerance_reason"):
        toy_spec(tolerance=1e-3, tolerance_reason="   ")
    spec = toy_spec(tolerance=1e-3, tolerance_reason="drifts on XLA")
    assert spec.tolerance == 1e-3


@pytest.mark.parametrize("tol", [0.0, -1e-3])
def test_tolerance_must_be_positive(tol: float) -> None:
    with pytest.raises(ValueError, match="> 0"):
        toy_spec(tolerance=tol, tolerance_reason="x")


@pytest.mark.parametrize("tol", [True, "1e-3"])
def test_tolerance_must_be_a_number(tol: Any) -> None:
    with pytest.raises(TypeError, match="tolerance must be a float or None"):
        toy_spec(tolerance=tol, tolerance_reason="x")


def test_batch_rejects_unknown_tier() -> None:
    spec = toy_spec()
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
        toy_spec(batch_size=sizes)


def test_batch_size_is_copied_and_read_only() -> None:
    sizes = {"small": 2, "full": 8}
    spec: zoo.ModelSpec = toy_spec(batch_size=sizes)
    sizes["small"] = 99
    assert spec.batch("small") == 2
    with pytest.raises(TypeError):
        spec.batch_size["small"] = 99  # type: ignore[index]


def test_unknown_source() -> None:
    with pytest.raises(ValueError, match="source 'torchhub'"):
        toy_spec(source="torchhub")


@pytest.mark.parametrize("name", ["", "  ", "a,b", " x", "all"])
def test_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        toy_spec(name)


def test_bad_name_messages() -> None:
    with pytest.raises(ValueError, match=r"ModelSpec.name must be a non-empty string, got ''"):
        toy_spec("")
    with pytest.raises(ValueError, match=r"ModelSpec.name 'a,b' must not contain commas"):
        toy_spec("a,b")
    with pytest.raises(ValueError, match=r"ModelSpec.name 'all' is reserved \(it selects every model\)"):
        toy_spec("all")


def test_uncallable_factories() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        toy_spec(build_model="resnet18")
    with pytest.raises(TypeError, match="must be callable"):
        toy_spec(loss=None)


def test_collection_defaults_to_seed() -> None:
    assert toy_spec().collection == "seed"
    assert toy_spec(collection="timm").collection == "timm"


@pytest.mark.parametrize(
    "collection, match",
    [
        ("", "collection must be a non-empty string"),
        ("  ", "collection must be a non-empty string"),
        (None, "collection must be a non-empty string"),
        ("seed,timm", "must not contain commas"),
        (" seed", "must not contain commas or surrounding spaces"),
        ("all", r"collection 'all' is reserved \(it selects every collection\)"),
    ],
)
def test_bad_collections(collection: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        toy_spec(collection=collection)
    assert "model 'toy'" in str(info.value)


def test_spec_is_frozen_and_hashable() -> None:
    spec: zoo.ModelSpec = toy_spec()
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    assert hash(spec) == hash(spec)


def test_default_loss_is_lazy_reduce_to_scalar_loss() -> None:
    assert toy_spec().loss is zoo.ModelSpec.__dataclass_fields__["loss"].default


def test_default_loss_is_torchbench_reduce_to_scalar_loss() -> None:
    torch = pytest.importorskip("torch")
    from torch._dynamo.testing import reduce_to_scalar_loss

    out = (torch.arange(6.0).reshape(2, 3), [torch.ones(4)])
    loss = toy_spec().loss(out)
    assert isinstance(loss, torch.Tensor)
    assert torch.equal(loss, reduce_to_scalar_loss(out))


def test_missing_requirements() -> None:
    assert toy_spec(requires=("pytest", "sys")).missing_requirements() == []
    missing = toy_spec(requires=("pytest", "surely_not_installed_xyz", "no_such_pkg.sub")).missing_requirements()
    assert missing == ["surely_not_installed_xyz", "no_such_pkg.sub"]


def test_requires_is_stored_as_tuple() -> None:
    assert toy_spec(requires=["pytest", "sys"]).requires == ("pytest", "sys")


def test_missing_requirements_does_not_import() -> None:
    code = (
        "import sys; from pytest_xla_dynamo import zoo; "
        "zoo.ModelSpec('t', 'user', lambda t: None, lambda t, b: (), {'small': 1, 'full': 1}, "
        "requires=('tabulate',)).missing_requirements(); "
        "assert 'tabulate' not in sys.modules, 'find_spec imported the module'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
