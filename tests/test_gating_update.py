"""Updating the expected file (gating.update): the run's cases rewritten, the rows not run kept."""

from __future__ import annotations

from dataclasses import replace

from sample_data import gating_record as rec
from sample_data import sample_rows

from pytest_xla_dynamo.gating.expected import CaseRow
from pytest_xla_dynamo.gating.run import cases_from_records
from pytest_xla_dynamo.gating.update import UpdateStats, merge_update


def test_merge_update_keeps_rows_not_run() -> None:
    old = {r.key: r for r in sample_rows()}
    run = cases_from_records([
        rec("parity", "resnet18", status="fail_accuracy"),  # graphs not run: old figures kept
        rec("parity", "alexnet", backend="trace_everytime", mode="infer", status="pass"),  # flaky stays
        rec("graphs", "vgg16", graph_breaks=0, unique_graphs=1, fallbacks=0, recompiles=0),  # new, no status
    ])
    updated, stats = merge_update(old, run)
    assert stats == UpdateStats(updated=3, added=1, kept=2)
    by_key = {r.key: r for r in updated}
    assert len(updated) == 5 and [r.key for r in updated] == sorted(by_key)
    assert by_key[("resnet18", "trace_once", "train")] == replace(old[("resnet18", "trace_once", "train")],
                                                                  status="fail_accuracy")
    alex = by_key[("alexnet", "trace_everytime", "infer")]
    assert alex.status == "pass" and alex.flaky and alex.known_issue == "pytorch/xla#3361"
    assert by_key[("vgg16", "trace_once", "train")] == CaseRow("vgg16", "trace_once", "train", "", 0, 1, 0, 0,
                                                                      graph_status="pass")
    for key in (("BERT_pytorch", "trace_once", "infer"), ("alexnet", "trace_everytime", "train")):
        assert by_key[key] == old[key]
    assert old[("resnet18", "trace_once", "train")].status == "pass"  # the old rows are not changed in place
