"""Tests of pytest_xla_dynamo.records: the typed figures and their JSON form.

A JSON line in the format the reports had before the figures were typed (``extra`` as the checks wrote it) loads
into typed figures, read by attribute, and is written back byte for byte; so is a sample of the reports of every version
since 0.1.0 (tests/data/kept_reports.jsonl: one line per layout; older layouts too: kept as read, interpreted by
no one). Such a report still loads where users
give one: a merged shard and ``--xla-timing-baseline``. Pure: no torch, no session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sample_data import REPO, timing_figures

from pytest_xla_dynamo import report
from pytest_xla_dynamo.gating.run import cases_from_records, read_timing_baseline, timing_from_records
from pytest_xla_dynamo.records import (
    CaseRecord,
    GraphFigures,
    ParityFigures,
    RecordError,
    RecordStore,
    TimingFigures,
)
from pytest_xla_dynamo.records.jsonform import extra_object, parse_extra
from pytest_xla_dynamo.report.csvfile import csv_row

ENV = ', "environment": {"versions": {"torch": "2.9.0"}}'
HEAD = ('{{"suite": "{suite}", "name": "m", "backend": "trace_once", "mode": "train", "status": "{status}", '
        '"nodeid": "suites/t.py::t[m-trace_once]", "repro": "pytest x", "message": "{message}", "dev": "xla", '
        '"batch_size": 2, "tier": "small", "speedup": {speedup}, "abs_latency": null, "baseline_latency": null, '
        '"compilation_latency": null, "spread": null, "calls_captured": 12, "unique_graphs": 1, "graph_breaks": 0, '
        '"unique_graph_breaks": null, "fallbacks": null, "recompiles": 0, "compiles": 3, "known_issue": "", '
        '"flaky": false, "extra": ')
TAIL = ', "baseline": "{baseline}", "iterations_per_run": {ipr}, "repeat": {repeat}}}'
CAPTURE = ('{"verdict": "partial", "unique_graphs": 1, "calls_captured": 12, "graph_breaks": {"a break": 1}, '
           '"skipped": {}, "partial": true, "nothing": false}')
PARITY_EXTRA = (
    '{"tolerance": "same(tol=0.0001) [default]", "runs": ["fail_accuracy", "pass", "fail_accuracy"], '
    '"tensor": "output[0]", "max_abs_err": 0.0005, "step": 1, "compile_seconds": 1.5, "capture": ' + CAPTURE + ', '
    '"triage": {"test": "t", "status": "fail_accuracy", "line": "comparison; no known issue matches", '
    '"classification": "ill_conditioned"}, '
    '"divergences": [{"step": 1, "tensor": "output[0]", "group": "outputs", "max_abs_err": 0.0005, "problem": ""}], '
    '"divergences_total": 1}')
GRAPHS_EXTRA = ('{"signature": {"mode": "train", "xla": {"steady_step": {"fallbacks": {}}}}, "capture": ' + CAPTURE
                + ', "warmup_compile_time_count": [2, 1], "warmup_uncached_compile": [2, 0]}')
CONTEXT = ('"iterations_per_run": 1, "repeat": 3, "threads": 1, "thread_budget": {"threads": 1, "choice": "auto", '
           '"cores": 2, "xla": "PJRT_NPROC=1", "torch": 1}, "baseline_choice": "auto (PJRT_DEVICE)"')
RUNS = ('"timer": "perf_counter loop", "backend_runs_ms": [12.8, 14.1], "baseline_runs_ms": [7.7, 7.3], '
        '"backend_cpu_ms": [13.8, 14.7], "baseline_cpu_ms": [7.7, 7.3], "warmup_seconds": [2.12, 0.02], '
        '"baseline_warmup_seconds": [0.007, 0.005], "compilation_seconds": 2.12, "timed_compiles": 0, '
        '"xdist_workers": 0, "loadavg_1min": 1.31')
REASON = "other processes used 0.33 cores during the backend's runs"
STATS = ('"speedup_statistic": "median", "baseline_spread": 0.05, "backend_min_ms": 12.8, "baseline_min_ms": 7.3, '
         '"baseline_cpu_wall": 1.002, "backend_cpu_wall": 1.067, "interference": {"attempts": [{"load": 1.31, '
         '"baseline_cpu_wall": 1.002, "backend_cpu_wall": 1.067, "baseline_foreign_cores": 0.0, '
         '"backend_foreign_cores": 0.525, "reasons": ["other processes used 0.52 cores"]}, {"load": 1.31, '
         '"baseline_cpu_wall": 1.002, "backend_cpu_wall": 1.067, "baseline_foreign_cores": 0.0, '
         '"backend_foreign_cores": 0.332, "reasons": ["' + REASON + '"]}], "remeasured": 1, "reasons": ["'
         + REASON + '"]}, "memory": {"unit": "GB (1e9 bytes) in the CSV columns; bytes here", "baseline": '
         '{"backend": "eager"}, "backend": {"backend": "trace_once", "peak_bytes_used": 3000000000}, "empty": '
         '"eager_peak_mem: on the CPU"}, "dynamo_peak_mem": 3.0')


def line(suite: str, extra: str, *, status: str = "pass", message: str = "", speedup: str = "null",
         baseline: str = "", ipr: str = "null", repeat: str = "null") -> str:
    """A JSON report line in the format before the figures were typed."""
    return (HEAD.format(suite=suite, status=status, message=message, speedup=speedup) + extra
            + TAIL.format(baseline=baseline, ipr=ipr, repeat=repeat)[:-1] + ENV + "}")


def timing_line(extra: str, status: str = "pass", speedup: str = "0.54") -> str:
    return line("timing", extra, status=status, speedup=speedup, baseline="eager", ipr="1", repeat="3")


#: one line of every layout the checks write: parity (a failure with its triage), graphs (a pass, a failure to
#: run), timing (measured and unreliable, run once under --benchmark-disable, failed to run)
OLD_LINES = {
    "parity": line("parity", PARITY_EXTRA, status="fail_accuracy", message="step 1, output[0]"),
    "graphs": line("graphs", GRAPHS_EXTRA),
    "graphs_failed": line("graphs", "{}", status="fail_to_run"),
    "timing": timing_line("{" + CONTEXT + ", " + RUNS + ", " + STATS + "}", "unreliable"),
    "timing_not_measured": timing_line("{" + CONTEXT + ", " + RUNS + "}", "not_measured", "null"),
    "timing_failed": timing_line("{" + CONTEXT + "}", "fail_to_run", "null"),
}


def written_back(text: str) -> str:
    """``text`` read as a record and written as the JSON report writes it (its environment kept)."""
    obj = json.loads(text)
    return json.dumps({**CaseRecord.from_json(obj).to_json(), "environment": obj["environment"]})


@pytest.mark.parametrize("kind", OLD_LINES)
def test_an_old_line_round_trips_byte_for_byte(kind: str) -> None:
    text = OLD_LINES[kind]
    record = CaseRecord.from_json(json.loads(text))
    assert record.unparsed_extra == {}  # every layout the checks write is typed
    assert written_back(text) == text


def test_the_old_lines_read_typed() -> None:
    parity = CaseRecord.from_json(json.loads(OLD_LINES["parity"])).parity
    assert isinstance(parity, ParityFigures)
    assert parity.runs == ["fail_accuracy", "pass", "fail_accuracy"] and parity.tensor == "output[0]"
    assert parity.capture is not None and parity.capture.partial and parity.capture.graph_breaks == {"a break": 1}
    assert parity.triage is not None and parity.triage.classification == "ill_conditioned"
    assert parity.triage.line == "comparison; no known issue matches"
    assert parity.divergences_total == 1 and parity.divergences is not None
    assert parity.divergences[0]["group"] == "outputs"
    graphs = CaseRecord.from_json(json.loads(OLD_LINES["graphs"])).graphs
    assert isinstance(graphs, GraphFigures) and graphs.warmup_compile_time_count == [2, 1]
    assert graphs.signature["mode"] == "train" and graphs.capture is not None
    assert CaseRecord.from_json(json.loads(OLD_LINES["graphs_failed"])).graphs is None
    timing = CaseRecord.from_json(json.loads(OLD_LINES["timing"])).timing
    assert isinstance(timing, TimingFigures) and timing.runs is not None and timing.stats is not None
    assert timing.context.thread_budget["xla"] == "PJRT_NPROC=1" and timing.runs.backend_runs_ms == [12.8, 14.1]
    assert timing.stats.interference.reasons == [REASON] and timing.stats.interference.remeasured == 1
    assert timing.stats.interference.attempts[0].backend_foreign_cores == 0.525
    assert timing.stats.memory.dynamo_peak_mem == 3.0 and timing.stats.memory.eager_peak_mem is None
    assert timing.stats.memory.backend["peak_bytes_used"] == 3 * 10**9
    not_measured = CaseRecord.from_json(json.loads(OLD_LINES["timing_not_measured"])).timing
    assert not_measured is not None and not_measured.runs is not None and not_measured.stats is None
    failed = CaseRecord.from_json(json.loads(OLD_LINES["timing_failed"])).timing
    assert failed is not None and failed.runs is None and failed.context.repeat == 3


def test_the_readers_see_the_old_lines(tmp_path: Path) -> None:
    """What the gate, the tables and the CSV read of a record comes through its typed figures."""
    records = [CaseRecord.from_json(json.loads(text)) for text in OLD_LINES.values()]
    case = cases_from_records(records)[("m", "trace_once", "train")]
    assert case.runs == ["fail_accuracy", "pass", "fail_accuracy"]
    assert case.triage == "comparison; no known issue matches"
    assert timing_from_records(records)[("m", "trace_once", "train")].unreliable == REASON
    assert report.status_table(records).splitlines()[3].endswith("fail_accuracy (partial capture, ill-conditioned) |")
    row = csv_row(records[3])
    assert (row["dynamo_peak_mem"], row["eager_peak_mem"], row["compression_ratio"]) == ("3.000000", "", "")


def test_an_old_report_loads_as_a_shard_and_as_a_timing_baseline(tmp_path: Path) -> None:
    path = tmp_path / "xla-dynamo.jsonl"
    path.write_text("\n".join(OLD_LINES.values()) + "\n")
    records, environment = report.read_report(path)
    assert len(records) == len(OLD_LINES) and environment == {"versions": {"torch": "2.9.0"}}
    again = tmp_path / "again.jsonl"
    report.write_json(records, again, environment)
    assert again.read_text() == path.read_text()
    timing = tmp_path / "timing.jsonl"
    timing.write_text(OLD_LINES["timing_not_measured"].replace('"not_measured", "nodeid"', '"pass", "nodeid"')
                      .replace('"speedup": null', '"speedup": 0.5') + "\n")
    assert read_timing_baseline(timing) == {("m", "trace_once", "train"): 0.5}
    assert read_timing_baseline(path) == {}  # unreliable, not measured, failed: no baseline


#: one record per layout the reports have had since 0.1.0 (suite, extra's keys, environment's keys), drawn from the
#: run folders that docs/results held until issue 48
KEPT_REPORTS = REPO / "tests" / "data" / "kept_reports.jsonl"


def test_every_kept_report_round_trips_byte_for_byte() -> None:
    """A record of every report layout since 0.1.0: each line is written back as it was, typed where its layout is
    one this version writes, else kept as read."""
    typed = unparsed = 0
    lines = KEPT_REPORTS.read_text().splitlines()
    for number, text in enumerate(lines, 1):
        assert written_back(text) == text, f"{KEPT_REPORTS}:{number}"
        record = CaseRecord.from_json(json.loads(text))
        typed += bool(record.parity or record.graphs or record.timing)
        unparsed += bool(record.unparsed_extra)
    assert len(lines) >= 40 and typed >= 30
    assert unparsed  # 0.1.0's timing records (no thread budget yet): kept as read


def test_a_layout_not_written_is_kept_as_read_and_read_by_no_one() -> None:
    odd: dict[str, Any] = {"runs": "pass", "tensor": None}  # runs not a list; the rest missing
    assert parse_extra("parity", odd) == (None, None, None, odd)
    record = CaseRecord.from_json({"suite": "parity", "name": "m", "backend": "b", "mode": "train", "extra": odd})
    assert record.parity is None and record.unparsed_extra == odd and record.to_json()["extra"] == odd
    assert cases_from_records([record])[("m", "b", "train")].runs == []
    other = CaseRecord.from_json({"suite": "mine", "name": "m", "backend": "b", "mode": "train", "extra": {"x": 1}})
    assert other.unparsed_extra == {"x": 1} and other.to_json()["extra"] == {"x": 1}


def test_typed_figures_write_the_old_key_order() -> None:
    figures = timing_figures(("busy",), eager_peak_mem=1.0, compression_ratio=2.0)
    extra = extra_object(None, None, figures, {})
    assert list(extra) == [
        "iterations_per_run", "repeat", "threads", "thread_budget", "baseline_choice", "timer", "backend_runs_ms",
        "baseline_runs_ms", "backend_cpu_ms", "baseline_cpu_ms", "warmup_seconds", "baseline_warmup_seconds",
        "compilation_seconds", "timed_compiles", "xdist_workers", "loadavg_1min", "speedup_statistic",
        "baseline_spread", "backend_min_ms", "baseline_min_ms", "baseline_cpu_wall", "backend_cpu_wall",
        "interference", "memory", "eager_peak_mem", "compression_ratio"]
    assert extra["interference"] == {"attempts": [{"load": 0.5, "baseline_cpu_wall": 1.0, "backend_cpu_wall": 1.0,
                                                   "baseline_foreign_cores": 0.0, "backend_foreign_cores": 0.0,
                                                   "reasons": ["busy"]}], "remeasured": 0, "reasons": ["busy"]}
    assert list(extra["memory"]) == ["unit", "baseline", "backend"]  # no empty column: no "empty"
    assert parse_extra("timing", extra)[2] == figures
    parity = ParityFigures("same", ["pass"])
    assert list(extra_object(parity, None, None, {})) == ["tolerance", "runs", "tensor", "max_abs_err", "step",
                                                          "compile_seconds"]


def test_the_calibration_and_the_noise_are_typed_and_round_trip() -> None:
    """A timing record of xla_min_run_time's calibrated runs with its speedup noise (issue 31): read typed, written
    back byte for byte; the records of before (no such fields) read as None, not as a guess."""
    cut = STATS.index(', "interference"')  # the noise comes after the statistics, before the interference
    calibration = ('"requested_iterations_per_run": 1, "calibrated_iterations_per_run": 16, "calibration_step_ms": '
                   '12.5, "backend_major_faults": [0, 3], "baseline_major_faults": [12, 0]')
    noise = '"speedup_noise": 0.01234, "speedup_noise_statistic": "MAD", "run_speedups": [0.6, 0.52]'
    calibrated = timing_line("{" + CONTEXT + ', "min_run_time": 0.2, ' + RUNS + ", " + calibration + ", "
                             + STATS[:cut] + ", " + noise + STATS[cut:] + "}", "unreliable")
    record = CaseRecord.from_json(json.loads(calibrated))
    assert record.unparsed_extra == {} and written_back(calibrated) == calibrated
    timing = record.timing
    assert timing is not None and timing.runs is not None and timing.stats is not None
    assert timing.context.min_run_time == 0.2 and timing.runs.calibrated_iterations_per_run == 16
    assert timing.runs.requested_iterations_per_run == 1 and timing.runs.calibration_step_ms == 12.5
    assert timing.runs.backend_major_faults == [0, 3] and timing.runs.baseline_major_faults == [12, 0]
    assert timing.stats.speedup_noise == 0.01234 and timing.stats.run_speedups == [0.6, 0.52]
    before = CaseRecord.from_json(json.loads(OLD_LINES["timing"])).timing
    assert before is not None and before.runs is not None and before.stats is not None
    assert before.context.min_run_time is None and before.runs.calibrated_iterations_per_run is None
    assert before.stats.speedup_noise is None and before.stats.run_speedups is None
    assert before.runs.backend_major_faults is None


def test_the_store_and_the_strict_reader() -> None:
    store = RecordStore()
    store.extend(CaseRecord.from_json(json.loads(text)) for text in OLD_LINES.values())
    again = RecordStore()
    again.loads(store.dumps())
    assert list(again) == list(store)
    with pytest.raises(RecordError, match="missing field"):
        CaseRecord.from_json({"suite": "parity"})
    with pytest.raises(RecordError, match="field 'extra': \\[\\] is not an object"):
        CaseRecord.from_json({"suite": "parity", "name": "m", "backend": "b", "mode": "train", "extra": []})
