"""Triage on the real stack (pytester subprocesses, real torch_xla on the CPU): a downstream model failing in
backward, one diverging in a known way (declared and not, and with a new divergence beside the known one), one
matching a built-in registry entry without declaring it, one whose output diverges in a known module; each
failure's report read as a person reads it (stage, matching issue or snippet, module, under 40 lines), in the
compact default and in ``--tb=long``, with and without xdist, and in the JSON report."""

from __future__ import annotations

import json
import re

import pytest
from sample_data import before_summary

pytest_plugins = ["pytester"]

MODELS = """
import torch
from torch import nn


class FrozenBN(nn.Module):
    \"\"\"A conv net whose BatchNorm stays in eval mode while it trains (a frozen-BN fine-tune).\"\"\"

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 2)

    def train(self, mode=True):
        super().train(mode)
        self.bn.eval()
        return self

    def forward(self, x):
        return self.head(self.bn(self.conv(x)).mean((2, 3)))


class Drift(nn.Module):
    \"\"\"The identity on CPU; on the XLA device it scales by 1.01: a module that diverges.\"\"\"

    def forward(self, x):
        return x * 1.01 if x.device.type == "xla" else x


class RefuseXlaGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if grad.device.type == "xla":
            raise RuntimeError("custom backward refuses a gradient on the XLA device")
        return grad


class BackwardFails(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return RefuseXlaGrad.apply(self.fc(x))


class LateDrift(nn.Module):
    # the identity, except from the second call on the XLA device (lazy tensors run it every step):
    # a divergence that starts at step 2

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 1.01 if x.device.type == "xla" and self.calls > 1 else x


def bn_net(late_drift=False):
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2)]
    if late_drift:
        layers.insert(3, LateDrift())
    return nn.Sequential(*layers)


def mlp_with_drift():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Drift(), nn.Linear(16, 4))
"""

TESTS = """
import pytest
import torch

from models import BackwardFails, FrozenBN, bn_net, mlp_with_drift

IMAGES = torch.randn(4, 3, 8, 8)


def test_fails_in_backward(xla_parity):
    xla_parity.training(BackwardFails, [torch.randn(4, 8)], backend="trace_everytime", name="backward_fails")


def test_matches_builtin_entry(xla_parity):
    xla_parity.training(FrozenBN, [IMAGES], backend="trace_everytime", name="frozen_bn")


def test_known_divergence_undeclared(xla_parity):
    xla_parity.training(bn_net, [IMAGES], backend="trace_once", name="bn_net")


@pytest.mark.xla_known_issue("local:xla-batchnorm-biased-running-var:zoo")
def test_known_divergence_declared(xla_parity):
    xla_parity.training(bn_net, [IMAGES], backend="trace_once", name="bn_net")


@pytest.mark.xla_known_issue("local:xla-batchnorm-biased-running-var:zoo")
def test_known_divergence_plus_a_new_one(xla_parity):
    xla_parity.training(lambda: bn_net(late_drift=True), [IMAGES], backend="trace_everytime", name="bn_late_drift")


def test_output_diverges_in_a_module(xla_parity):
    xla_parity.training(mlp_with_drift, [torch.randn(4, 8)], backend="trace_everytime", name="mlp_drift")
"""


def _failure_blocks(out: str) -> dict[str, list[str]]:
    """Each failure's report: the lines from its ``___ name ___`` header to its captured output or the next."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in before_summary(out).splitlines():
        header = re.match(r"^_{3,} (\S+) _{3,}$", line)
        if header:
            current = blocks.setdefault(header.group(1), [])
            continue
        if re.match(r"^(-+ Captured|=+ )", line):
            current = None
        if current is not None:
            current.append(line)
    return blocks


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(models=MODELS, test_triage_cases=TESTS)
    return pytester


def test_triage_reports(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist",
                                          "--xla-report=json", "--xla-report-dir=rep", "-rA")
    out = result.stdout.str()
    blocks = _failure_blocks(out)
    result.assert_outcomes(failed=5, xfailed=1)
    for name, lines in blocks.items():
        assert len(lines) < 40, (name, "\n".join(lines))

    backward = "\n".join(blocks["test_fails_in_backward"])
    assert "xla-dynamo triage: backward_fails / trace_everytime / train (fail_to_run)" in backward
    assert "stage:     backward of parity step 1 on trace_everytime" in backward
    assert "RuntimeError: custom backward refuses a gradient on the XLA device" in backward
    assert "no entry of the registry matches" in backward
    assert "id = 'local:backward-fails-backward-runtimeerror'" in backward
    assert "reproduce: pytest test_triage_cases.py::test_fails_in_backward --xla-backend=trace_everytime" in backward
    assert "torch's error (--tb=long" in backward

    builtin = "\n".join(blocks["test_matches_builtin_entry"])
    assert "stage:     backward of parity step 1 on trace_everytime" in builtin
    assert ("matches known issue pytorch/xla#3361: backward through BatchNorm2d in eval() mode fails (lazy and "
            "openxla) https://github.com/pytorch/xla/issues/3361") in builtin
    assert "declare it: @pytest.mark.xla_known_issue('pytorch/xla#3361') on test_matches_builtin_entry" in builtin

    known = "\n".join(blocks["test_known_divergence_undeclared"])
    assert "bn_net / trace_once / train (fail_accuracy)" in known
    assert "stage:     comparison of parity step 1 on trace_once" in known
    assert re.search(r"error: +ParityError: fail_accuracy: step 1, buffer 1\.running_var: max abs err", known), known
    assert re.search(r"diverged: +diverging tensors: 2 \(steps 1, 2; \d+ compared per step\)", known), known
    assert re.search(r"buffers +2 at step 1, 2: buffer 1\.running_var", known), known
    assert re.search(r"match +loss, outputs, grads, params", known), known
    assert "matches known issue local:xla-batchnorm-biased-running-var:zoo" in known
    assert "no module output diverges" in known and "diverging buffers belong to 1 (BatchNorm2d)" in known
    assert "parameter gradients match, module by module" in known
    assert "the same cuts reproduce it without dynamo" in known  # trace_everytime_split diverges alike

    both = "\n".join(blocks["test_known_divergence_plus_a_new_one"])
    assert "[more diverges] diverging beyond the known issue (it covers buffer *running_var)" in both, both
    assert re.search(r"buffers +\d+ at step 1, 2: buffer 1\.running_var", both), both
    assert "grad 0.weight" in both and "output[0]" in both  # the new divergence, at step 2
    assert "registry: local:xla-batchnorm-biased-running-var:zoo applies to this test (strict xfail)" in both

    module = "\n".join(blocks["test_output_diverges_in_a_module"])
    assert re.search(r"module: +first diverging output: 2 \(Drift\), call 3 of 4 in execution order", module), module
    assert "the module before it, 1, matches" in module
    assert "first diverging gradient in backward order:" in module
    assert "graph shape does not explain it" in module  # the split lazy run diverges too
    assert "XFAIL test_triage_cases.py::test_known_divergence_declared" in out

    summary = out[out.index("short test summary info"):]
    assert "FAILED test_triage_cases.py::test_matches_builtin_entry - [backward; pytorch/" in summary
    # the JSON report carries the triage of each failing parity record
    records = [json.loads(line) for line in (project.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines()]
    by_name = {r["name"]: r for r in records if r.get("suite") == "parity"}
    assert by_name["frozen_bn"]["extra"]["triage"]["matches"][0]["id"] == "pytorch/xla#3361"
    assert by_name["frozen_bn"]["extra"]["triage"]["where"]["stage"] == "backward"
    assert by_name["mlp_drift"]["extra"]["triage"]["localization"][0].startswith("first diverging output: 2 (Drift)")
    assert by_name["bn_net"]["extra"]["divergences_total"] == 2


def test_triage_long_style_under_xdist(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-n", "2", "--tb=long",
                                          "-k", "fails_in_backward or matches_builtin")
    out = result.stdout.str()
    result.assert_outcomes(failed=2)
    assert "xla-dynamo triage: frozen_bn / trace_everytime / train (fail_to_run)" in out
    assert "the error as raised:" in out
    assert re.search(r"torch/autograd/\S+\.py:\d+", out), out  # torch's frames kept with --tb=long
    assert "pytest_xla_dynamo/parity/fixture.py" not in out  # the plugin's frames hidden
