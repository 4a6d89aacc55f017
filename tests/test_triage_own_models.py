"""Verdicts for a model owner's own models (issue 46), on the real stack (pytester subprocesses, torch_xla on the
CPU): small models of the kinds a new user brings (a graph attention network with ELU, ...), their failures
explained by what they run, never by another model's entry that only shares a message's shape."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

pytest.importorskip("torch")

GAT = """
import torch
from torch import nn
from torch.nn import functional as F


class GATLayer(nn.Module):
    \"\"\"One graph attention head over a dense adjacency: LeakyReLU attention scores, softmax over neighbours.\"\"\"

    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out, bias=False)
        self.att_src = nn.Parameter(torch.randn(d_out) * 0.3)
        self.att_dst = nn.Parameter(torch.randn(d_out) * 0.3)
        self.leaky = nn.LeakyReLU(0.2)

    def forward(self, x, adj):
        h = self.proj(x)
        e = self.leaky((h * self.att_src).sum(-1, keepdim=True) + (h * self.att_dst).sum(-1).unsqueeze(0))
        return torch.softmax(e.masked_fill(adj == 0, float("-inf")), dim=-1) @ h


class GAT(nn.Module):
    def __init__(self, functional=False):
        super().__init__()
        self.l1 = GATLayer(8, 16)
        self.act = (lambda x: F.elu(x)) if functional else nn.ELU()
        self.l2 = GATLayer(16, 3)

    def forward(self, x, adj):
        return self.l2(self.act(self.l1(x, adj)), adj)


def make_gat(functional=False):
    torch.manual_seed(0)
    return GAT(functional)


torch.manual_seed(1)
X = torch.randn(10, 8)
ADJ = ((torch.rand(10, 10) > 0.5) | torch.eye(10, dtype=torch.bool)).float()
Y = torch.randint(0, 3, (10,))
"""

GAT_TESTS = """
import pytest
import torch.nn.functional as F

from gat import ADJ, X, Y, make_gat


@pytest.mark.parametrize("backend", ["trace_once", "trace_everytime"])
def test_gat(xla_parity, backend):
    xla_parity.training(make_gat, [X, ADJ], targets=Y, loss=F.cross_entropy, backend=backend, name="gat")


def test_gat_functional_elu(xla_parity):
    xla_parity.training(lambda: make_gat(functional=True), [X, ADJ], targets=Y, loss=F.cross_entropy,
                        backend="trace_everytime", name="gat_f")
"""

ELU_ENTRY = "local:xla-elu-backward-ignores-is-result"


def _section(out: str, test: str) -> str:
    start = out.index(f"_ {test} _")
    end = out.find("\n___", start + len(test) + 4)
    return out[start:end if end > 0 else len(out)]


def test_gat_with_elu_is_tied_to_the_elu_entry(pytester: pytest.Pytester) -> None:
    """The GAT's training failure (ELU's backward on XLA) is the op-level ELU entry's on both backends: the
    localization names the parameterless nn.ELU (and an F.elu call) the gradient flows through, no diagnosis
    crashes (the sign-flip check ran: the hooked trace_once graph is computed right), and no other model's entry
    is borrowed (the sign-flip entries' pattern fits the message, the check rules them out), nothing proposed."""
    pytester.makepyfile(gat=GAT, test_gat_cases=GAT_TESTS)
    result = pytester.runpytest_subprocess("-p", "xla_dynamo", "-p", "no:cacheprovider", "test_gat_cases.py")
    out = result.stdout.str()
    result.assert_outcomes(failed=3)
    for test in ("test_gat[trace_once]", "test_gat[trace_everytime]", "test_gat_functional_elu"):
        text = _section(out, test)
        assert f"verdict:   explained by {ELU_ENTRY}: ELU, CELU and SELU backward" in text, text
        assert "diagnosis failed" not in text and "the check failed" not in text, text
        assert "activation sign flips checked at step 1: no activation input changes side" in text, text
        assert "matches known issue" not in text and "[[issue]]" not in text, text
        assert f"no known-issue entry proposed: explained by the op-level entry {ELU_ENTRY}" in text, text
    for test in ("test_gat[trace_once]", "test_gat[trace_everytime]"):
        text = _section(out, test)
        assert "(act runs nn.functional.elu, whose backward the entry covers" in text, text
        assert "its gradient flows in through parameterless l1.leaky (LeakyReLU), act (ELU)" in text, text
    assert "(the model runs nn.functional.elu, whose backward" in _section(out, "test_gat_functional_elu")


LAZY = """
import torch
from torch import nn
from torch.nn import functional as F


class Recommender(nn.Module):
    \"\"\"A DLRM-like recommender: two EmbeddingBag tables (sum) beside a dense MLP, an interaction MLP on top.\"\"\"

    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList([nn.EmbeddingBag(20, 8, mode="sum") for _ in range(2)])
        self.dense = nn.Linear(4, 8)
        self.top = nn.Linear(24, 1)

    def forward(self, dense, ids, offsets):
        parts = [self.dense(dense)] + [t(ids, offsets) for t in self.tables]
        return self.top(torch.cat(parts, 1))


class GluBlock(nn.Module):
    \"\"\"A conformer-like convolution module: pointwise conv to 2C, GLU, depthwise conv.\"\"\"

    def __init__(self):
        super().__init__()
        self.pw = nn.Conv1d(8, 16, 1)
        self.dw = nn.Conv1d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        return self.dw(F.glu(self.pw(x), dim=1))


def make_recommender():
    torch.manual_seed(0)
    return Recommender()


def make_glu():
    torch.manual_seed(0)
    return GluBlock()


torch.manual_seed(1)
DENSE = torch.randn(4, 4)
IDS = torch.randint(0, 20, (8,))
OFFSETS = torch.tensor([0, 2, 4, 6])
SEQ = torch.randn(2, 8, 6)
"""

LAZY_TESTS = """
import pytest

from lazy_models import DENSE, IDS, OFFSETS, SEQ, make_glu, make_recommender

pytestmark = pytest.mark.xla_mode("train")


def test_recommender_graphs(xla_graphs):
    xla_graphs.check(make_recommender, [DENSE, IDS, OFFSETS], backend="trace_everytime", name="recommender")


def test_glu_graphs(xla_graphs):
    xla_graphs.check(make_glu, [SEQ], backend="trace_everytime", name="glu_block")
"""


def test_lazy_graph_failures_name_their_fallbacks_and_borrow_no_entry(pytester: pytest.Pytester) -> None:
    """The lazy graph check of a recommender with EmbeddingBags and of a GLU block fails (several executions a
    step) and says why from the recorded signature: the CPU fallbacks aten::_embedding_bag (and its backward) and
    aten::glu_backward; the entries whose pattern fits any lazy failure (transformers' padding check, detection)
    are not offered, the EmbeddingBag one is (its fallback is in the case)."""
    pytester.makepyfile(lazy_models=LAZY, test_lazy_cases=LAZY_TESTS)
    result = pytester.runpytest_subprocess("-p", "xla_dynamo", "-p", "no:cacheprovider", "test_lazy_cases.py")
    out = result.stdout.str()
    result.assert_outcomes(failed=2)
    bag, glu = _section(out, "test_recommender_graphs"), _section(out, "test_glu_graphs")
    assert "CPU fallbacks in a steady step (each cuts the lazy graph): aten::_embedding_bag x" in bag, bag
    assert "aten::_embedding_bag_backward x" in bag, bag
    assert "matches known issue pytorch/xla#2403" in bag, bag
    assert "CPU fallbacks in a steady step (each cuts the lazy graph): aten::glu_backward x" in glu, glu
    for text in (bag, glu):
        assert "transformers-padding-check" not in text and "detection" not in text, text
