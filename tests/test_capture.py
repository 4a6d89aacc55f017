"""What dynamo captured of a case: the figures and reasons (pure), and on the real stack an LSTM model that dynamo
skips whole on trace_once: parity gets ``pass_not_captured`` with the reason (shared and user cases), the table,
JSON, CSV and gate show it, the graph check names the reason, and a missing snapshot gets no known-issue proposal
(issue 27)."""

from __future__ import annotations

import csv
import json

import pytest

from pytest_xla_dynamo.core.capture import NOT_CAPTURED, Capture, parity_status, short_reason
from pytest_xla_dynamo.core.metrics import Snapshot

pytest_plugins = ["pytester"]

LSTM_REASON = ("Attempted to wrap RNN, GRU, or LSTM\n  Explanation: Dynamo does not support RNN, GRU, or LSTM.\n"
               "  Developer debug context: LSTM(4, 6, batch_first=True)\n")


def test_short_reason_is_the_first_line_without_addresses() -> None:
    assert short_reason(LSTM_REASON) == "Attempted to wrap RNN, GRU, or LSTM"
    assert short_reason("\n  call_function <built-in at 0x7f00ab> in /home/me/x.py\n") == \
        "call_function <built-in at 0x…> in …/x.py"


def test_nothing_captured_from_counters() -> None:
    capture = Capture.from_snapshot(Snapshot(dynamo={"frames": {"total": 1}, "unimplemented": {LSTM_REASON: 1}}))
    assert capture.nothing and not capture.partial and capture.verdict == "not captured"
    assert capture.reasons == ["Attempted to wrap RNN, GRU, or LSTM"]
    assert capture.describe() == ("dynamo captured nothing (0 graphs, 0 calls); skipped: Attempted to wrap RNN, "
                                  "GRU, or LSTM")
    assert parity_status("pass", capture) == NOT_CAPTURED == "pass_not_captured"
    assert parity_status("fail_accuracy", capture) == "fail_accuracy"  # a failure stays what it is
    assert parity_status("pass", None) == "pass"  # no dynamo: nothing to capture
    assert Capture.from_dict(capture.to_dict()) == capture


def test_partial_and_full_capture() -> None:
    full = Capture.from_snapshot(Snapshot(dynamo={"stats": {"unique_graphs": 2, "calls_captured": 9}}))
    assert full.verdict == "captured" and not full.partial and parity_status("pass", full) == "pass"
    partial = Capture.from_snapshot(Snapshot(dynamo={"stats": {"unique_graphs": 2, "calls_captured": 9},
                                                     "graph_break": {"Tensor.item\n more": 2}}))
    assert partial.partial and parity_status("pass", partial) == "pass"
    assert partial.describe() == ("dynamo captured part of the model (2 graphs, 9 calls); 2 graph breaks: "
                                  "Tensor.item")
    assert "no reason counted in its compile (dynamo remembers a frame it skipped" in Capture().describe()


CONFTEST = """
import torch
from torch import nn

from pytest_xla_dynamo.zoo import ModelSpec


class LstmNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 6, batch_first=True)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def mlp(tier=None):
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def pytest_xla_register_models(register):
    sizes = {"small": 3, "full": 3}
    register(ModelSpec(name="lstm_net", source="user", build_model=lambda tier: LstmNet(),
                       build_inputs=lambda tier, bs: (torch.randn(bs, 5, 4),), batch_size=sizes))
    register(ModelSpec(name="mlp_net", source="user", build_model=mlp,
                       build_inputs=lambda tier, bs: (torch.randn(bs, 4),), batch_size=sizes))
"""

TESTS = """
import pytest
import torch
from torch import nn


class UserLstm(nn.Module):  # its own forward: dynamo remembers the frames it skipped, code object by code object
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 6, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0].mean(1)


@pytest.mark.xla_mode("train")
@pytest.mark.xla_shared_case
def test_zoo_parity(xla_parity, xla_model, xla_backend):
    result = xla_parity.check_case(xla_model, xla_backend)
    print(f"STATUS {xla_model.name} {result.status}")


def test_user_lstm(xla_parity):
    result = xla_parity.training(UserLstm, [torch.randn(3, 5, 4)], backend="trace_once", name="user_lstm")
    assert result.status == "pass_not_captured", result


class CpuRefuses(nn.Module):  # eager's reference fails: a harness-side failure, nothing to propose upstream
    def forward(self, x):
        if x.device.type == "cpu":
            raise ValueError("this model runs on XLA only")
        return x * 2


def test_eager_reference_fails(xla_parity):
    xla_parity.inference(CpuRefuses, [torch.randn(2, 3)], backend="trace_once", name="cpu_refuses")


@pytest.mark.xla_mode("train")
@pytest.mark.xla_shared_case
def test_graphs(xla_graphs, xla_model, xla_backend):
    xla_graphs.check_case(xla_model, xla_backend)
"""

EXPECTED = """name,backend,mode,status,graph_status,graph_breaks,unique_graphs,fallbacks,recompiles,flaky,known_issue
lstm_net,trace_once,train,pass,,,,,,false,
mlp_net,trace_once,train,pass,,,,,,false,
"""


@pytest.mark.xla
def test_lstm_not_captured_on_trace_once(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_capture_cases=TESTS)
    (pytester.path / "expected.csv").write_text(EXPECTED)
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "-s", "--xla-models=lstm_net,mlp_net",
        "--xla-backend=trace_once", "--xla-report=json,csv,table", "--xla-report-dir=rep",
        "--xla-expected=expected.csv", timeout=900)
    out = result.stdout.str()
    # parity passes as a test, but as pass_not_captured (the shared case from its warm-up, the user's from its run)
    assert "STATUS lstm_net pass_not_captured" in out and "STATUS mlp_net pass" in out, out
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 3 and outcomes.get("failed") == 3, out

    records = [json.loads(line) for line in (pytester.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines()]
    parity = {r["name"]: r for r in records if r.get("suite") == "parity"}
    assert parity["lstm_net"]["status"] == parity["user_lstm"]["status"] == "pass_not_captured", parity
    for name in ("lstm_net", "user_lstm"):
        capture = parity[name]["extra"]["capture"]
        assert capture["nothing"] and list(capture["skipped"]) == ["Attempted to wrap RNN, GRU, or LSTM"], capture
        assert parity[name]["calls_captured"] == 0 and parity[name]["unique_graphs"] == 0
        assert "skipped: Attempted to wrap RNN, GRU, or LSTM" in parity[name]["message"]
    assert parity["mlp_net"]["status"] == "pass" and parity["mlp_net"]["unique_graphs"] >= 1
    assert parity["mlp_net"]["extra"]["capture"]["verdict"] == "captured"

    rows = {(r["name"], r["status"]) for r in csv.DictReader((pytester.path / "rep" / "xla-dynamo.csv").open())}
    assert ("lstm_net", "pass_not_captured") in rows and ("user_lstm", "pass_not_captured") in rows, rows
    table = out[out.index("parity\n"):]
    assert any("lstm_net" in line and "pass_not_captured" in line for line in table.splitlines()), table
    assert "pass 1 / fail 1 / xfail 0 / not captured 2" in table, table

    # an eager reference that fails is the model's problem: a verdict, no proposal
    eager_triage = parity["cpu_refuses"]["extra"]["triage"]
    assert parity["cpu_refuses"]["status"] == "eager_fail_to_run" and eager_triage["classification"] == "harness"
    assert eager_triage["snippet"] == [] and eager_triage["verdict"][0].startswith("the eager CPU reference itself")

    # the gate: a pass that captured nothing is not the expected pass
    assert "status pass -> pass_not_captured (dynamo captured nothing)" in out, out
    assert result.ret != 0

    # the graph check names the reason; a missing snapshot gets no proposal, and the header names the model
    assert "lstm_net / trace_once / train: " in out
    assert "dynamo captured nothing (0 graphs, 0 calls); skipped: Attempted to wrap RNN, GRU, or LSTM" in out, out
    assert "xla-dynamo triage: mlp_net / trace_once / train (fail_graph)" in out, out
    assert "no known-issue entry proposed: a harness artefact, not an upstream problem" in out, out
    mlp_block = out[out.index("xla-dynamo triage: mlp_net"):]
    mlp_block = mlp_block[:mlp_block.index("  test:")]
    assert "[[issue]]" not in mlp_block and "the case has no snapshot yet" in mlp_block, mlp_block
    lstm_block = out[out.index("xla-dynamo triage: lstm_net"):]
    proposal = lstm_block[lstm_block.index("[[issue]]"):lstm_block.index("  test:")]
    assert "match = " in proposal and "/tmp" not in proposal and str(pytester.path) not in proposal, proposal
