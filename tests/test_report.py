"""Tests of pytest_xla_dynamo.report: the tables and writers (pure logic over hand-made CaseRecords,
in process), and the end-of-session plugin path (pytester subprocesses, with and without xdist).

No torch here: the subprocess sessions record fixed numbers through ``record_case``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo import report
from pytest_xla_dynamo.records import CaseRecord

pytest_plugins = ["pytester"]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPECTED_HEADER = (
    "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,"
    "dynamo_peak_mem,calls_captured,unique_graphs,fallbacks_to_eager,graph_breaks,unique_graph_breaks,"
    "autograd_captures,autograd_compiles,backend,mode,status,iterations_per_run,spread"
)


def timing(name: str, backend: str, mode: str, speedup: float | None, **kw: Any) -> CaseRecord:
    kw.setdefault("status", "pass" if speedup is not None else "fail_to_run")
    kw.setdefault("baseline", "eager")
    kw.setdefault("iterations_per_run", 1)
    kw.setdefault("repeat", 5)
    return CaseRecord(suite="timing", name=name, backend=backend, mode=mode, speedup=speedup, **kw)


def parity(name: str, backend: str, mode: str, status: str = "pass", **kw: Any) -> CaseRecord:
    return CaseRecord(suite="parity", name=name, backend=backend, mode=mode, status=status, **kw)


@pytest.fixture
def records() -> list[CaseRecord]:
    return [
        timing("resnet18", "trace_once", "train", 2.0, abs_latency=12.345, compilation_latency=11.5,
               unique_graphs=3, graph_breaks=0, fallbacks=2, calls_captured=70, spread=0.031, batch_size=2),
        timing("resnet18", "trace_everytime", "train", 1.0, abs_latency=24.69),
        timing("resnet50", "trace_once", "train", 0.5),
        timing("resnet50", "trace_everytime", "train", 2.0),
        timing("alexnet", "trace_once", "train", 4.0),
        timing("alexnet", "trace_everytime", "train", None),  # fail_to_run
        timing("resnet18", "trace_once", "infer", 3.0),
        # alexnet has no trace_everytime record at all, and no infer record for trace_once
        parity("resnet18", "trace_once", "train"),
        parity("resnet18", "trace_once", "infer", "fail_accuracy", known_issue="pytorch/xla#3361"),
        parity("alexnet", "trace_once", "train", "fail_to_run", message="boom"),
        parity("alexnet", "trace_everytime", "train", "pass_due_to_skip", flaky=True),
    ]


def table_rows(table: str) -> dict[str, list[str]]:
    """The data rows of a tabulate grid table: first cell -> the other cells, stripped."""
    rows = {}
    for line in table.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


# --- numbers and tables --------------------------------------------------------------------------------


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


def test_speedup_table_missing_cells_and_latency(records: list[CaseRecord]) -> None:
    records.append(timing("resnet50", "trace_everytime", "infer", 1.5, abs_latency=8.0))
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
    recs = [parity("m", "b", "train", "fail_accuracy"), parity("m", "b", "train", "pass")]
    table = report.status_table(recs)
    assert table_rows(table)["m"] == ["pass"]
    assert table.endswith("pass 1 / fail 0 / xfail 0")


# --- files -----------------------------------------------------------------------------------------------


def test_csv_header_and_round_trip(records: list[CaseRecord], tmp_path: Path) -> None:
    path = report.write_csv(records, tmp_path / "sub" / "perf.csv")
    text = path.read_text()
    assert text.splitlines()[0] == EXPECTED_HEADER
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records)
    first = rows[0]
    assert first["dev"] == "cpu" and first["name"] == "resnet18" and first["batch_size"] == "2"
    assert float(first["speedup"]) == pytest.approx(2.0)
    assert float(first["abs_latency"]) == pytest.approx(12.345, abs=1e-6)
    assert float(first["compilation_latency"]) == pytest.approx(11.5)
    assert (first["calls_captured"], first["unique_graphs"], first["graph_breaks"]) == ("70", "3", "0")
    assert first["fallbacks_to_eager"] == "2"
    assert float(first["spread"]) == pytest.approx(0.031)
    assert (first["backend"], first["mode"], first["status"], first["iterations_per_run"]) == (
        "trace_once", "train", "pass", "1")
    # not measured: empty, not 0
    for column in ("compression_ratio", "eager_peak_mem", "dynamo_peak_mem", "unique_graph_breaks",
                   "autograd_captures", "autograd_compiles"):
        assert first[column] == ""
    failed = rows[5]
    assert (failed["name"], failed["status"], failed["speedup"], failed["abs_latency"]) == (
        "alexnet", "fail_to_run", "", "")


def test_csv_extra_columns_and_computed_speedup(tmp_path: Path) -> None:
    rec = CaseRecord(suite="timing", name="m", backend="b", mode="infer", abs_latency=4.0, baseline_latency=6.0,
                     extra={"eager_peak_mem": 1.25, "autograd_compiles": 0, "fallbacks_to_eager": 7}, fallbacks=1)
    with report.write_csv([rec], tmp_path / "x.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert float(row["speedup"]) == pytest.approx(1.5)
    assert row["eager_peak_mem"] == "1.250000" and row["autograd_compiles"] == "0"
    assert row["fallbacks_to_eager"] == "7"


def test_jsonl(records: list[CaseRecord], tmp_path: Path) -> None:
    env = report.environment_info()
    path = report.write_json(records, tmp_path / "r.jsonl", env)
    lines = path.read_text().splitlines()
    assert len(lines) == len(records)
    parsed = [json.loads(line) for line in lines]
    assert all(p["environment"] == env for p in parsed)
    assert parsed[0]["name"] == "resnet18" and parsed[0]["speedup"] == 2.0 and parsed[0]["suite"] == "timing"
    assert parsed[5]["speedup"] is None and parsed[5]["status"] == "fail_to_run"
    assert report.read_json(path) == records


def test_environment_info_keys() -> None:
    env = report.environment_info()
    for key in ("versions", "PJRT_DEVICE", "XLA_FLAGS", "threads", "seed", "iterations_per_run", "repeat", "tier",
                "python", "platform", "date", "hostname", "cpu_count", "xdist_workers"):
        assert key in env
    assert set(env["versions"]) >= {"torch", "torch_xla"}
    assert env["cpu_count"] == os.cpu_count()
    json.dumps(env)  # JSON-safe


def test_environment_info_imports_no_torch() -> None:
    code = ("import json, sys; from pytest_xla_dynamo import report; env = report.environment_info(); "
            "print(json.dumps([m for m in ('torch', 'torch_xla', 'matplotlib', 'tabulate') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_png(records: list[CaseRecord], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = report.write_png(records, tmp_path / "plots" / "s.png", report.environment_info())
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)
    assert os.listdir(path.parent) == ["s.png"]


def test_png_without_timing_records(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = report.write_png([parity("m", "b", "train")], tmp_path / "e.png").read_bytes()
    assert data.startswith(PNG_MAGIC)


def test_atomic_write_leaves_nothing_on_error(tmp_path: Path) -> None:
    target = tmp_path / "r.csv"
    with pytest.raises(RuntimeError, match="writer failed"):
        with report.atomic_write(target) as f:
            f.write("half a report")
            raise RuntimeError("writer failed")
    assert os.listdir(tmp_path) == []


def test_failing_writer_keeps_the_previous_file(records: list[CaseRecord], tmp_path: Path) -> None:
    target = tmp_path / "r.csv"
    report.write_csv(records, target)
    before = target.read_bytes()

    def broken() -> Any:
        yield records[0]
        raise ValueError("record source broke")

    with pytest.raises(ValueError, match="record source broke"):
        report.write_csv(broken(), target)
    with pytest.raises(ValueError, match="record source broke"):
        report.write_json(broken(), tmp_path / "r.jsonl", {})
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["r.csv"]


def test_write_reports_missing_matplotlib(records: list[CaseRecord], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    lines, errors = report.write_reports(records, ("csv", "png"), tmp_path, {})
    assert errors == []
    assert lines == [f"csv report: {tmp_path / 'xla-dynamo.csv'}",
                     "png report not written: matplotlib is not installed (pip install matplotlib)"]
    assert sorted(os.listdir(tmp_path)) == ["xla-dynamo.csv"]


def test_write_reports_unwritable_dir(records: list[CaseRecord], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    lines, errors = report.write_reports(records, ("json",), blocker, {})
    assert lines == []
    assert len(errors) == 1 and errors[0].startswith(f"could not write the json report {blocker / 'xla-dynamo.jsonl'}")


# --- the plugin, end to end (subprocesses) ---------------------------------------------------------------

SESSION_TESTS = '''
import pytest
from pytest_xla_dynamo.records import CaseRecord, record_case

SPEEDUPS = {
    ("resnet18", "trace_once", "train"): 2.0, ("resnet50", "trace_once", "train"): 0.5,
    ("alexnet", "trace_once", "train"): 4.0,
    ("resnet18", "trace_everytime", "train"): 1.0, ("resnet50", "trace_everytime", "train"): 2.0,
    ("resnet18", "trace_once", "infer"): 3.0, ("resnet50", "trace_once", "infer"): 3.0,
    ("alexnet", "trace_once", "infer"): 3.0,
    ("resnet18", "trace_everytime", "infer"): 1.2, ("resnet50", "trace_everytime", "infer"): 1.2,
    ("alexnet", "trace_everytime", "infer"): 1.2,
}

@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("backend", ["trace_once", "trace_everytime"])
@pytest.mark.parametrize("model", ["resnet18", "resnet50", "alexnet"])
def test_timing(request, model, backend, mode):
    speedup = SPEEDUPS.get((model, backend, mode))
    record_case(request.node, CaseRecord(
        suite="timing", name=model, backend=backend, mode=mode, speedup=speedup,
        status="pass" if speedup else "fail_to_run", abs_latency=10.0 if speedup else None,
        baseline="eager", iterations_per_run=1, repeat=5))

@pytest.mark.parametrize("model", ["resnet18", "resnet50", "alexnet"])
def test_parity(request, model):
    status = "fail_accuracy" if model == "alexnet" else "pass"
    record_case(request.node, CaseRecord(suite="parity", name=model, backend="trace_once", mode="train",
                                         status=status))
'''

# Each worker says what the report folder held when its own sessionfinish hooks had all run.
WITNESS_CONFTEST = '''
import os
from pathlib import Path
import pytest

HERE = Path(__file__).parent

@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session, exitstatus):
    result = yield
    if hasattr(session.config, "workerinput"):
        out = HERE / "out"
        seen = sorted(os.listdir(out)) if out.exists() else []
        (HERE / ("witness-" + session.config.workerinput["workerid"])).write_text(repr(seen))
    return result
'''

N_TIMING = 12
N_PARITY = 3


def check_session_output(text: str) -> None:
    assert text.count(report.SECTION) == 1
    assert sum(line.startswith("+===") for line in text.splitlines()) == 3  # parity, train, infer: once each
    for model in ("resnet18", "resnet50", "alexnet"):
        assert sum(line.startswith(f"| {model} ") for line in text.splitlines()) == 3
    assert "train: speedup over eager (iterations per run: 1, repeat: 5)" in text
    assert "infer: speedup over eager (iterations per run: 1, repeat: 5)" in text
    lines = text.splitlines()
    means = [table_rows(line)["geomean"] for line in lines if line.startswith("| geomean ")]
    assert means == [["1.59x", "1.41x (2/3)"], ["3.00x", "1.20x"]]
    assert "fail_to_run" in text  # alexnet trace_everytime train
    assert "pass 2 / fail 1 / xfail 0" in text


def check_files(out: Path) -> None:
    assert sorted(os.listdir(out)) == ["xla-dynamo.csv", "xla-dynamo.jsonl", "xla-dynamo.png"]
    with (out / "xla-dynamo.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == N_TIMING + N_PARITY
    assert ",".join(rows[0].keys()) == EXPECTED_HEADER
    lines = (out / "xla-dynamo.jsonl").read_text().splitlines()
    parsed = [json.loads(line) for line in lines]
    assert len(parsed) == N_TIMING + N_PARITY
    assert {(p["name"], p["backend"], p["mode"], p["suite"]) for p in parsed} == {
        (m, b, mo, "timing") for m in ("resnet18", "resnet50", "alexnet")
        for b in ("trace_once", "trace_everytime") for mo in ("train", "infer")
    } | {(m, "trace_once", "train", "parity") for m in ("resnet18", "resnet50", "alexnet")}
    env = parsed[0]["environment"]
    assert env["PJRT_DEVICE"] == "CPU" and env["iterations_per_run"] == 1 and env["seed"] == 1337
    data = (out / "xla-dynamo.png").read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)


def test_plugin_without_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=SESSION_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=table,csv,json,png",
                                           "--xla-report-dir=out", timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    text = result.stdout.str()
    check_session_output(text)
    assert "xdist worker" not in text
    assert f"{N_TIMING + N_PARITY} records\n" in text + "\n"
    out = pytester.path / "out"
    for name in ("csv", "json", "png"):
        assert f"{name} report: out/xla-dynamo" in text
    check_files(out)


def test_plugin_with_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_cases=SESSION_TESTS)
    pytester.makeconftest(WITNESS_CONFTEST)
    result = pytester.runpytest_subprocess("-n", "2", "--xla-report=table,csv,json,png", "--xla-report-dir=out",
                                           timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    text = result.stdout.str()
    check_session_output(text)
    (line,) = [x for x in text.splitlines() if x.startswith(f"{N_TIMING + N_PARITY} records from 2 xdist workers")]
    counts = [int(part.split(": ")[1]) for part in line.split("(")[1].rstrip(")").split(", ")]
    assert sum(counts) == N_TIMING + N_PARITY
    check_files(pytester.path / "out")
    # the workers wrote nothing: when their sessionfinish was over, the report folder did not exist
    assert (pytester.path / "witness-gw0").read_text() == "[]"
    assert (pytester.path / "witness-gw1").read_text() == "[]"


def test_plugin_write_error_and_missing_matplotlib(pytester: pytest.Pytester) -> None:
    """A requested report that cannot be written fails the run with an error line; png without
    matplotlib is one line, no traceback; without "table" in --xla-report no table is printed."""
    pytester.makepyfile(test_cases=SESSION_TESTS)
    pytester.makeconftest("import sys\nsys.modules['matplotlib'] = None\n")
    (pytester.path / "blocked").write_text("a file where the report folder should be")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=csv,png", "--xla-report-dir=blocked",
                                           timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    assert text.count(report.SECTION) == 1
    assert "+===" not in text  # "table" not selected: no tables
    result.stdout.fnmatch_lines([
        "png report not written: matplotlib is not installed (pip install matplotlib)",
        "ERROR: could not write the csv report blocked/xla-dynamo.csv: *",
    ])
    assert "Traceback" not in text
    assert not (pytester.path / "xla-report").exists()


def test_plugin_default_report_is_tables_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cases=SESSION_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:xdist", timeout=600)
    result.assert_outcomes(passed=N_TIMING + N_PARITY)
    assert result.ret == 0
    check_session_output(result.stdout.str())
    assert " report: " not in result.stdout.str()
    assert not (pytester.path / "xla-report").exists()
    assert list(pytester.path.rglob("xla-dynamo.*")) == []


def test_plugin_silent_without_records(pytester: pytest.Pytester) -> None:
    # the one test is skipped, so the plugin never brings the XLA runtime up: a fast subprocess
    pytester.makepyfile(test_plain="import pytest\n@pytest.mark.skip\ndef test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--xla-report=table,csv", timeout=600)
    result.assert_outcomes(skipped=1)
    text = result.stdout.str()
    assert text.count(report.SECTION) == 1
    result.stdout.fnmatch_lines(["0 records", "no records: no csv report written"])
    assert not (pytester.path / "xla-report").exists()
    result = pytester.runpytest_subprocess("-p", "no:xdist", timeout=600)
    assert report.SECTION not in result.stdout.str()


def test_subprocess_geomeans_match_the_math() -> None:
    """The numbers the subprocess tests expect are the geometric means of their speedups."""
    assert report.format_speedup(math.prod([2.0, 0.5, 4.0]) ** (1 / 3)) == "1.59x"
    assert report.format_speedup(math.sqrt(1.0 * 2.0)) == "1.41x"
    assert report.format_speedup(report.geomean([1.2, 1.2, 1.2]) or 0) == "1.20x"
