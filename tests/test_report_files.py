"""Tests of the report files: the CSV, JSON Lines and PNG writers (pytest_xla_dynamo.report.csvfile,
.jsonl, .png) and the set they form (.writer: all or nothing, signals, the start-up folder check).

Pure logic over hand-made CaseRecords, in process; no torch. The signal tests send real signals to this
process inside a writing window that handles them (and check the handlers are restored afterwards).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sample_data import (
    EXPECTED_HEADER,
    PNG_MAGIC,
    SET,
    earlier_set,
    parity_record,
    sample_records,
    timing_figures,
    umask,
)

from pytest_xla_dynamo import report
from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.fileio import atomic_write
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.report import png, writer
from pytest_xla_dynamo.timing.settings import TimingSettings


@pytest.fixture
def records() -> list[CaseRecord]:
    return sample_records()


def everything(folder: Path) -> list[str]:
    """Every path under ``folder`` (hidden ones too), relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- csv -------------------------------------------------------------------------------------------------


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


def test_csv_memory_columns_and_computed_speedup(tmp_path: Path) -> None:
    """The peak memories come from the timing figures, ``fallbacks_to_eager`` is the record's ``fallbacks``, the
    autograd counters (no suite counts them) are empty."""
    rec = CaseRecord(suite="timing", name="m", backend="b", mode="infer", abs_latency=4.0, baseline_latency=6.0,
                     timing=timing_figures(eager_peak_mem=1.25, dynamo_peak_mem=0.5, compression_ratio=2.5),
                     fallbacks=1)
    with report.write_csv([rec], tmp_path / "x.csv").open(newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert float(row["speedup"]) == pytest.approx(1.5)
    assert row["eager_peak_mem"] == "1.250000" and row["dynamo_peak_mem"] == "0.500000"
    assert row["compression_ratio"] == "2.500000"
    assert row["fallbacks_to_eager"] == "1" and row["autograd_compiles"] == row["autograd_captures"] == ""


# --- json lines ----------------------------------------------------------------------------------------


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


def test_environment_info_from_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in report.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    env = report.environment_info(XlaConfig(seed=7, backends=("a", "b")), TimingSettings(iterations_per_run=10),
                                  argv=["-k", "x"], workers=2)
    assert (env["seed"], env["iterations_per_run"], env["repeat"], env["backends"]) == (7, 10, 5, ["a", "b"])
    assert (env["argv"], env["xdist_workers"], env["threads"]) == (["-k", "x"], 2, {"OMP_NUM_THREADS": "1"})
    assert "OMP_NUM_THREADS" in report.THREAD_VARIABLES


def test_environment_info_imports_no_torch() -> None:
    code = ("import json, sys; from pytest_xla_dynamo import report; env = report.environment_info(); "
            "print(json.dumps([m for m in ('torch', 'torch_xla', 'matplotlib', 'tabulate') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


# --- png -----------------------------------------------------------------------------------------------


def test_png(records: list[CaseRecord], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = report.write_png(records, tmp_path / "plots" / "s.png", report.environment_info())
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)
    assert os.listdir(path.parent) == ["s.png"]


def test_png_without_timing_records(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = report.write_png([parity_record("m", "b", "train")], tmp_path / "e.png").read_bytes()
    assert data.startswith(PNG_MAGIC)


# --- every file: atomic, ordinary permissions --------------------------------------------------------------


def test_atomic_write_leaves_nothing_on_error(tmp_path: Path) -> None:
    target = tmp_path / "r.csv"
    with pytest.raises(RuntimeError, match="writer failed"):
        with atomic_write(target) as f:
            f.write("half a report")
            raise RuntimeError("writer failed")
    assert os.listdir(tmp_path) == []
    assert not hasattr(report, "atomic_write")  # one atomic writer: fileio's


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


# --- the set: write_reports ----------------------------------------------------------------------------


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    """A report folder holding a complete set from an earlier run."""
    folder = tmp_path / "out"
    earlier_set(folder)
    return folder


def assert_earlier(folder: Path) -> None:
    assert everything(folder) == SET
    for name in SET:
        assert (folder / name).read_text() == f"earlier run: {name}\n"


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
    assert blocker.read_text() == "not a folder"


def test_write_reports_whole_set_replaces_the_earlier_one(records: list[CaseRecord], earlier: Path) -> None:
    pytest.importorskip("matplotlib")
    lines, errors = report.write_reports(records, ("table", "png", "json", "csv"), earlier,
                                         report.environment_info())
    assert errors == []
    assert lines == [f"{fmt} report: {earlier / name}" for fmt, name in zip(("csv", "json", "png"), SET, strict=True)]
    assert everything(earlier) == SET  # no staging folder, no temporary file
    assert (earlier / "xla-dynamo.csv").read_text().startswith(EXPECTED_HEADER)
    assert report.read_json(earlier / "xla-dynamo.jsonl") == records
    assert (earlier / "xla-dynamo.png").read_bytes().startswith(PNG_MAGIC)
    for name in SET:  # ordinary files, not mkstemp's 0600
        assert (earlier / name).stat().st_mode & 0o777 == 0o666 & ~umask()


def test_write_reports_drops_the_earlier_runs_other_files(records: list[CaseRecord], earlier: Path) -> None:
    (earlier / "notes.txt").write_text("mine")
    lines, errors = report.write_reports(records, ("json",), earlier, {})
    assert errors == []
    assert lines == [f"json report: {earlier / 'xla-dynamo.jsonl'}",
                     f"removed {earlier / 'xla-dynamo.csv'}: left by an earlier run, not part of this set",
                     f"removed {earlier / 'xla-dynamo.png'}: left by an earlier run, not part of this set"]
    assert everything(earlier) == ["notes.txt", "xla-dynamo.jsonl"]  # the folder's other files are kept
    assert report.read_json(earlier / "xla-dynamo.jsonl") == records


def test_write_reports_a_failing_writer_writes_nothing(records: list[CaseRecord], earlier: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_png(*args: Any, **kwargs: Any) -> Path:
        raise RuntimeError("no room for a figure")

    monkeypatch.setattr(png, "write_png", broken_png)
    monkeypatch.setattr(writer, "_matplotlib_missing", lambda: False)
    lines, errors = report.write_reports(records, ("csv", "json", "png"), earlier, {})
    assert lines == []
    assert errors == [f"could not write the png report {earlier / 'xla-dynamo.png'}: "
                      "RuntimeError: no room for a figure"]
    assert_earlier(earlier)  # csv and json were written, but not moved in: all or nothing


def test_write_reports_removes_the_folder_it_created(records: list[CaseRecord], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report.csvfile, "csv_row", lambda record: 1 / 0)
    lines, errors = report.write_reports(records, ("csv",), tmp_path / "new" / "out", {})
    assert (lines, len(errors)) == ([], 1) and "ZeroDivisionError" in errors[0]
    assert os.listdir(tmp_path) == []


# --- the set under signals ----------------------------------------------------------------------------------


def signalling_png(signum: int) -> Any:
    """A png writer that sends ``signum`` to this process halfway through its (atomic) file."""

    def write_png(records: Any, path: Path, environment: Any = None, *, baseline: Any = None) -> Path:
        with atomic_write(path, binary=True) as f:
            f.write(PNG_MAGIC + b"half a figure")
            f.flush()
            os.kill(os.getpid(), signum)
            f.write(b"never reached: the handler raised")
        return path

    return write_png


@pytest.fixture
def handlers() -> Iterator[None]:
    """The process's SIGINT/SIGTERM handlers are the same before and after the test."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt),
                                                (signal.SIGTERM, report.Terminated)])
def test_signal_while_writing_leaves_the_earlier_set(records: list[CaseRecord], earlier: Path, handlers: None,
                                                     monkeypatch: pytest.MonkeyPatch, signum: int,
                                                     raised: type[BaseException]) -> None:
    """Ctrl-C or SIGTERM while the png is written (csv and json already staged): nothing moved in, no
    staging folder, no hidden temporary file; SIGTERM raised as Terminated so that the cleanup ran."""
    monkeypatch.setattr(png, "write_png", signalling_png(signum))
    monkeypatch.setattr(writer, "_matplotlib_missing", lambda: False)
    written = report.ReportSet(records, ("csv", "json", "png"), earlier, {})
    with pytest.raises(raised):
        written.write()
    assert not written.published
    assert_earlier(earlier)


def test_signal_while_moving_in_is_held_until_the_set_is_complete(
        records: list[CaseRecord], earlier: Path, handlers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C as the staged files are moved in: held back until the whole new set is in place."""
    real_replace = os.replace
    moved: list[str] = []

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).parent == earlier:
            if not moved:
                os.kill(os.getpid(), signal.SIGINT)
            moved.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    written = report.ReportSet(records, ("csv", "json"), earlier, {})
    with pytest.raises(KeyboardInterrupt):
        written.write()
    assert written.published and moved == ["xla-dynamo.csv", "xla-dynamo.jsonl"]
    assert everything(earlier) == SET[:2]  # the earlier png is not part of this set: removed
    assert report.read_json(earlier / "xla-dynamo.jsonl") == records


def test_sigterm_window_restores_the_previous_handler(handlers: None) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with pytest.raises(report.Terminated) as info, writer.sigterm_raises():
            os.kill(os.getpid(), signal.SIGTERM)
        assert info.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # the test's own handler is back
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- the start-up check of --xla-report-dir ------------------------------------------------------------------


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot write into (chmod, or /sys for root), else skip."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    for candidate in (folder, Path("/sys")):
        try:
            os.rmdir(tempfile.mkdtemp(dir=candidate))
        except OSError:
            return candidate
    pytest.skip("no unwritable folder here (root on a writable /sys)")


def test_check_report_dir(tmp_path: Path) -> None:
    def check(folder: Path, report_formats: tuple[str, ...] = ("table", "csv")) -> str | None:
        return report.check_report_dir(XlaConfig(report=report_formats, report_dir=folder))

    assert check(tmp_path) is None
    assert check(tmp_path / "new" / "deeper") is None
    assert os.listdir(tmp_path) == []  # the check created nothing that stayed
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert check(blocker) == (f"--xla-report-dir: invalid value {str(blocker)!r} (a file, not a folder); "
                              "valid: a writable folder (created when missing)")
    assert check(blocker, ("table",)) is None  # no file report: the folder is not used
    message = check(blocker / "sub")
    assert message is not None and f"{str(blocker / 'sub')!r}" in message
    assert f"cannot be created: {str(blocker)!r} is not a folder" in message
    locked = unwritable_folder(tmp_path)
    message = check(locked)
    assert message is not None and f"invalid value {str(locked)!r} (not writable: " in message
    message = check(locked / "out")
    assert message is not None and f"(cannot be created in {str(locked)!r}: " in message
