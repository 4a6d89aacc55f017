"""Tests of the zoo's model tables (torchvision_models, transformers_models, timm_models, table).

The spec checks are pure logic; the build checks really build each seed model at the small tier on
CPU (random init, no download) and run one forward pass, and skip where the model's library is missing.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sample_data import SEED_ORDER, buildable

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.zoo import table, timm_models, torchvision_models, transformers_models
from pytest_xla_dynamo.zoo.family import FAMILIES

# (input shape, dtype name) of each model's small-tier inputs, and of the full tier's at batch 1
SMALL_INPUTS = {
    "resnet18": ((2, 3, 64, 64), "float32"),
    "resnet50": ((2, 3, 64, 64), "float32"),
    "resnext50_32x4d": ((2, 3, 64, 64), "float32"),
    "alexnet": ((2, 3, 224, 224), "float32"),
    "mobilenet_v2": ((2, 3, 64, 64), "float32"),
    "mnasnet1_0": ((2, 3, 64, 64), "float32"),
    "vgg16": ((1, 3, 224, 224), "float32"),
    "BERT_pytorch": ((2, 32), "int64"),
    "timm_vision_transformer": ((2, 3, 64, 64), "float32"),
}
FULL_INPUTS_BATCH_1 = {name: ((1, 128), "int64") if name == "BERT_pytorch" else ((1, 3, 224, 224), "float32")
                       for name in SEED_ORDER}
# small-tier output shape: a 10-class head; BERT's masked-LM logits over its 1000-word vocabulary
SMALL_OUTPUTS = {name: (SMALL_INPUTS[name][0][0], 10) for name in SEED_ORDER} | {"BERT_pytorch": (2, 32, 1000)}

ROOT = Path(__file__).resolve().parents[1]


# --- built-in specs ----------------------------------------------------------------------


def test_seed_names_in_seed_order() -> None:
    assert zoo.model_names()[: len(SEED_ORDER)] == SEED_ORDER  # the seed's first, then the broad collections
    assert zoo.models_in(["seed"]) == SEED_ORDER
    assert zoo.collection_names() == ["seed", "torchvision", "transformers", "timm", *FAMILIES]


def test_tables_hold_the_seed_in_order() -> None:
    names = [
        *(row.name for row in torchvision_models.ROWS if row.collection == "seed"),
        *(row.name for row in transformers_models.ROWS if row.collection == "seed"),
        *(row.name for row in timm_models.ROWS if row.collection == "seed"),
    ]
    assert names == SEED_ORDER
    for module in (torchvision_models, transformers_models, timm_models):
        assert all(s.source == module.SOURCE and s.requires == module.REQUIRES for s in module.specs())


def test_broad_collections() -> None:
    """Issue 16: at least 60 models beyond the seed's nine, named ``<collection>.<name>``, unique."""
    broad = [n for n in zoo.model_names() if zoo.get_model(n).collection not in ("seed", *FAMILIES)]
    assert len(broad) >= 60 and len(set(broad)) == len(broad)
    for name in broad:
        spec = zoo.get_model(name)
        assert name.startswith(f"{spec.collection}.") and spec.collection == spec.source
        assert spec.batch("small") >= 1 and "small" in spec.description and "full" in spec.description


@pytest.mark.parametrize("name", SEED_ORDER)
def test_builtin_specs_are_complete(name: str) -> None:
    spec = zoo.get_model(name)
    assert spec.name == name
    assert spec.source in ("torchvision", "transformers", "timm")
    assert spec.source in spec.requires
    assert spec.batch("small") >= 1 and spec.batch("full") >= spec.batch("small")
    assert "small" in spec.description and "full" in spec.description
    assert callable(spec.build_model) and callable(spec.build_inputs) and callable(spec.loss)
    assert spec.collection == "seed"


def test_builtin_sources_and_dropout() -> None:
    sources = {n: zoo.get_model(n).source for n in SEED_ORDER}
    assert sources["BERT_pytorch"] == "transformers"
    assert sources["timm_vision_transformer"] == "timm"
    assert {sources[n] for n in SEED_ORDER[:7]} == {"torchvision"}
    dropout = {n for n in SEED_ORDER if zoo.get_model(n).has_dropout}
    assert dropout == {"alexnet", "mobilenet_v2", "mnasnet1_0", "vgg16", "BERT_pytorch", "timm_vision_transformer"}


def test_small_tier_batch_sizes() -> None:
    small = {n: zoo.get_model(n).batch("small") for n in SEED_ORDER}
    assert small == {n: 1 if n == "vgg16" else 2 for n in SEED_ORDER}


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


def test_descriptions() -> None:
    assert zoo.get_model("resnet18").description == (
        "torchvision.models.resnet18(weights=None). small: 64x64 images, batch 2, 10 classes. "
        "full: 224x224, batch 16 (torchbench train batch), 1000 classes."
    )
    assert zoo.get_model("vgg16").description == (
        "torchvision.models.vgg16(weights=None). small: 224x224 images, batch 1, 10 classes "
        "(224: AdaptiveAvgPool2d(7) needs a 7x7 feature map to stay on XLA). full: 224x224, batch 64 "
        "(torchbench train batch), 1000 classes."
    )
    assert zoo.get_model("BERT_pytorch").description == (
        "transformers BertForMaskedLM from a BertConfig (random init, eager attention, no download), "
        "forward(input_ids) -> logits. small: hidden 128, 2 layers, 2 heads, vocab 1000, seq 32, batch 2. "
        "full: hidden 768, 12 layers, 12 heads, vocab 20005, seq 128, batch 16 (torchbench BERT_pytorch)."
    )
    assert zoo.get_model("timm_vision_transformer").description == (
        "timm.create_model(pretrained=False). small: vit_tiny_patch16_224 with img_size=64, depth=4, "
        "10 classes, batch 2. full: vit_small_patch16_224, 224x224, batch 32 (torchbench)."
    )


# --- table helpers -----------------------------------------------------------------------


def test_per_tier() -> None:
    assert table.per_tier((2, 16)) == {"small": 2, "full": 16}
    for bad in [(2,), (2, 16, 32)]:
        with pytest.raises(ValueError, match="one value per tier"):
            table.per_tier(bad)


def test_make_spec() -> None:
    def build(tier: str) -> Any:
        return None

    spec = table.make_spec(
        "toy", "user", build_model=build, build_inputs=lambda t, b: (), batch=(1, 4), has_dropout=True,
        tolerance=table.Tolerance(2e-3, "why"), requires=["torch"], description="d", collection="extra",
    )
    assert (spec.name, spec.source, spec.build_model, spec.has_dropout) == ("toy", "user", build, True)
    assert dict(spec.batch_size) == {"small": 1, "full": 4}
    assert (spec.tolerance, spec.tolerance_reason) == (2e-3, "why")
    assert (spec.requires, spec.description, spec.collection) == (("torch",), "d", "extra")
    plain = table.make_spec(
        "toy", "user", build_model=build, build_inputs=lambda t, b: (), batch=(1, 4), has_dropout=False,
        tolerance=None, requires=(), description="",
    )
    assert (plain.tolerance, plain.tolerance_reason, plain.collection) == (None, "", "seed")


def test_torchbench_higher_tolerance() -> None:
    assert table.TORCHBENCH_HIGHER.value == 1e-3
    assert table.SMALL_CLASSES == 10 and table.FULL_CLASSES == 1000


def test_factories_reject_unknown_tiers_before_importing() -> None:
    code = (
        "import sys, pytest_xla_dynamo.zoo as z\n"
        "for name in z.model_names():\n"
        "    spec = z.get_model(name)\n"
        "    for call in (lambda: spec.build_model('medium'), lambda: spec.build_inputs('medium', 1)):\n"
        "        try:\n"
        "            call()\n"
        "        except ValueError as exc:\n"
        "            assert \"unknown tier 'medium'\" in str(exc), exc\n"
        "        else:\n"
        "            raise AssertionError(name)\n"
        "heavy = [m for m in ('torch', 'torchvision', 'timm', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_transformers_module_attribute() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        transformers_models.Nope  # noqa: B018


# --- builds (real torch, CPU) ------------------------------------------------------------


@pytest.mark.parametrize("name", SEED_ORDER)
def test_inputs_per_tier(name: str) -> None:
    spec = buildable(name)
    import torch

    torch.manual_seed(0)
    small = spec.build_inputs("small", spec.batch("small"))
    full = spec.build_inputs("full", 1)
    for inputs, (shape, dtype) in ((small, SMALL_INPUTS[name]), (full, FULL_INPUTS_BATCH_1[name])):
        assert isinstance(inputs, tuple) and len(inputs) == 1
        assert tuple(inputs[0].shape) == shape and inputs[0].dtype == getattr(torch, dtype)
        assert inputs[0].device.type == "cpu"
    if name == "BERT_pytorch":
        assert 0 <= int(small[0].min()) and int(small[0].max()) < 1000
        assert int(full[0].max()) < 20005


@pytest.mark.parametrize("name", SEED_ORDER)
def test_small_tier_builds_and_runs(name: str) -> None:
    spec = buildable(name)
    import torch
    from torch.nn.modules.dropout import _DropoutNd

    torch.manual_seed(0)
    model = spec.build_model("small")
    inputs = spec.build_inputs("small", spec.batch("small"))
    assert isinstance(model, torch.nn.Module)
    assert all(p.device.type == "cpu" and p.dtype == torch.float32 for p in model.parameters())
    assert any(isinstance(m, _DropoutNd) for m in model.modules()) == spec.has_dropout
    model.eval()
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == SMALL_OUTPUTS[name]
    assert bool(torch.isfinite(out).all())
    loss = spec.loss(out)
    assert loss.dim() == 0 and bool(torch.isfinite(loss))


@pytest.mark.parametrize("name", ["resnet18", "BERT_pytorch", "timm_vision_transformer"])
def test_small_build_is_deterministic_given_the_seed(name: str) -> None:
    spec = buildable(name)
    import torch

    def build(seed: int) -> tuple[dict[str, Any], tuple[Any, ...]]:
        torch.manual_seed(seed)
        return spec.build_model("small").state_dict(), spec.build_inputs("small", spec.batch("small"))

    (sd_a, in_a), (sd_b, in_b), (sd_c, _) = build(0), build(0), build(1)
    assert list(sd_a) == list(sd_b)
    assert all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)
    assert all(torch.equal(a, b) for a, b in zip(in_a, in_b, strict=True))
    assert not all(torch.equal(sd_a[k], sd_c[k]) for k in sd_a)


def test_bert_wrapper_is_picklable() -> None:
    spec = buildable("BERT_pytorch")
    import torch

    torch.manual_seed(0)
    model = spec.build_model("small").eval()
    assert type(model).__name__ == "MaskedLMLogits"
    assert type(model).__module__ == "pytest_xla_dynamo.zoo.transformers_models"
    assert transformers_models.MaskedLMLogits is type(model)
    clone = pickle.loads(pickle.dumps(model))
    assert type(clone) is type(model)
    (ids,) = spec.build_inputs("small", 2)
    with torch.no_grad():
        assert torch.equal(model(ids), clone(ids))


# --- import hygiene ----------------------------------------------------------------------


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, pytest_xla_dynamo.zoo as z; z.resolve_models('all'); z.get_model('vgg16').batch('small'); "
        "heavy = [m for m in ('torch', 'torchvision', 'timm', 'transformers', 'torch_xla', 'diffusers', "
        "'torch_geometric', 'torchaudio') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
