"""Dropout in a model owner's own models (issue 46): every random op found (dropout modules, nn.MultiheadAttention's
float attention dropout, functional calls), ``xla_patch("dropout_to_identity")`` reaching nn.Transformer's layers,
a refusal that names the own-model API's argument and is never proposed as an upstream issue, and inference never
refused for training-only randomness. The parity cases run on the real stack (pytester subprocesses, torch_xla on
the CPU)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")

TRANSLATOR = """
import torch
from torch import nn
from torch.nn import functional as F

VOCAB, PAD = 12, 0


class Translator(nn.Module):
    \"\"\"A tiny nn.Transformer translator: teacher forcing (the shifted target is the decoder's input), a causal
    mask and padding masks on both sides, nn.Transformer's default dropout 0.1.\"\"\"

    def __init__(self, dropout=0.1):
        super().__init__()
        self.src_emb = nn.Embedding(VOCAB, 16, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(VOCAB, 16, padding_idx=PAD)
        self.core = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                   dim_feedforward=32, dropout=dropout, batch_first=True)
        self.out = nn.Linear(16, VOCAB)

    def forward(self, src, tgt_in, *, src_pad, tgt_pad):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        h = self.core(self.src_emb(src), self.tgt_emb(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
                      tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.out(h)


class FunctionalDropout(nn.Module):
    \"\"\"A dropout no patch reaches: F.dropout in the model's own forward, on in training only.\"\"\"

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.b(F.dropout(torch.relu(self.a(x)), 0.2, self.training))


def make_translator():
    torch.manual_seed(0)
    return Translator()


def make_functional():
    torch.manual_seed(0)
    return FunctionalDropout()


def loss(out, targets):
    return F.cross_entropy(out.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=PAD)


SRC = torch.tensor([[3, 5, 7, 2, 9], [4, 6, 2, 0, 0]])
TGT = torch.tensor([[1, 8, 3, 4, 2], [1, 5, 9, 2, 0]])  # 1: begin of sequence
TGT_IN, TGT_OUT = TGT[:, :-1], TGT[:, 1:]
MASKS = {"src_pad": SRC == PAD, "tgt_pad": TGT_IN == PAD}
CASE = dict(kwargs=MASKS, name="translator")
"""

TESTS = """
import pytest
import torch

from translator import CASE, SRC, TGT_IN, TGT_OUT, loss, make_functional, make_translator

BACKENDS = pytest.mark.parametrize("backend", ["trace_once", "trace_everytime"])


@BACKENDS
@pytest.mark.xla_patch("dropout_to_identity")
def test_training_patched(xla_parity, backend):
    result = xla_parity.training(make_translator, [SRC, TGT_IN], targets=TGT_OUT, loss=loss, backend=backend, **CASE)
    assert result.status == "pass", result.message


@BACKENDS
@pytest.mark.xla_patch("dropout_to_identity")
def test_inference_patched(xla_parity, backend):
    assert xla_parity.inference(make_translator, [SRC, TGT_IN], backend=backend, **CASE).status == "pass"


@BACKENDS
def test_inference_unpatched(xla_parity, backend):
    assert xla_parity.inference(make_translator, [SRC, TGT_IN], backend=backend, **CASE).status == "pass"


def test_training_unpatched_is_refused(xla_parity):
    xla_parity.training(make_translator, [SRC, TGT_IN], targets=TGT_OUT, loss=loss, backend="trace_once", **CASE)


@pytest.mark.xla_mode("train")
def test_graphs_unpatched_is_refused(xla_graphs):
    xla_graphs.check(make_translator, [SRC, TGT_IN], targets=TGT_OUT, loss=loss, backend="trace_everytime", **CASE)


@pytest.mark.xla_patch("dropout_to_identity")
def test_functional_dropout_is_refused(xla_parity):
    xla_parity.training(make_functional, [torch.randn(3, 4)], backend="trace_once", name="functional")


def test_functional_dropout_inference(xla_parity):
    assert xla_parity.inference(make_functional, [torch.randn(3, 4)], backend="trace_once").status == "pass"
"""


def _section(out: str, test: str) -> str:
    start = out.index(f"_ {test} _")
    end = out.find("\n___", start + len(test) + 4)
    return out[start:end if end > 0 else len(out)]


def test_translator_with_dropout(pytester: pytest.Pytester) -> None:
    """An nn.Transformer translator with dropout 0.1 (teacher forcing, padding masks) passes training and inference
    parity on both backends under xla_patch("dropout_to_identity") (its Dropout modules and its attention dropout
    switched off), and inference without the patch (eval draws nothing). Without the patch its training is refused,
    by parity and by the graph check alike: the message names every random op and the own-model API's has_dropout=
    argument and marker, and the triage proposes no entry and matches none. A functional dropout no patch reaches is
    refused under the patch too, naming the call; its inference passes."""
    pytester.makepyfile(translator=TRANSLATOR, test_translator_cases=TESTS)
    result = pytester.runpytest_subprocess("-p", "xla_dynamo", "-p", "no:cacheprovider", "-rA",
                                           "test_translator_cases.py")
    out = result.stdout.str()
    result.assert_outcomes(passed=7, failed=3)
    for test in ("test_training_unpatched_is_refused", "test_graphs_unpatched_is_refused"):
        text = _section(out, test)
        assert "RandomOpsError: model 'translator' draws random numbers in training: " in text, text
        assert "core.encoder.layers.0.self_attn (MultiheadAttention dropout=0.1)" in text, text
        assert "Pass has_dropout=True to xla_parity.training(...) / .inference(...) or xla_graphs.check(...)" in text
        assert "@pytest.mark.xla_patch('dropout_to_identity')" in text, text
        assert "Declare has_dropout=True in its spec" not in text, text
        assert "verdict:   refused before it ran" in text, text
        assert "no known-issue entry proposed: the case was refused before it ran" in text, text
        assert "matches known issue" not in text and "[[issue]]" not in text, text
    functional = _section(out, "test_functional_dropout_is_refused")
    assert "draws random numbers in training through functional calls: (model) (dropout p=0.2)" in functional
    assert "[[issue]]" not in functional, functional
