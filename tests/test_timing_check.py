"""Tests of pytest_xla_dynamo.timing.check: the timing suite in real sessions (pytester subprocesses on a
tiny model on XLA:CPU): pytest-benchmark's JSON (one group per mode), autosave and compare,
``--benchmark-disable``/``--benchmark-skip``, the records reaching the report (thread budget, minimum and
spread, CPU/wall, memory reasons, the auto baseline), the ``unreliable`` path (a session whose load-average
reader says the machine is overloaded), the xdist behaviour (refused with two workers, timed and
aggregated with one), and the harness-overhead benchmark. Plus the in-process parts: the xdist refusal,
the warm-up figures a record carries, and how an ``unreliable`` record shows in the table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sample_data import TINY_CONFTEST, benchmark_script

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.core.backends import BUILTIN_BACKENDS, default_registry
from pytest_xla_dynamo.core.cases import Warmup
from pytest_xla_dynamo.core.machine import thp_mode
from pytest_xla_dynamo.core.metrics import Snapshot
from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord
from pytest_xla_dynamo.report.tables import speedup_table
from pytest_xla_dynamo.session import XlaSession
from pytest_xla_dynamo.timing import stats as timing
from pytest_xla_dynamo.timing.benchmark import (
    BENCHMARK_GROUP,
    TIMER_NO_BENCHMARK,
    TIMER_REMEASURED,
    benchmark_off,
    benchmark_wanted,
    name_benchmark,
)
from pytest_xla_dynamo.timing.check import xdist_refusal
from pytest_xla_dynamo.timing.in_process import HUGE_NOT_IN_EFFECT, NOT_MEASURED
from pytest_xla_dynamo.timing.memory import CPU_REASON
from pytest_xla_dynamo.timing.options import DEFAULT_REMEASURE, THP_MODES
from pytest_xla_dynamo.timing.placement import THP_ENV
from pytest_xla_dynamo.timing.threads import auto_threads, available_cores

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_timing.py"
BACKENDS = {b.name: b for b in BUILTIN_BACKENDS}


# --- in process ---------------------------------------------------------------------------------------


def test_warmup_figures_by_backend() -> None:
    step1 = Snapshot(xla={"UncachedCompile": 3, "CachedCompile": 1},
                     dynamo={"stats": {"unique_graphs": 2, "calls_captured": 40},
                             "graph_break": {"reason a": 2, "reason b": 1}})
    step2 = Snapshot(xla={"UncachedCompile": 1, "CachedCompile": 3})
    warm = Warmup(step_seconds=[10.0, 0.5], per_step=[step1, step2])
    assert warm.figures(BACKENDS["trace_once"]) == {
        "unique_graphs": 2, "calls_captured": 40, "graph_breaks": 3, "unique_graph_breaks": 2, "compiles": 4}
    # no dynamo: its counters are not this backend's (None, not 0); XLA compiles still count
    assert warm.figures(BACKENDS["trace_everytime"]) == {
        "unique_graphs": None, "calls_captured": None, "graph_breaks": None, "unique_graph_breaks": None,
        "compiles": 4}
    # a dynamo backend whose warm-up captured nothing reports 0 graphs; a CPU backend no XLA compiles
    empty = Warmup(step_seconds=[0.1], per_step=[Snapshot()])
    assert empty.figures(BACKENDS["inductor"])["unique_graphs"] == 0
    assert empty.figures(BACKENDS["inductor"])["compiles"] is None


@pytest.mark.parametrize(("workerinput", "env", "workers"), [
    (None, {}, 0),
    (None, {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "1"}, 1),
    ({"workerid": "gw1", "workercount": 2}, {}, 2),
    ({"workerid": "gw0"}, {"PYTEST_XDIST_WORKER_COUNT": "3"}, 3),
    ({"workerid": "gw0"}, {}, 2),  # a worker that does not say how many: assume company
])
def test_xdist_workers_and_refusal(workerinput: dict[str, Any] | None, env: dict[str, str], workers: int,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config: Any = SimpleNamespace() if workerinput is None else SimpleNamespace(workerinput=workerinput)
    assert XlaSession(config, XlaConfig(), default_registry()).worker_count == workers
    refusal = xdist_refusal(workers, cores=2)
    assert xdist_refusal(workers, cores=2, locked=True) is None  # the machine lock gives the timed runs the cores
    if workers <= 1:
        assert refusal is None
    else:
        assert refusal is not None
        assert f"pytest-xdist with {workers} workers" in refusal
        assert "compete" in refusal and "-n 0" in refusal and "no lock" in refusal


@pytest.mark.parametrize(("bench", "options", "wanted"), [
    (None, {}, False),  # pytest-benchmark not installed (or -p no:benchmark)
    ({"disabled": False, "skip": False}, {}, True),  # on
    ({"disabled": True, "skip": False}, {}, False),  # turned itself off: pytest-xdist
    ({"disabled": True, "skip": False}, {"benchmark_disable": True}, True),  # --benchmark-disable: run once through it
    ({"disabled": False, "skip": True}, {}, True),  # --benchmark-skip: the fixture skips the test
])
def test_the_timing_tests_ask_for_pytest_benchmarks_fixture_only_where_it_is_on(
        bench: dict[str, bool] | None, options: dict[str, bool], wanted: bool) -> None:
    config: Any = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
    if bench is not None:
        config._benchmarksession = SimpleNamespace(**bench)
    assert benchmark_wanted(config) is wanted
    assert benchmark_off(config) is (bench is not None and not wanted)
    names = ["xla_timing", "xla_model"]  # shared by a function's parametrized tests
    items: Any = [SimpleNamespace(config=config, fixturenames=names) for _ in range(2)]
    items.append(SimpleNamespace(config=config, fixturenames=["xla_parity"]))
    name_benchmark(items)  # what pytest-benchmark's --benchmark-only and --benchmark-skip read at collection
    assert names == ["xla_timing", "xla_model"] + ["benchmark"] * wanted
    assert items[-1].fixturenames == ["xla_parity"]


def test_an_unreliable_record_shows_as_such_in_the_table_and_stays_out_of_the_geomean() -> None:
    def rec(name: str, speedup: float, status: str = "pass") -> CaseRecord:
        return CaseRecord(suite="timing", name=name, backend="trace_once", mode="train", status=status,
                          speedup=speedup, abs_latency=10.0, baseline_latency=10.0 * speedup, baseline="eager",
                          iterations_per_run=1, repeat=5)

    table = speedup_table([rec("a", 2.0), rec("b", 24.3, UNRELIABLE), rec("c", 0.5)], "train")
    row_b = next(line for line in table.splitlines() if line.startswith("| b "))
    assert UNRELIABLE in row_b and "24.3" not in row_b
    geomean_row = next(line for line in table.splitlines() if line.startswith("| geomean"))
    assert "1.00x (2/3)" in geomean_row  # sqrt(2.0 * 0.5), over the two trusted figures


# --- real sessions ----------------------------------------------------------------------------------------

CONFTEST = TINY_CONFTEST
# The machine looks overloaded to the timing: its load-average reader reports 99 (the decision path is
# under test here, not the machine).
OVERLOADED = '''

def pytest_configure(config):
    import importlib

    measure = importlib.import_module("pytest_xla_dynamo.timing.measure")
    measure.loadavg = lambda: 99.0
'''
COMMON = ("-p", "no:cacheprovider", "--xla-models=tiny", "-W", "ignore::pytest.PytestUnknownMarkWarning")
TIMEOUT = 900


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_XLA_THREADS",
                "PYTEST_XLA_BASELINE_BACKEND", "PJRT_NPROC"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.path.joinpath("test_timing.py").write_text(SUITE.read_text())
    return pytester


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_judged(record: dict[str, Any]) -> None:
    """The record's status is the interference verdict's: pass without reasons, unreliable with them."""
    extra = record["extra"]
    attempts = extra["interference"]["attempts"]
    assert 1 <= len(attempts) <= DEFAULT_REMEASURE + 1
    assert extra["interference"]["remeasured"] == len(attempts) - 1
    assert extra["interference"]["reasons"] == attempts[-1]["reasons"]
    assert all(a["reasons"] for a in attempts[:-1])  # re-measured only after a disturbed attempt
    if attempts[-1]["reasons"]:
        assert record["status"] == UNRELIABLE and record["message"].startswith("timing unreliable: ")
        assert len(attempts) == DEFAULT_REMEASURE + 1
    else:
        assert record["status"] == "pass" and record["message"] == ""
    assert extra["loadavg_1min"] == attempts[-1]["load"]
    for side in ("baseline", "backend"):
        assert extra[f"{side}_cpu_wall"] == attempts[-1][f"{side}_cpu_wall"] > 0
        assert len(extra[f"{side}_cpu_ms"]) == len(extra[f"{side}_runs_ms"])
        faults = extra[f"{side}_major_faults"]  # the pages read back from disk during each run (POSIX)
        assert len(faults) == len(extra[f"{side}_runs_ms"]) and all(isinstance(f, int) and f >= 0 for f in faults)


def test_timing_session_benchmark_json_autosave_compare_and_report(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once,trace_everytime", "--xla-iterations-per-run=2",
        "--xla-repeat=2", "--benchmark-json=out.json", "--benchmark-autosave", "--xla-report=table,csv,json",
        "--xla-report-dir=rep", timeout=TIMEOUT)
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    # the report's table: both modes, both backends, a geomean row; the title says the iterations per run that ran
    records = {(r["backend"], r["mode"]): r for r in _records(suite.path / "rep" / "xla-dynamo.jsonl")}
    ran = sorted(r["extra"]["calibrated_iterations_per_run"] for (_, mode), r in records.items() if mode == "train")
    span = str(ran[0]) if ran[0] == ran[-1] else f"{ran[0]}-{ran[-1]}"
    its = ("iterations per run: 2" if ran == [2, 2]
           else f"iterations per run: {span} (calibrated by xla_min_run_time=0.2 s; asked: 2)")
    assert f"train: speedup over eager ({its}, repeat: 2)" in out
    assert "infer: speedup over eager" in out
    assert "XLA (trace once)" in out and "XLA (trace everytime)" in out
    assert out.count("| geomean") == 2
    # pytest-benchmark's own tables: one per mode, not one per case
    assert out.count(f"benchmark '{BENCHMARK_GROUP.format(mode='train')}'") == 1
    assert out.count(f"benchmark '{BENCHMARK_GROUP.format(mode='infer')}'") == 1
    assert "benchmark 'train tiny'" not in out

    assert set(records) == {(b, m) for b in ("trace_once", "trace_everytime") for m in ("train", "infer")}
    bench = {b["fullname"]: b for b in json.loads((suite.path / "out.json").read_text())["benchmarks"]}
    assert len(bench) == 4
    threads = auto_threads(available_cores())
    for (backend, mode), record in records.items():
        assert record["suite"] == "timing" and record["name"] == "tiny"
        _check_judged(record)
        assert record["dev"] == "xla" and record["batch_size"] == 2 and record["baseline"] == "eager"
        assert record["iterations_per_run"] == 2 and record["repeat"] == 2
        extra = record["extra"]
        assert extra["iterations_per_run"] == 2 and extra["repeat"] == 2
        # calibrated runs (xla_min_run_time, default 0.2 s): at least the 2 asked for, the same for both sides
        assert extra["requested_iterations_per_run"] == 2 <= extra["calibrated_iterations_per_run"]
        assert extra["min_run_time"] == 0.2 and extra["calibration_step_ms"] > 0
        # the auto baseline: the XLA device is the CPU, so CPU eager
        assert extra["baseline_choice"] == "auto (PJRT_DEVICE)"
        # the thread budget: auto, for torch and XLA:CPU alike
        assert extra["threads"] == threads
        assert extra["thread_budget"] == {"threads": threads, "choice": "auto", "cores": available_cores(),
                                          "xla": f"PJRT_NPROC={threads}", "torch": threads}
        # ... and in the JSON report's environment
        assert record["environment"]["thread_budget"] == {"threads": threads, "choice": "auto",
                                                          "cores": available_cores(), "PJRT_NPROC": str(threads)}
        assert record["environment"]["threads"]["PJRT_NPROC"] == str(threads)
        assert len(extra["backend_runs_ms"]) == 2 and len(extra["baseline_runs_ms"]) == 2
        # the runs are recorded rounded to 0.1 us (a tiny model's step is ~20 us on a fast CPU)
        assert record["abs_latency"] == pytest.approx(timing.median(extra["backend_runs_ms"]), rel=1e-3, abs=5e-5)
        assert record["baseline_latency"] == pytest.approx(timing.median(extra["baseline_runs_ms"]), rel=1e-3,
                                                           abs=5e-5)
        assert record["speedup"] == pytest.approx(record["baseline_latency"] / record["abs_latency"])
        # robust statistics: the median is the speedup's statistic; minimum and spread beside it
        assert extra["speedup_statistic"] == "median"
        assert extra["backend_min_ms"] == pytest.approx(min(extra["backend_runs_ms"]), rel=1e-3)
        assert extra["baseline_min_ms"] == pytest.approx(min(extra["baseline_runs_ms"]), rel=1e-3)
        assert record["spread"] >= 0 and extra["baseline_spread"] >= 0
        # memory: XLA:CPU and CPU eager give no per-case peak, and the JSON says why
        assert "eager_peak_mem" not in extra and "dynamo_peak_mem" not in extra
        assert "compression_ratio" not in extra
        assert f"eager_peak_mem: {CPU_REASON}" in extra["memory"]["empty"]
        assert "GetAllocatorStats is not supported" in extra["memory"]["empty"]
        # compilation is warm-up: first backend step minus first baseline step, and none while timing
        assert record["compilation_latency"] == pytest.approx(
            extra["warmup_seconds"][0] - extra["baseline_warmup_seconds"][0], abs=1e-3)
        assert record["compilation_latency"] > 0
        assert record["compiles"] >= 1
        assert record["recompiles"] == 0 and extra["timed_compiles"] == 0
        if backend == "trace_once":
            assert record["unique_graphs"] >= 1 and record["graph_breaks"] == 0
            assert record["unique_graph_breaks"] == 0
        else:
            assert record["unique_graphs"] is None and record["graph_breaks"] is None
            assert record["unique_graph_breaks"] is None
        assert "--xla-iterations-per-run=2" in record["repro"] and "--xla-repeat=2" in record["repro"]
        assert f"--xla-backend={backend}" in record["repro"] and record["nodeid"] in record["repro"]

        b = bench[record["nodeid"]]
        assert b["group"] == BENCHMARK_GROUP.format(mode=mode)
        assert b["stats"]["rounds"] == 2 and b["stats"]["iterations"] == 1
        info = b["extra_info"]
        for key in ("model", "backend", "mode", "iterations_per_run", "repeat", "compilation_seconds", "speedup",
                    "baseline_latency_ms", "unique_graphs", "graph_breaks", "compiles", "status", "threads",
                    "speedup_statistic", "backend_min_ms", "baseline_min_ms", "interference"):
            assert key in info, key
        assert (info["model"], info["backend"], info["mode"]) == ("tiny", backend, mode)
        assert info["iterations_per_run"] == 2 and info["repeat"] == 2
        assert info["speedup"] == pytest.approx(record["speedup"]) and info["status"] == record["status"]
        assert info["threads"] == threads
        assert info["compiles"] == record["compiles"] and info["unique_graphs"] == record["unique_graphs"]
        if not extra["interference"]["remeasured"]:
            # pytest-benchmark timed the same runs from outside (seconds per run of 2 iterations)
            inner_ms = record["abs_latency"]
            outer_ms = b["stats"]["median"] / extra["calibrated_iterations_per_run"] * 1000  # runs are calibrated
            assert inner_ms * 0.999 <= outer_ms <= inner_ms * 1.5 + 0.05
        else:
            assert extra["timer"] == TIMER_REMEASURED

    csv_text = (suite.path / "rep" / "xla-dynamo.csv").read_text().splitlines()
    header = csv_text[0].split(",")
    for line in csv_text[1:]:
        row = dict(zip(header, line.split(","), strict=True))
        assert row["eager_peak_mem"] == row["dynamo_peak_mem"] == row["compression_ratio"] == ""
        assert row["status"] in ("pass", UNRELIABLE)

    saved = list((suite.path / ".benchmarks").glob("*/0001_*.json"))
    assert len(saved) == 1, saved
    compared = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-modes=train", "--xla-repeat=2",
        "--benchmark-compare=0001", timeout=TIMEOUT)
    compared.assert_outcomes(passed=1)
    compared.stderr.fnmatch_lines(["*Comparing against benchmarks from*0001_*"])
    rows = [line for line in compared.stdout.lines if line.startswith("test_timing_train[tiny-trace_once] (")]
    assert sorted(row.split(")")[0] for row in rows) == [
        "test_timing_train[tiny-trace_once] (0001_unversi", "test_timing_train[tiny-trace_once] (NOW"]


def test_a_disturbed_timing_is_remeasured_then_recorded_unreliable_and_flagged(suite: pytest.Pytester) -> None:
    """Measured again ``xla_remeasure`` times (2 here), then recorded unreliable; the repro names the setting."""
    suite.makeconftest(CONFTEST + OVERLOADED)
    result = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-modes=train", "--xla-repeat=2",
        "-o", "xla_threads=1", "-o", "xla_remeasure=2", "--xla-report=table,csv,json", "--xla-report-dir=rep",
        timeout=TIMEOUT)
    result.assert_outcomes(passed=1)  # a disturbed timing is not a failing backend
    out = result.stdout.str()
    cores = available_cores()
    reason = f"load 99.0 on {cores} core{'s' if cores != 1 else ''}"
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    assert record["status"] == UNRELIABLE
    assert record["message"].startswith(f"timing unreliable: {reason}")
    assert "(measured 3 times; the speedup is kept but not trusted)" in record["message"]
    assert "-o xla_remeasure=2" in record["repro"]
    extra = record["extra"]
    assert extra["interference"]["remeasured"] == 2
    assert [a["load"] for a in extra["interference"]["attempts"]] == [99.0] * 3
    assert all(reason in a["reasons"] for a in extra["interference"]["attempts"])
    assert extra["timer"] == TIMER_REMEASURED and extra["threads"] == 1
    # the speedup is kept in the record, from the last attempt's runs
    assert record["speedup"] == pytest.approx(record["baseline_latency"] / record["abs_latency"])
    assert record["speedup"] > 0 and len(extra["backend_runs_ms"]) == 2
    # flagged: a warning, the table's cell, the CSV's status column
    assert f"timing unreliable: {reason}" in out
    row = next(line for line in out.splitlines() if line.startswith("| tiny "))
    assert UNRELIABLE in row and "x " not in row.replace(UNRELIABLE, "")
    csv_lines = (suite.path / "rep" / "xla-dynamo.csv").read_text().splitlines()
    csv_row = dict(zip(csv_lines[0].split(","), csv_lines[1].split(","), strict=True))
    assert csv_row["status"] == UNRELIABLE and csv_row["speedup"] == ""


def test_the_speed_gate_never_uses_an_unreliable_speedup(suite: pytest.Pytester) -> None:
    """A stored baseline speedup far above anything measurable: a trusted figure would be SLOWER and fail
    the session; an unreliable one is skipped with a note."""
    suite.makeconftest(CONFTEST + OVERLOADED)
    stored = {"suite": "timing", "name": "tiny", "backend": "trace_once", "mode": "train", "status": "pass",
              "speedup": 1000.0}
    suite.path.joinpath("baseline.jsonl").write_text(json.dumps(stored) + "\n")
    result = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-modes=train", "--xla-repeat=2",
        "--xla-min-speedup-ratio=0.9", "--xla-timing-baseline=baseline.jsonl", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "SLOWER" not in out and "regression" not in out
    # the gate's note (labels.UNRELIABLE: reported, never failing) and the finding's detail
    assert "1 unreliable" in out, out[-3000:]
    assert "speed gate skipped: the timing is unreliable (load 99.0 on " in out, out[-3000:]


@pytest.mark.skipif(thp_mode() not in THP_MODES, reason="needs the kernel's transparent huge pages")
def test_huge_pages_time_on_huge_pages_or_fail_saying_why(suite: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """xla_placements=huge: the session says so, the record too; where a conftest allocated a CPU tensor before
    the plugin could turn torch's huge pages on, the timing test fails saying why and what to do."""
    monkeypatch.delenv(THP_ENV, raising=False)
    args = (*COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-modes=train", "--xla-repeat=2",
            "-o", "xla_placements=huge", "--xla-report=json", "--xla-report-dir=rep")
    result = suite.runpytest_subprocess(*args, timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert f"torch's CPU allocator: huge pages ({THP_ENV}=1)" in out
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    assert record["extra"]["placements"] == "huge" and "xla_placements=huge" in record["repro"]

    suite.makeconftest(CONFTEST + "\nimport torch\n\nEARLY = torch.ones(4)  # a CPU allocation before the plugin's\n")
    result = suite.runpytest_subprocess(*args, timeout=TIMEOUT)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert HUGE_NOT_IN_EFFECT in out and "Traceback" not in out


def test_bad_thread_budget_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(*COMMON, "-o", "xla_threads=0", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "xla_threads (ini): invalid value '0'; valid: an integer 1..4096, or auto" in err
    assert "Traceback" not in err + result.stdout.str()


def test_benchmark_disable_runs_once_and_records_not_measured(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-modes=train", "--xla-repeat=3",
        "--iterations-per-run=3", "--benchmark-disable", "--xla-report=table,json", "--xla-report-dir=rep",
        timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    assert record["status"] == NOT_MEASURED
    assert record["iterations_per_run"] == 3  # the seed's spelling of --xla-iterations-per-run
    assert record["speedup"] is None and record["abs_latency"] is None and record["spread"] is None
    assert len(record["extra"]["backend_runs_ms"]) == 1 and len(record["extra"]["baseline_runs_ms"]) == 1
    assert "--benchmark-disable" in record["extra"]["timer"]
    assert "interference" not in record["extra"]  # nothing measured, nothing judged
    assert "not_measured" in result.stdout.str()  # the table's cell says why there is no speedup


def test_without_pytest_benchmark_the_plugin_times_with_its_own_loop(suite: pytest.Pytester) -> None:
    """A test of xla_timing that does not name pytest-benchmark's fixture: without pytest-benchmark
    (``-p no:benchmark``) the runs are timed by the plugin's own loop; with it and ``--benchmark-disable`` the
    case runs once through the fixture, not measured."""
    suite.path.joinpath("test_timing.py").unlink()
    suite.makepyfile(test_mine="""
        import torch

        BEFORE = torch.get_num_threads()

        def test_mine(xla_timing, xla_model, xla_backend):
            xla_timing.check_case(xla_model, xla_backend, mode="train")

        def test_after_it_torch_has_its_threads_back():  # the budget (auto: 1 on 2 cores) stayed in the timing test
            assert torch.get_num_threads() == BEFORE
    """)
    for flags, status in ((("-p", "no:benchmark"), None), (("--benchmark-disable",), NOT_MEASURED)):
        result = suite.runpytest_subprocess(*COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-repeat=2",
                                            "--xla-report=json", "--xla-report-dir=rep", *flags, timeout=TIMEOUT)
        result.assert_outcomes(passed=2)
        assert "benchmark '" not in result.stdout.str()  # pytest-benchmark did not see the test
        (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
        if status is None:
            _check_judged(record)
            assert record["extra"]["timer"] in (TIMER_NO_BENCHMARK, TIMER_REMEASURED)
            assert len(record["extra"]["backend_runs_ms"]) == 2
        else:
            assert record["status"] == status and len(record["extra"]["backend_runs_ms"]) == 1


def test_benchmark_skip_skips(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(*COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--benchmark-skip",
                                        "-rs", timeout=TIMEOUT)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*--benchmark-skip*"])


def test_two_xdist_workers_time_under_the_machine_lock(suite: pytest.Pytester) -> None:
    """Two workers: the timed runs hold the machine lock exclusive (workers/machine_lock.py), so timing is not
    refused; the other worker's test (a CPU-bound loop) runs beside the warm-up but not beside the timed runs,
    and the worker's untimed tests run at its share of the cores (one thread of two)."""
    suite.makepyfile(test_other="""
        import time

        import pytest
        import torch

        @pytest.mark.xdist_group("other")
        def test_busy_beside_it():
            assert torch.get_num_threads() == 1  # the worker's share of 2 cores (or fewer) between 2 workers
            end = time.perf_counter() + 20
            while time.perf_counter() < end:
                pass

        def test_same_model(xla_model):  # the model's group: the timing test's worker (pytest-xdist#1386)
            pass
    """)
    result = suite.runpytest_subprocess(*COMMON, "-n", "2", "--xla-backend=trace_once", "--xla-modes=train",
                                        "--xla-repeat=2", "--xla-report=table,json", "--xla-report-dir=rep", "-rs",
                                        "-v", timeout=TIMEOUT)
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "| geomean" in out
    # pytest-benchmark turned itself off: the timing test did not ask for its fixture, which would only have warned
    for text in ("PytestBenchmarkWarning", "Benchmark fixture was not used", "Benchmarks are automatically disabled"):
        assert text not in out + result.stderr.str()
    workers = [re.findall(rf"\[(gw\d)\] .*PASSED .*{name}", out) for name in ("test_timing_train", "test_same_model")]
    assert workers[0] and workers[0] == workers[1], out
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    _check_judged(record)
    # the busy test starts at once and holds its share for 20 s; the timed runs, asked for after the tiny model's
    # start-up and compile, wait for it to end
    assert record["extra"]["xdist_workers"] == 2 and record["extra"]["machine_lock_wait_s"] > 1


def test_one_xdist_worker_times_and_the_controller_reports(suite: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Also: the thread budget from the environment reaches the worker (torch and XLA:CPU)."""
    monkeypatch.setenv("PYTEST_XLA_THREADS", "2")
    result = suite.runpytest_subprocess(*COMMON, "-n", "1", "--xla-backend=trace_once", "--xla-modes=train",
                                        "--xla-repeat=2", "--xla-report=table,json", "--xla-report-dir=rep",
                                        timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "1 record from 1 xdist worker" in out and "| geomean" in out
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    _check_judged(record)
    assert record["speedup"] > 0
    assert record["extra"]["xdist_workers"] == 1
    assert record["extra"]["threads"] == 2
    assert record["extra"]["thread_budget"]["choice"] == "2" and record["extra"]["thread_budget"]["torch"] == 2
    assert record["extra"]["thread_budget"]["xla"] == "PJRT_NPROC=2"
    timer = record["extra"]["timer"]
    assert "pytest-benchmark disabled itself under pytest-xdist" in timer or timer == TIMER_REMEASURED
    assert len(record["extra"]["backend_runs_ms"]) == 2


def test_harness_overhead_benchmark_prints_its_figures() -> None:
    """benchmarks/harness_overhead.py runs end to end (part 1, on the smallest zoo model) and prints the
    plugin / hand-loop ratios; their values are figures to read, not asserted."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "harness_overhead.py"), "--model=BERT_pytorch",
         "--repeat=2", "--blocks=1", "--no-subprocess"],
        cwd=ROOT, env={**env, "PJRT_DEVICE": "CPU"}, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for label in ("ratio plugin / hand: ", "over all blocks: ", "pytest-benchmark's median of the same runs: "):
        assert re.search(re.escape(label) + r".*\d+\.\d+", proc.stdout), (label, proc.stdout[-3000:])
    assert "PytestAssertRewriteWarning" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("quiet", "busy", "expected"), [
    ({"speedup": 0.80, "status": "pass"}, {"speedup": 0.88, "status": "pass"}, "ok"),  # within 15%
    ({"speedup": 0.80, "status": "pass"}, {"speedup": 1.00, "status": "pass"}, "drift"),  # 25% off, unflagged
    ({"speedup": 0.80, "status": "pass"}, {"speedup": 1.60, "status": "pass"}, "MISSED"),  # 2x off, unflagged
    ({"speedup": 0.80, "status": "pass"}, {"speedup": 0.40, "status": "pass"}, "MISSED"),  # too slow counts too
    ({"speedup": 0.80, "status": "pass"}, {"speedup": 19.4, "status": UNRELIABLE}, "ok"),  # flagged
    ({"speedup": 0.80, "status": UNRELIABLE}, {"speedup": 0.81, "status": "pass"}, "ok (quiet unreliable)"),
    ({"speedup": None, "status": "fail_to_run"}, {"speedup": 0.81, "status": "pass"}, "no figure"),
])
def test_timing_robustness_verdicts_follow_the_issue_goal(quiet: dict[str, Any], busy: dict[str, Any],
                                                          expected: str) -> None:
    """benchmarks/timing_robustness.py: within 15% or flagged is ok; unflagged 15-30% drift; > 30% MISSED."""
    ratio, text = benchmark_script("timing_robustness").verdict(quiet, busy)
    assert text == expected
    if quiet["speedup"] is not None:
        assert ratio == pytest.approx(busy["speedup"] / quiet["speedup"])

