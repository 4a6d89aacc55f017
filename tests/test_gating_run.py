"""The run's view per case (gating.run): records merged per case, the timing records, the timing baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_data import gating_record as rec

from pytest_xla_dynamo.gating.expected import ExpectedFileError
from pytest_xla_dynamo.gating.run import cases_from_records, read_timing_baseline, timing_from_records
from pytest_xla_dynamo.records import ParityFigures


def test_cases_from_records_merges_parity_and_graphs() -> None:
    cases = cases_from_records([
        rec("parity", "m", status="pass", repro="pytest a"),
        rec("graphs", "m", graph_breaks=1, unique_graphs=2, fallbacks=0, recompiles=0, repro="pytest g"),
        rec("parity", "m", status="fail_accuracy", repro="pytest b", message="grad differs"),  # 2nd tensor mode
        rec("graphs", "m", graph_breaks=3, unique_graphs=1),
        rec("timing", "m", speedup=1.2),
        rec("timing", "t", speedup=1.2),  # timing only: not a row of the expected file
        rec("parity", "m", mode="infer", status="pass", flaky=True,
            parity=ParityFigures(runs=["pass", "fail_accuracy"])),
    ])
    assert set(cases) == {("m", "trace_once", "train"), ("m", "trace_once", "infer")}
    train = cases[("m", "trace_once", "train")]
    assert train.row.status == "fail_accuracy"  # the worst of the two parity records
    assert train.status_repro == "pytest b" and train.message == "grad differs"
    assert (train.row.graph_breaks, train.row.unique_graphs, train.row.fallbacks, train.row.recompiles) == (3, 2, 0, 0)
    assert train.graphs_repro == "pytest g"
    infer = cases[("m", "trace_once", "infer")]
    assert infer.row.flaky and infer.runs == ["pass", "fail_accuracy"]
    assert infer.row.graph_breaks is None  # graphs suite did not run for it


def test_fallback_repro_uses_the_node_id() -> None:
    cases = cases_from_records([rec("parity", "m", status="pass", nodeid="suites/t.py::t[m-trace_once]")])
    assert cases[("m", "trace_once", "train")].status_repro == "pytest 'suites/t.py::t[m-trace_once]' " \
        "--xla-backend=trace_once"


def test_timing_from_records_keeps_the_lowest_speedup() -> None:
    timing = timing_from_records([rec("timing", "m", speedup=1.5, repro="pytest fast"),
                                  rec("timing", "m", speedup=0.9, nodeid="t.py::t[m]"),
                                  rec("timing", "n"),  # no speedup: not a timing case
                                  rec("parity", "m", speedup=0.1)])
    assert list(timing) == [("m", "trace_once", "train")]
    case = timing[("m", "trace_once", "train")]
    assert case.speedup == 0.9 and case.repro == "pytest 't.py::t[m]' --xla-backend=trace_once"


def test_timing_baseline_reader(tmp_path: Path) -> None:
    path = tmp_path / "timing.json"
    lines = [
        {"suite": "timing", "name": "m", "backend": "b", "mode": "train", "speedup": 1.5, "abs_latency": 3.0},
        {"suite": "parity", "name": "m", "backend": "b", "mode": "train", "status": "pass", "speedup": None},
        {"suite": "timing", "name": "n", "backend": "b", "mode": "infer", "speedup": None},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert read_timing_baseline(path) == {("m", "b", "train"): 1.5}
    path.write_text(json.dumps(lines))
    assert read_timing_baseline(path) == {("m", "b", "train"): 1.5}
    path.write_text('{"suite": "timing", "name": "m"\n')
    with pytest.raises(ExpectedFileError, match=r"timing\.json:1"):
        read_timing_baseline(path)


def test_timing_baseline_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "timing.json"
    path.write_text(json.dumps({"suite": "timing", "name": "m", "backend": "b", "mode": "train", "speedup": "x"}))
    # the file and line, the field and its bad value (the strict JSON Lines reader's message)
    bad = r"timing\.json:1: not a record: field 'speedup': \"x\" is not a number"
    with pytest.raises(ExpectedFileError, match=bad):
        read_timing_baseline(path)
    with pytest.raises(ExpectedFileError, match="is a directory"):
        read_timing_baseline(tmp_path)
