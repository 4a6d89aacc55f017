"""References that can arbitrate (issue 27): plain_math() switches eager's fast paths off and back on; the fast-path
check finds where eager's fast path and its plain path disagree (a padded nn.TransformerEncoder in eval); on the real
stack a padded encoder's inference parity passes, and where the references take eager's fast path it fails with that
fast path named and no known-issue proposal."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")

ENCODER = """
import torch
from torch import nn


class PaddedEncoder(nn.Module):
    \"\"\"A transformer encoder over padded sequences: the mask is an input (positional) of the model.\"\"\"

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(16, 3)

    def forward(self, x, mask):
        return self.head(self.enc(x, src_key_padding_mask=mask))


def inputs():
    torch.manual_seed(0)
    x = torch.randn(3, 6, 16)
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[0, 4:] = True
    mask[1, 5:] = True
    return [x, mask]
"""


def _encoder() -> tuple[Any, list[Any]]:
    namespace: dict[str, object] = {}
    exec(ENCODER, namespace)
    torch.manual_seed(0)
    return namespace["PaddedEncoder"](), namespace["inputs"]()  # type: ignore[operator]


def test_plain_math_switches_fast_paths_off_and_restores_them() -> None:
    from pytest_xla_dynamo.parity.plain_math import entered, plain_math

    assert torch.backends.mha.get_fastpath_enabled()
    count = entered()
    with plain_math():
        assert not torch.backends.mha.get_fastpath_enabled()
        assert torch.backends.cuda.math_sdp_enabled() and not torch.backends.cuda.flash_sdp_enabled()
        assert not torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.mha.get_fastpath_enabled() and torch.backends.cuda.flash_sdp_enabled()
    with pytest.raises(ZeroDivisionError), plain_math():
        1 / 0  # noqa: B018
    assert torch.backends.mha.get_fastpath_enabled()
    assert entered() == count + 2


def test_fast_path_check_finds_eager_nested_tensor_path() -> None:
    from pytest_xla_dynamo.parity.compare import Tolerance
    from pytest_xla_dynamo.parity.plain_math import check_fast_path

    model, inputs = _encoder()
    check = check_fast_path(model, inputs, "infer", lambda out: out.sum(), Tolerance())
    assert check.error == "" and check.differs and check.tensors == ["output[0]"], check
    assert check.explains(["output[0]"]) and not check.explains(["grad head.weight"]) and not check.explains([])
    verdict = check.verdict()
    assert verdict[0].startswith("the difference is eager's, not the backend's: eager's fast path and its plain "
                                 "math path disagree (1 of 1 tensors of step 1; largest: output[0]: max abs err")
    assert "nested-tensor fast path of nn.TransformerEncoder" in verdict[1]
    # without padding, and for a model without fast paths, the two paths agree
    unpadded = check_fast_path(model, [inputs[0], torch.zeros_like(inputs[1])], "infer", lambda o: o.sum(),
                               Tolerance())
    assert unpadded.error == "" and not unpadded.differs, unpadded.divergences
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    assert not check_fast_path(mlp, [torch.randn(2, 4)], "train", lambda o: o.sum(), Tolerance()).differs
    assert torch.backends.mha.get_fastpath_enabled()  # restored


TESTS = """
import pytest

from models import PaddedEncoder, inputs


@pytest.mark.parametrize("backend", ["trace_everytime", "trace_once"])
def test_padded_encoder(xla_parity, backend):
    xla_parity.inference(PaddedEncoder, inputs(), backend=backend, name="padded_encoder")
"""


#: a conftest that runs parity's references as parity/run.py did before they ran on the plain math path: on eager's
#: fast paths (the triage's own reruns stay plain)
REFERENCES_ON_FAST_PATHS = """
import contextlib
import importlib

import pytest


@pytest.fixture(autouse=True)
def _references_on_fast_paths(monkeypatch):
    run = importlib.import_module("pytest_xla_dynamo.parity.run")  # the module (parity.run is also the function)
    monkeypatch.setattr(run, "plain_math", contextlib.nullcontext)
"""


def _session(pytester: pytest.Pytester, conftest: str = "") -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    pytester.makepyfile(models=ENCODER, test_padded=TESTS)
    if conftest:
        pytester.makeconftest(conftest)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           "--xla-report=json", "--xla-report-dir=rep", timeout=600)
    lines = (pytester.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    found = [r for r in records if r.get("name") == "padded_encoder"]
    assert sorted(r["backend"] for r in found) == ["trace_everytime", "trace_once"], records
    return result, found


@pytest.mark.xla
def test_eager_fast_path_named_where_the_references_take_it(pytester: pytest.Pytester) -> None:
    """Done-when of issue 27, the failing half: where the references run on eager's fast path (as parity/run.py's did
    before they ran plain), the padded encoder fails on both XLA backends with eager's fast path named as the
    difference, no known-issue entry proposed and no failed localization."""
    result, records = _session(pytester, REFERENCES_ON_FAST_PATHS)
    out = result.stdout.str()
    result.assert_outcomes(failed=2)
    for record in records:
        assert record["status"] == "fail_accuracy", record
        triage = record["extra"]["triage"]
        assert triage["classification"] == "eager_fast_path", triage
        assert triage["verdict"][0].startswith("the difference is eager's, not the backend's"), triage
        assert triage["snippet"] == [] and triage["localization"] == [], triage
    assert "nested-tensor fast path of nn.TransformerEncoder" in out
    assert "no known-issue entry proposed: eager's fast path differs" in out
    assert "[[issue]]" not in out and "localization failed" not in out, out


@pytest.mark.xla
def test_references_run_on_the_plain_path(pytester: pytest.Pytester) -> None:
    """Integration with parity/run.py: with the references on the plain math path, the padded encoder's inference
    matches on both XLA backends (XLA computes the padded rows as the plain path does)."""
    result, records = _session(pytester)
    assert [r["status"] for r in records] == ["pass", "pass"], records
    result.assert_outcomes(passed=2)
