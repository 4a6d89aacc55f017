"""patches.py, unit tests with torch: what the plugin's autouse fixture activates for a test, undone after.

Without torch (a test that asked for patches skips, any other is left alone): test_faults.py, in a
virtual environment that has no torch.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_xla_dynamo import markers
from pytest_xla_dynamo.core import patches

torch = pytest.importorskip("torch")
from torch.nn.modules import dropout, pooling  # noqa: E402


class Item:
    def __init__(self, *marks: pytest.MarkDecorator, fixturenames: tuple[str, ...] = ()) -> None:
        self.marks = [m.mark for m in marks]
        self.fixturenames = fixturenames

    def iter_markers(self, name: str | None = None) -> Any:
        return (m for m in self.marks if name is None or m.name == name)


def test_activate_swaps_and_restores() -> None:
    with markers.activate(["maxpool_to_avgpool", "maxpool_to_avgpool"]) as active:
        assert active == ["maxpool_to_avgpool"]
        assert isinstance(torch.nn.MaxPool2d(2), pooling.AvgPool2d)
        assert torch.nn.Dropout is dropout.Dropout
    assert torch.nn.MaxPool2d is pooling.MaxPool2d


def test_activate_nothing() -> None:
    with markers.activate([]) as active:
        assert active == []
        assert torch.nn.MaxPool2d is pooling.MaxPool2d
    with markers.activate([], required=False) as active:
        assert active == []


def test_activate_restores_when_the_test_fails() -> None:
    with pytest.raises(RuntimeError), markers.activate(["dropout_to_identity"]):
        assert torch.nn.Dropout is not dropout.Dropout
        raise RuntimeError("the test failed")
    assert torch.nn.Dropout is dropout.Dropout


def test_activate_checks_every_name_first() -> None:
    with pytest.raises(patches.UnknownPatchError, match="unknown patch 'nope'; valid: maxpool_to_avgpool"):
        with markers.activate(["maxpool_to_avgpool", "nope"]):
            pass
    assert torch.nn.MaxPool2d is pooling.MaxPool2d


def test_for_test_adds_the_markers_to_the_session_patches() -> None:
    item = Item(pytest.mark.xla_patch("dropout_to_identity"), pytest.mark.xla_patch("maxpool_to_avgpool"))
    with markers.for_test(item, ["maxpool_to_avgpool"]) as active:  # type: ignore[arg-type]
        assert active == ["maxpool_to_avgpool", "dropout_to_identity"]
        assert isinstance(torch.nn.Dropout(0.1), torch.nn.Identity)
    assert torch.nn.Dropout is dropout.Dropout
    with markers.for_test(Item(), []) as active:  # type: ignore[arg-type]
        assert active == []


def test_torch_is_found() -> None:
    assert patches.torch_missing() is False


def test_random_modules_lists_what_draws_random_numbers() -> None:
    """Dropout and stochastic depth with a rate above 0, by name; the same modules at rate 0 are left out."""
    from torch import nn

    ops = pytest.importorskip("torchvision.ops")
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0), nn.Dropout(0.25), nn.Sequential(nn.Dropout2d(0.5)),
                          ops.StochasticDepth(0.1, "row"), ops.StochasticDepth(0.0, "row"))
    assert patches.random_modules(model) == ["2 (Dropout p=0.25)", "3.0 (Dropout2d p=0.5)",
                                             "4 (StochasticDepth p=0.1)"]
    assert patches.random_modules(nn.Dropout(0.1)) == ["(model) (Dropout p=0.1)"]
    assert patches.random_modules(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0))) == []


def test_attention_dropout_is_listed_and_switched_off_inside_transformer_layers() -> None:
    """nn.MultiheadAttention's attention dropout is a float, not a module: it is listed beside the Dropout modules
    nn.Transformer's layers build (out of reach of the class-level swap), and the patch zeroes it at instance level
    (a copy sharing the parameters, the original's rate back when undone): a patched step draws no random number."""
    import contextlib

    from torch import nn

    model = nn.Transformer(8, 2, 1, 1, 16, dropout=0.1, batch_first=True).train()
    found = patches.random_modules(model)
    assert "encoder.layers.0.self_attn (MultiheadAttention dropout=0.1)" in found
    assert "decoder.layers.0.multihead_attn (MultiheadAttention dropout=0.1)" in found
    assert "encoder.layers.0.dropout1 (Dropout p=0.1)" in found and len(found) == 10  # 3 MHA, 7 Dropout
    weight = model.encoder.layers[0].self_attn.in_proj_weight
    stack = contextlib.ExitStack()
    with stack:
        assert patches.patch_module(model, ["dropout_to_identity"], stack) == 10
        assert patches.random_modules(model) == []
        assert model.encoder.layers[0].self_attn.in_proj_weight is weight
        src, tgt = torch.randn(2, 5, 8), torch.randn(2, 4, 8)
        state = torch.random.get_rng_state()
        model(src, tgt)
        assert torch.equal(torch.random.get_rng_state(), state)
    assert patches.random_modules(model) == found
    assert model.encoder.layers[0].self_attn.dropout == 0.1


def test_layer_drop_is_listed_at_every_rate_and_switched_off() -> None:
    """torchaudio's wav2vec2 encoder stack draws ``torch.rand(1).item()`` per layer in training whatever its
    ``layer_drop`` (a random module at rate 0 too); torch.nn.Transformer, another class of that name, is not one.
    The dropout patch swaps the stack for one that runs every layer without the draw, and undoes the swap."""
    import contextlib

    from torch import nn

    models = pytest.importorskip("torchaudio.models")
    model = models.wav2vec2_model("group_norm", [(4, 10, 5)], False, 8, 0.0, 4, 2, 1, 2, 0.0, 8, 0.0, 0.0, False,
                                  0.0, None).train()
    assert patches.random_modules(model) == ["encoder.transformer (Transformer layer_drop=0)"]
    assert patches.random_modules(nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)) == []
    stack = contextlib.ExitStack()
    with stack:
        assert patches.patch_module(model, ["dropout_to_identity"], stack) == 6  # the stack and 5 Dropout(0.0)
        assert type(model.encoder.transformer).__name__ == "TransformerWithoutLayerDrop"
        assert patches.random_modules(model) == []
        waveform = torch.randn(1, 60)
        state = torch.random.get_rng_state()
        model(waveform)
        assert torch.equal(torch.random.get_rng_state(), state)
    assert patches.random_modules(model) == ["encoder.transformer (Transformer layer_drop=0)"]


@pytest.mark.parametrize("has_dropout", [False, True])
def test_engine_refuses_a_spec_hiding_its_dropout(has_dropout: bool) -> None:
    """A spec saying has_dropout=False for a model with Dropout(p>0) is the zoo's mistake, said at build
    time; declared, the dropout patch switches the module off."""
    from torch import nn

    from pytest_xla_dynamo.config import XlaConfig
    from pytest_xla_dynamo.core.backends import default_registry
    from pytest_xla_dynamo.core.engine import CaseEngine
    from pytest_xla_dynamo.zoo.table import make_spec

    def build(tier: str) -> Any:
        return nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.3))

    def inputs(tier: str, batch: int) -> Any:
        return (torch.ones(batch, 2),)

    spec = make_spec("hidden_dropout", "user", build_model=build, build_inputs=inputs, batch=(2, 2),
                     has_dropout=has_dropout, tolerance=None, requires=(), description="a linear layer and a dropout")
    engine = CaseEngine(XlaConfig(), default_registry())
    key = engine.key(spec, engine.eager, "train")
    if has_dropout:
        model, _ = engine.build(key, spec)
        assert patches.random_modules(model) == []
    else:
        with pytest.raises(ValueError, match=r"'hidden_dropout' says has_dropout=False.*1 \(Dropout p=0\.3\)"):
            engine.build(key, spec)
        # in eval no dropout module draws: inference is not refused
        model, _ = engine.build(engine.key(spec, engine.eager, "infer"), spec)
        assert patches.random_modules(model) == ["1 (Dropout p=0.3)"]


def test_a_models_cases_share_one_cpu_copy_of_its_initial_weights() -> None:
    """Each shared case and reference of the (model, mode) in focus starts from one CPU model, built once
    (a CPU case copies its inputs, since they are shared); another (model, mode) frees it."""
    from pytest_xla_dynamo.config import XlaConfig
    from pytest_xla_dynamo.core.backends import default_registry
    from pytest_xla_dynamo.core.engine import CaseEngine
    from pytest_xla_dynamo.zoo.table import make_spec

    def build(tier: str) -> Any:
        return torch.nn.Linear(4, 2)

    def inputs(tier: str, batch: int) -> Any:
        return (torch.ones(batch, 4),)

    spec = make_spec("tiny_linear", "user", build_model=build, build_inputs=inputs, batch=(2, 2), has_dropout=False,
                     tolerance=None, requires=(), description="a linear layer")
    engine = CaseEngine(XlaConfig(), default_registry())
    key = engine.key(spec, engine.eager, "train")
    model, cpu_inputs = engine.initial(key, spec)
    assert engine.initial(key, spec)[0] is model
    weight = model.get_parameter("weight")
    case = engine.prepared(spec, engine.eager, "train")
    assert case.initial_state["weight"].data_ptr() == weight.data_ptr()  # aliased, not copied
    case_weight = case.model.get_parameter("weight")
    assert case_weight.data_ptr() != weight.data_ptr()  # the case steps its own copy
    assert case.inputs[0].data_ptr() != cpu_inputs[0].data_ptr()
    assert case.warmup is not None and case_weight.grad is None  # warmed up, idle: no gradients held
    case.step()
    assert not torch.equal(case_weight, weight) and case_weight.grad is not None
    fresh_model, _ = engine.build(key, spec)  # a caller that changes its model gets its own
    assert fresh_model is not model and torch.equal(fresh_model.get_parameter("weight"), weight)
    engine.focus("another_model", "train")
    assert engine.initial(key, spec)[0] is not model
