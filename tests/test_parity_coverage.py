"""Passes say what they cover (issue 46): a parity pass whose run fell back to the CPU or whose model dynamo captured
only in part says so in its message, its parity cell, the expected file's ``coverage`` column and the gate."""

from __future__ import annotations

import pytest

from pytest_xla_dynamo.core.capture import Capture
from pytest_xla_dynamo.gating.expected import CaseRow, format_expected, parse_expected
from pytest_xla_dynamo.gating.labels import IMPROVED, REGRESSION
from pytest_xla_dynamo.gating.rules import coverage_rule
from pytest_xla_dynamo.gating.run import cases_from_records, merged_coverage
from pytest_xla_dynamo.records import CaseRecord, ParityFigures
from pytest_xla_dynamo.report.tables import status_text

pytest_plugins = ["pytester"]

PARTIAL = Capture(2, 7, {"a graph break": 1})


def _record(fallbacks: dict[str, int] | None, capture: Capture | None = None, backend: str = "trace_once",
            status: str = "pass") -> CaseRecord:
    return CaseRecord(suite="parity", name="m", backend=backend, mode="train", status=status,
                      parity=ParityFigures(cpu_fallbacks=fallbacks, capture=capture))


def test_coverage_of_a_record() -> None:
    assert _record({}).parity.coverage == "full"  # type: ignore[union-attr]
    assert _record({"aten::_embedding_bag": 2}).parity.coverage == "cpu_fallbacks"  # type: ignore[union-attr]
    assert _record({}, PARTIAL).parity.coverage == "partial_capture"  # type: ignore[union-attr]
    assert _record({"aten::x": 1}, PARTIAL).parity.coverage == "cpu_fallbacks+partial_capture"  # type: ignore
    assert _record(None).parity.coverage == ""  # type: ignore[union-attr]  # not measured (eager)
    assert merged_coverage("full", "cpu_fallbacks") == "cpu_fallbacks"
    assert merged_coverage("partial_capture", "cpu_fallbacks") == "cpu_fallbacks+partial_capture"
    assert merged_coverage("", "full") == "full" and merged_coverage("", "") == ""


def test_the_parity_cell_and_the_expected_row_tell_a_pass_with_fallbacks_from_a_clean_pass() -> None:
    clean, fallback = _record({}), _record({"aten::_embedding_bag": 2}, backend="trace_everytime")
    assert status_text(clean) == "pass"
    assert status_text(fallback) == "pass (CPU fallbacks)"
    assert status_text(_record({"aten::x": 1}, PARTIAL)) == "pass (CPU fallbacks, partial capture)"
    run = cases_from_records([clean, fallback])
    assert run[("m", "trace_once", "train")].row.coverage == "full"
    assert run[("m", "trace_everytime", "train")].row.coverage == "cpu_fallbacks"
    text = format_expected([r.row for r in run.values()])
    assert text.splitlines()[0].endswith(",known_issue,coverage")
    assert {k: r.coverage for k, r in parse_expected(text).items()} == {
        ("m", "trace_everytime", "train"): "cpu_fallbacks", ("m", "trace_once", "train"): "full"}


def test_an_old_expected_file_reads_and_is_not_compared_on_coverage() -> None:
    old = ("name,backend,mode,status,graph_status,graph_breaks,unique_graphs,fallbacks,recompiles,flaky,known_issue\n"
           "m,trace_once,train,pass,,,,0,0,false,\n")
    row = parse_expected(old)[("m", "trace_once", "train")]
    assert (row.status, row.coverage) == ("pass", "")
    assert coverage_rule(row, CaseRow("m", "trace_once", "train", "pass", coverage="cpu_fallbacks")) is None


def test_the_gate_calls_new_fallbacks_in_a_pass_a_regression() -> None:
    def row(coverage: str, status: str = "pass") -> CaseRow:
        return CaseRow("m", "b", "train", status, coverage=coverage)

    found = coverage_rule(row("full"), row("cpu_fallbacks"))
    assert found is not None and found.label == REGRESSION
    assert found.detail == "pass (full) -> pass (cpu_fallbacks)"
    back = coverage_rule(row("cpu_fallbacks+partial_capture"), row("partial_capture"))
    assert back is not None and back.label == IMPROVED
    assert coverage_rule(row("full"), row("full")) is None
    assert coverage_rule(row("full"), row("cpu_fallbacks", "fail_accuracy")) is None  # the status rule says it


RECOMMENDER = """
import torch
from torch import nn


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.EmbeddingBag(20, 8, mode="sum")
        self.dense = nn.Linear(4, 8)
        self.top = nn.Linear(16, 1)

    def forward(self, dense, ids, offsets):
        return self.top(torch.cat([self.dense(dense), self.table(ids, offsets)], 1))


def make_recommender():
    torch.manual_seed(0)
    return Recommender()


def make_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


torch.manual_seed(1)
DENSE = torch.randn(4, 4)
IDS = torch.randint(0, 20, (8,))
OFFSETS = torch.tensor([0, 2, 4, 6])


def test_recommender_passes_saying_its_fallbacks(xla_parity):
    result = xla_parity.inference(make_recommender, [DENSE, IDS, OFFSETS], backend="trace_everytime",
                                  name="recommender")
    assert result.status == "pass"
    assert result.message.startswith("pass; CPU fallbacks: aten::_embedding_bag x"), result.message


def test_mlp_passes_clean(xla_parity):
    result = xla_parity.inference(make_mlp, [DENSE], backend="trace_everytime", name="mlp")
    assert (result.status, result.message) == ("pass", "")
"""


def test_a_pass_with_fallbacks_says_so_on_the_real_stack(pytester: pytest.Pytester) -> None:
    """A recommender whose EmbeddingBag runs on the CPU passes parity on trace_everytime with a message naming the
    fallback, its parity cell says ``pass (CPU fallbacks)`` and its row in the written expected file says
    ``cpu_fallbacks``; a model without fallbacks passes clean, ``full``."""
    pytest.importorskip("torch_xla")
    pytester.makepyfile(test_cov=RECOMMENDER)
    result = pytester.runpytest_subprocess("-p", "xla_dynamo", "-p", "no:cacheprovider", "test_cov.py",
                                           "--xla-report=table", "--xla-expected=expected.csv",
                                           "--xla-update-expected")
    out = result.stdout.str()
    result.assert_outcomes(passed=2)
    assert "pass (CPU fallbacks)" in out, out
    rows = parse_expected((pytester.path / "expected.csv").read_text())
    assert rows[("recommender", "trace_everytime", "infer")].coverage == "cpu_fallbacks"
    assert rows[("mlp", "trace_everytime", "infer")].coverage == "full"
