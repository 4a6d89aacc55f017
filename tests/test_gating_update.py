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


def test_a_row_that_passes_now_drops_its_old_known_issue() -> None:
    """Found by the moe collection (issue 30): its training rows kept the id of an entry that no longer applied
    after they passed."""
    old_row = CaseRow("moe.mixtral", "trace_once", "train", "eager_two_runs_differ", graph_status="pass",
                      known_issue="local:gone")
    failing = CaseRow("m", "trace_once", "train", "fail_accuracy", graph_status="fail_graph", known_issue="local:kept")
    run = cases_from_records([rec("parity", "moe.mixtral", status="pass"), rec("parity", "m", status="pass")])
    updated, _ = merge_update({old_row.key: old_row, failing.key: failing}, run)
    by_key = {r.key: r for r in updated}
    assert by_key[old_row.key].status == "pass" and by_key[old_row.key].known_issue == ""
    # the graph check still fails (not run again): the id stays
    assert by_key[failing.key].status == "pass" and by_key[failing.key].known_issue == "local:kept"
