"""Tests of pytest_xla_dynamo.timing: the arithmetic (hand-made numbers, in process, no torch) and the
timing suite in real sessions (pytester subprocesses on a tiny model on XLA:CPU): pytest-benchmark's
JSON, autosave and compare, ``--benchmark-disable``/``--benchmark-skip``, the records reaching the
report, and the xdist behaviour (refused with two workers, timed and aggregated with one).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_xla_dynamo import timing
from pytest_xla_dynamo.backends import BUILTIN_BACKENDS
from pytest_xla_dynamo.cases import Warmup
from pytest_xla_dynamo.metrics import Snapshot

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_timing.py"
BACKENDS = {b.name: b for b in BUILTIN_BACKENDS}


# --- the arithmetic -------------------------------------------------------------------------------------


def test_median_and_spread() -> None:
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    assert timing.median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert timing.spread([1.0, 2.0, 4.0]) == pytest.approx(1.5)  # (4 - 1) / 2
    assert timing.spread([0.5, 0.5]) == 0.0
    assert math.isnan(timing.spread([0.0, 0.0]))
    with pytest.raises(ValueError, match="no values"):
        timing.median([])


def test_per_iteration_and_speedup() -> None:
    assert timing.per_iteration([0.2, 0.6], 2) == pytest.approx([0.1, 0.3])
    with pytest.raises(ValueError, match="iterations_per_run"):
        timing.per_iteration([0.2], 0)
    # medians 0.3 and 0.1: the backend is three times faster than the baseline
    assert timing.speedup([0.2, 0.3, 0.9], [0.1, 0.05, 0.4]) == pytest.approx(3.0)


def test_compilation_latency_is_first_call_minus_first_call() -> None:
    assert timing.compilation_latency([12.5, 0.4], [0.25, 0.05]) == pytest.approx(12.25)
    with pytest.raises(ValueError, match="first warm-up step"):
        timing.compilation_latency([], [0.1])


def test_figures_from_runs() -> None:
    # 4 iterations per run; per iteration: backend 0.05, 0.1, 0.0625; baseline 0.25, 0.2, 0.3
    figures = timing.Figures.from_runs([0.2, 0.4, 0.25], [1.0, 0.8, 1.2], 4)
    assert figures.backend == pytest.approx((0.05, 0.1, 0.0625))
    assert figures.abs_latency_ms == pytest.approx(62.5)
    assert figures.baseline_latency_ms == pytest.approx(250.0)
    assert figures.speedup == pytest.approx(4.0)
    assert figures.spread == pytest.approx((0.1 - 0.05) / 0.0625)
    assert figures.baseline_spread == pytest.approx(0.4)


def test_interleaved_runs_the_baseline_before_each_backend_run() -> None:
    calls: list[str] = []
    timing.interleaved(lambda: calls.append("backend"), lambda: calls.append("baseline"), 3)
    assert calls == ["baseline", "backend"] * 3


def test_warmup_counts_by_backend() -> None:
    step1 = Snapshot(xla={"UncachedCompile": 3, "CachedCompile": 1},
                     dynamo={"stats": {"unique_graphs": 2, "calls_captured": 40},
                             "graph_break": {"reason a": 2, "reason b": 1}})
    step2 = Snapshot(xla={"UncachedCompile": 1, "CachedCompile": 3})
    warm = Warmup(step_seconds=[10.0, 0.5], per_step=[step1, step2])
    assert timing.warmup_counts(warm, BACKENDS["trace_once"]) == {
        "unique_graphs": 2, "calls_captured": 40, "graph_breaks": 3, "unique_graph_breaks": 2, "compiles": 4}
    # no dynamo: its counters are not this backend's (None, not 0); XLA compiles still count
    assert timing.warmup_counts(warm, BACKENDS["trace_everytime"]) == {
        "unique_graphs": None, "calls_captured": None, "graph_breaks": None, "unique_graph_breaks": None,
        "compiles": 4}
    # a dynamo backend whose warm-up captured nothing reports 0 graphs; a CPU backend no XLA compiles
    empty = Warmup(step_seconds=[0.1], per_step=[Snapshot()])
    assert timing.warmup_counts(empty, BACKENDS["inductor"])["unique_graphs"] == 0
    assert timing.warmup_counts(empty, BACKENDS["inductor"])["compiles"] is None


@pytest.mark.parametrize(("workerinput", "env", "workers"), [
    (None, {}, 0),
    (None, {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "1"}, 1),
    ({"workerid": "gw1", "workercount": 2}, {}, 2),
    ({"workerid": "gw0"}, {"PYTEST_XDIST_WORKER_COUNT": "3"}, 3),
    ({"workerid": "gw0"}, {}, 2),  # a worker that does not say how many: assume company
])
def test_xdist_workers_and_refusal(workerinput: dict[str, Any] | None, env: dict[str, str], workers: int) -> None:
    config: Any = SimpleNamespace() if workerinput is None else SimpleNamespace(workerinput=workerinput)
    assert timing.xdist_workers(config, env) == workers
    refusal = timing.xdist_refusal(config, env)
    if workers <= 1:
        assert refusal is None
    else:
        assert refusal is not None
        assert f"pytest-xdist with {workers} workers" in refusal
        assert "compete" in refusal and "-n 0" in refusal


# --- real sessions ----------------------------------------------------------------------------------------

CONFTEST = '''
from pytest_xla_dynamo.zoo import ModelSpec


def _model(tier):
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _inputs(tier, bs):
    import torch

    return (torch.randn(bs, 8),)


def pytest_xla_register_models(register):
    register(ModelSpec(name="tiny", source="user", build_model=_model, build_inputs=_inputs,
                       batch_size={"small": 2, "full": 2}), replace=True)
'''
COMMON = ("-p", "no:cacheprovider", "--xla-models=tiny", "-W", "ignore::pytest.PytestUnknownMarkWarning")
TIMEOUT = 900


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.path.joinpath("test_timing.py").write_text(SUITE.read_text())
    return pytester


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_timing_session_benchmark_json_autosave_compare_and_report(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once,trace_everytime", "--xla-iterations-per-run=2",
        "--xla-repeat=2", "--benchmark-json=out.json", "--benchmark-autosave", "--xla-report=table,json",
        "--xla-report-dir=rep", timeout=TIMEOUT)
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    # the report's table: both modes, both backends, a geomean row
    assert "train: speedup over eager (iterations per run: 2, repeat: 2)" in out
    assert "infer: speedup over eager" in out
    assert "XLA (trace once)" in out and "XLA (trace everytime)" in out
    assert out.count("| geomean") == 2

    records = {(r["backend"], r["mode"]): r for r in _records(suite.path / "rep" / "xla-dynamo.jsonl")}
    assert set(records) == {(b, m) for b in ("trace_once", "trace_everytime") for m in ("train", "infer")}
    bench = {b["fullname"]: b for b in json.loads((suite.path / "out.json").read_text())["benchmarks"]}
    assert len(bench) == 4
    for (backend, mode), record in records.items():
        assert record["suite"] == "timing" and record["status"] == "pass" and record["name"] == "tiny"
        assert record["dev"] == "xla" and record["batch_size"] == 2 and record["baseline"] == "eager"
        assert record["iterations_per_run"] == 2 and record["repeat"] == 2
        extra = record["extra"]
        assert extra["iterations_per_run"] == 2 and extra["repeat"] == 2
        assert len(extra["backend_runs_ms"]) == 2 and len(extra["baseline_runs_ms"]) == 2
        assert record["abs_latency"] == pytest.approx(timing.median(extra["backend_runs_ms"]), rel=1e-3)
        assert record["baseline_latency"] == pytest.approx(timing.median(extra["baseline_runs_ms"]), rel=1e-3)
        assert record["speedup"] == pytest.approx(record["baseline_latency"] / record["abs_latency"])
        assert record["spread"] >= 0
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
        assert b["group"] == f"{mode} tiny"
        assert b["stats"]["rounds"] == 2 and b["stats"]["iterations"] == 1
        info = b["extra_info"]
        for key in ("model", "backend", "mode", "iterations_per_run", "repeat", "compilation_seconds", "speedup",
                    "baseline_latency_ms", "unique_graphs", "graph_breaks", "compiles"):
            assert key in info, key
        assert (info["model"], info["backend"], info["mode"]) == ("tiny", backend, mode)
        assert info["iterations_per_run"] == 2 and info["repeat"] == 2
        assert info["speedup"] == pytest.approx(record["speedup"])
        assert info["compiles"] == record["compiles"] and info["unique_graphs"] == record["unique_graphs"]
        # pytest-benchmark timed the same runs from outside (seconds per run of 2 iterations)
        inner_ms = record["abs_latency"]
        outer_ms = b["stats"]["median"] / 2 * 1000
        assert inner_ms * 0.999 <= outer_ms <= inner_ms * 1.5 + 0.05

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


def test_benchmark_disable_runs_once_and_records_not_measured(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        *COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--xla-modes=train", "--xla-repeat=3",
        "--iterations-per-run=3", "--benchmark-disable", "--xla-report=table,json", "--xla-report-dir=rep",
        timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    assert record["status"] == timing.NOT_MEASURED
    assert record["iterations_per_run"] == 3  # the seed's spelling of --xla-iterations-per-run
    assert record["speedup"] is None and record["abs_latency"] is None and record["spread"] is None
    assert len(record["extra"]["backend_runs_ms"]) == 1 and len(record["extra"]["baseline_runs_ms"]) == 1
    assert "--benchmark-disable" in record["extra"]["timer"]
    assert "not_measured" in result.stdout.str()  # the table's cell says why there is no speedup


def test_benchmark_skip_skips(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(*COMMON, "-p", "no:xdist", "--xla-backend=trace_once", "--benchmark-skip",
                                        "-rs", timeout=TIMEOUT)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*--benchmark-skip*"])


def test_two_xdist_workers_refuse_timing(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(*COMMON, "-n", "2", "--xla-backend=trace_once", "--xla-modes=train",
                                        "--xla-report=table", "-rs", timeout=TIMEOUT)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*timing is refused under pytest-xdist with 2 workers: the workers compete for "
                                 "the * core*run the timing suite (suites/test_timing.py) with -n 0*"])
    assert "geomean" not in result.stdout.str()


def test_one_xdist_worker_times_and_the_controller_reports(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(*COMMON, "-n", "1", "--xla-backend=trace_once", "--xla-modes=train",
                                        "--xla-repeat=2", "--xla-report=table,json", "--xla-report-dir=rep",
                                        timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "1 record from 1 xdist worker" in out and "| geomean" in out
    (record,) = _records(suite.path / "rep" / "xla-dynamo.jsonl")
    assert record["status"] == "pass" and record["speedup"] > 0
    assert record["extra"]["xdist_workers"] == 1
    assert "pytest-benchmark disabled itself under pytest-xdist" in record["extra"]["timer"]
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
