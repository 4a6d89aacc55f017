"""Tests of pytest_xla_dynamo.report.tables: the speedup and status tables and their number formats
(pure logic over hand-made CaseRecords, in process; no torch)."""

from __future__ import annotations

import math

import pytest
from sample_data import parity_record, sample_records, table_rows, timing_figures, timing_record

from pytest_xla_dynamo import report
from pytest_xla_dynamo.core.capture import Capture
from pytest_xla_dynamo.records import CaseRecord, ParityFigures, TriageNote
from pytest_xla_dynamo.report import tables


@pytest.fixture
def records() -> list[CaseRecord]:
    return sample_records()


# --- numbers -------------------------------------------------------------------------------------------


def test_geomean_and_format() -> None:
    assert report.geomean([2.0, 0.5, 4.0]) == pytest.approx(4 ** (1 / 3))
    assert report.geomean([]) is None
    assert report.geomean([0.0, -1.0]) is None
    assert report.format_speedup(4 ** (1 / 3)) == "1.59x"
    assert report.format_speedup(0.5) == "0.500x"
    assert report.format_speedup(1.0) == "1.00x"
    assert report.format_speedup(12.345) == "12.3x"
    assert report.format_speedup(123.4) == "123x"
    assert report.format_speedup(1234.5) == "1234x"


def test_subprocess_geomeans_match_the_math() -> None:
    """The numbers the plugin's session tests expect are the geometric means of their speedups."""
    assert report.format_speedup(math.prod([2.0, 0.5, 4.0]) ** (1 / 3)) == "1.59x"
    assert report.format_speedup(math.sqrt(1.0 * 2.0)) == "1.41x"
    assert report.format_speedup(report.geomean([1.2, 1.2, 1.2]) or 0) == "1.20x"


# --- the speedup table ---------------------------------------------------------------------------------


def test_speedup_table_train(records: list[CaseRecord]) -> None:
    table = report.speedup_table(records, "train")
    title, _, grid = table.partition("\n")
    assert title == "train: speedup over eager (iterations per run: 1, repeat: 5)"
    assert grid.startswith("+") and "+====" in grid  # tabulate grid
    rows = table_rows(grid)
    assert rows["Model"] == ["XLA (trace once)", "XLA (trace everytime)"]
    assert list(rows) == ["Model", "resnet18", "resnet50", "alexnet", "geomean"]  # first-seen order
    assert rows["resnet18"] == ["2.00x", "1.00x"]
    assert rows["resnet50"] == ["0.500x", "2.00x"]
    assert rows["alexnet"] == ["4.00x", "fail_to_run"]
    # geomean over the models with a speedup: (2 * 0.5 * 4) ** (1/3) = 1.587; sqrt(1 * 2) = 1.414 on 2 of 3
    assert rows["geomean"] == ["1.59x", "1.41x (2/3)"]


def test_the_title_says_the_calibrated_iterations_per_run() -> None:
    """Where xla_min_run_time changed the iterations per run of some case, the title gives the range that ran
    and what was asked; where it changed none (or the records do not say), only what was asked."""
    def rec(name: str, ran: int | None, min_run_time: float = 0.2) -> CaseRecord:
        figures = timing_figures()
        figures.context.min_run_time = min_run_time
        figures.runs.calibrated_iterations_per_run = ran  # type: ignore[union-attr]
        return timing_record(name, "trace_once", "train", 1.0, timing=figures)

    title = report.speedup_table([rec("a", 1), rec("b", 40), rec("c", 7)], "train").splitlines()[0]
    assert title == ("train: speedup over eager (iterations per run: 1-40 (calibrated by xla_min_run_time=0.2 s; "
                     "asked: 1), repeat: 5)")
    title = report.speedup_table([rec("a", 3), rec("b", 3)], "train").splitlines()[0]
    assert "(iterations per run: 3 (calibrated by xla_min_run_time=0.2 s; asked: 1), repeat: 5)" in title
    for same in ([rec("a", 1, 0.0), rec("b", 1, 0.0)], [rec("a", None)]):
        title = report.speedup_table(same, "train").splitlines()[0]
        assert title == "train: speedup over eager (iterations per run: 1, repeat: 5)"


def test_speedup_table_missing_cells_and_latency(records: list[CaseRecord]) -> None:
    records.append(timing_record("resnet50", "trace_everytime", "infer", 1.5, abs_latency=8.0))
    rows = table_rows(report.speedup_table(records, "infer", latency=True))
    assert rows["resnet18"] == ["3.00x", "-"]  # no trace_everytime record for resnet18 infer
    assert rows["resnet50"] == ["-", "1.50x (8.00 ms)"]
    assert rows["geomean"] == ["3.00x (1/2)", "1.50x (1/2)"]
    assert report.speedup_table(records, "nope") == ""
    assert report.speedup_table([r for r in records if r.suite == "parity"], "train") == ""


def test_speedup_table_baseline_fallbacks_and_computed_speedup() -> None:
    recs = [
        CaseRecord(suite="timing", name="m", backend="inductor", mode="train", abs_latency=5.0,
                   baseline_latency=10.0),
        CaseRecord(suite="timing", name="m", backend="aot_eager", mode="train", speedup=1.0),  # the baseline
        CaseRecord(suite="timing", name="m", backend="inductor", mode="infer", speedup=9.0, baseline="eager"),
    ]
    table = report.speedup_table(recs, "train", baseline="aot_eager", iterations_per_run=10, repeat=3)
    assert table.splitlines()[0] == "train: speedup over aot_eager (iterations per run: 10, repeat: 3)"
    rows = table_rows(table)
    assert rows["Model"] == ["inductor"]  # the baseline's own record is no column
    assert rows["m"] == ["2.00x"]  # 10 ms / 5 ms
    assert "aot_eager" not in rows["Model"]
    both = report.speedup_tables(recs, baseline="aot_eager")
    assert both.index("train:") < both.index("infer:")


def test_speedup_table_last_record_wins_and_modes_order() -> None:
    recs = [timing_record("m", "b", "infer", 1.0), timing_record("m", "b", "train", 9.0),
            timing_record("m", "b", "train", 3.0)]
    assert tables.timing_modes(recs) == ["train", "infer"]
    assert table_rows(report.speedup_table(recs, "train"))["m"] == ["3.00x"]


def test_tables_are_built_from_columns(records: list[CaseRecord]) -> None:
    """A table is its columns: one more Column (issue 14's timing status, say) is one more table column."""
    cells = tables.latest(r for r in records if r.suite == "timing")
    status = tables.Column("status", lambda model: cells[(model, "trace_once", "train")].status,
                           lambda models: f"{len(models)} models")
    grid = tables.grid([tables.speedup_column(cells, "trace_once", "train"), status],
                       ["resnet18", "alexnet"], summary="geomean")
    rows = table_rows(grid)
    assert rows["Model"] == ["XLA (trace once)", "status"]
    assert rows["alexnet"] == ["4.00x", "pass"]
    assert rows["geomean"] == ["2.83x", "2 models"]  # sqrt(2 * 4)
    assert list(rows) == ["Model", "resnet18", "alexnet", "geomean"]


# --- the status table ----------------------------------------------------------------------------------


def test_status_table(records: list[CaseRecord]) -> None:
    table = report.status_table(records)
    grid, _, counts = table.rpartition("\n")
    rows = table_rows(grid)
    assert rows["Model"] == ["trace_once train", "trace_once infer", "trace_everytime train"]
    assert rows["resnet18"] == ["pass", "fail_accuracy (xfail pytorch/xla#3361)", "-"]
    assert rows["alexnet"] == ["fail_to_run", "-", "pass_due_to_skip (flaky)"]
    assert counts == "pass 2 / fail 1 / xfail 1 / flaky 1"
    assert report.status_table([r for r in records if r.suite == "timing"]) == ""


def test_status_table_last_record_wins() -> None:
    recs = [parity_record("m", "b", "train", "fail_accuracy"), parity_record("m", "b", "train", "pass")]
    table = report.status_table(recs)
    assert table_rows(table)["m"] == ["pass"]
    assert table.endswith("pass 1 / fail 0 / xfail 0")


def test_status_counts_xpass() -> None:
    counts = report.status_counts([parity_record("m", "b", "train", known_issue="x/y#1"),
                                   parity_record("n", "b", "train")])
    assert counts == {"pass": 1, "fail": 0, "xfail": 0, "xpass": 1, "not captured": 0, "flaky": 0}
    assert table_rows(report.status_table([parity_record("m", "b", "train", known_issue="x/y#1")]))["m"] == [
        "pass (xpass x/y#1)"]


PARTIAL = Capture(unique_graphs=1, calls_captured=1, graph_breaks={"a break": 1})


def test_status_table_not_captured_and_partial_capture() -> None:
    """A dynamo pass that captured nothing is counted apart (neither pass nor fail); a partial capture and an
    ill-conditioned failure are noted."""
    recs = [parity_record("lstm", "trace_once", "train", "pass_not_captured"),
            parity_record("flip", "trace_once", "train", "fail_accuracy",
                          parity=ParityFigures(triage=TriageNote({"classification": "ill_conditioned"}))),
            parity_record("mlp", "trace_once", "train", parity=ParityFigures(capture=PARTIAL)),
            parity_record("cnn", "trace_once", "train")]
    table = report.status_table(recs)
    rows = table_rows(table)
    assert rows["lstm"] == ["pass_not_captured"] and rows["mlp"] == ["pass (partial capture)"]
    assert rows["cnn"] == ["pass"] and rows["flip"] == ["fail_accuracy (ill-conditioned)"]
    assert table.endswith("pass 2 / fail 1 / xfail 0 / not captured 1")


def test_a_cell_shortens_a_below_tolerance_note_and_names_amplified_rounding() -> None:
    """A pass with a known issue present below tolerance shows the entry (the record keeps the ratio); a failure
    from amplified rounding says so."""
    note = "known issue local:x present below tolerance (bn.running_var: ratio 0.98750 = 79/80, +1 more)"
    recs = [parity_record("bn", "trace_once", "train", parity=ParityFigures(notes=[note])),
            parity_record("cnn3d", "trace_once", "train", "fail_accuracy",
                          parity=ParityFigures(triage=TriageNote({"classification": "amplified_rounding"})))]
    rows = table_rows(report.status_table(recs))
    assert rows["bn"] == ["pass (local:x below tolerance)"]
    assert rows["cnn3d"] == ["fail_accuracy (amplified rounding)"]


def test_the_csv_notes_column_says_the_cell_whole() -> None:
    """The CSV's ``notes`` holds what the cell notes, with a below-tolerance note and its figures whole; a case with
    nothing beside its status has an empty cell."""
    note = "known issue local:x present below tolerance (bn.running_var: ratio 0.98750 = 79/80)"
    fallbacks = {"aten::glu_backward": 2}
    recs = [parity_record("bn", "trace_once", "train", parity=ParityFigures(notes=[note], cpu_fallbacks=fallbacks)),
            parity_record("mlp", "trace_once", "train")]
    assert tables.status_notes(recs[0]) == ["CPU fallbacks", "local:x below tolerance"]
    rows = [report.csv_row(r) for r in recs]
    assert [r["notes"] for r in rows] == [f"CPU fallbacks; {note}", ""]
    assert report.CSV_COLUMNS[-1] == "notes"
