"""The process median (``--xla-timing-processes``, issue 31): the combination of the processes' records (pure), and
one real session (tiny models on XLA:CPU, a pytester subprocess) in which each timing test is measured in three
fresh processes, and a case that fails to run fails its test with the failing process's report."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from typing import Any

import pytest
from sample_data import TINY_CONFTEST, timing_figures, timing_record
from test_config import usage_error

from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord, TimingStats
from pytest_xla_dynamo.timing import across, noise
from pytest_xla_dynamo.timing.options import MAX_TIMING_PROCESSES

pytest_plugins = ["pytester"]


def _process(speedup: float, own_noise: float | None = 0.01, reasons: tuple[str, ...] = (),
             latency: float = 2.0) -> CaseRecord:
    figures = timing_figures(reasons)
    assert figures.stats is not None
    figures = replace(figures, stats=replace(figures.stats, speedup_noise=own_noise))
    return timing_record("m", "trace_once", "train", speedup, abs_latency=latency, baseline_latency=latency * speedup,
                         spread=0.1, status=UNRELIABLE if reasons else "pass",
                         message="timing unreliable: " + "; ".join(reasons) if reasons else "", timing=figures)


def _stats(record: CaseRecord) -> TimingStats:
    assert record.timing is not None and record.timing.stats is not None
    return record.timing.stats


def test_the_median_process_and_the_noise_between_processes() -> None:
    records = [_process(0.30, latency=3.0), _process(0.20, latency=2.0), _process(0.22, latency=2.5)]
    combined = across.combine(records, 3)
    assert combined.status == "pass" and combined.message == ""
    assert combined.speedup == 0.22 and combined.abs_latency == 2.5  # the median of each figure
    assert combined.baseline_latency == pytest.approx(statistics.median([0.9, 0.4, 0.55]))
    stats = _stats(combined)
    assert stats.timing_processes == 3 and stats.process_speedups == [0.30, 0.20, 0.22]
    between = noise.median_noise([0.30, 0.20, 0.22])
    assert between is not None and between > 0.01 / 3 ** 0.5
    assert stats.speedup_noise == pytest.approx(between, abs=1e-5)
    assert stats.speedup_noise_statistic == across.STATISTIC


def test_the_noise_is_never_below_the_processes_own() -> None:
    """Three processes that agree exactly: the between-process MAD is 0, the floor is their own noise / sqrt(3)."""
    combined = across.combine([_process(0.5, own_noise=0.03)] * 3, 3)
    assert _stats(combined).speedup_noise == pytest.approx(0.03 / 3 ** 0.5, abs=1e-5)
    assert across.combined_noise([0.5, 0.6], [None, None]) is None  # two processes, no own noise: no figure


def test_a_disturbed_minority_is_left_out_of_the_median() -> None:
    records = [_process(0.9, reasons=("load 5.0 on 2 cores",)), _process(0.20), _process(0.22)]
    combined = across.combine(records, 3)
    assert combined.status == "pass" and combined.speedup == pytest.approx(0.21)
    assert _stats(combined).process_speedups == [0.9, 0.2, 0.22]


def test_a_disturbed_majority_makes_the_case_unreliable_with_each_processes_reasons() -> None:
    records = [_process(0.9, reasons=("load 5.0 on 2 cores",)), _process(0.20),
               _process(0.25, reasons=("other processes used 1.30 cores during the backend's runs",))]
    combined = across.combine(records, 3)
    assert combined.status == UNRELIABLE and combined.speedup == 0.25  # the median over all three
    assert combined.message == (
        "timing unreliable: 1 of 3 processes measured undisturbed (a majority is needed; the median is over all "
        "3): process 1: load 5.0 on 2 cores; process 3: other processes used 1.30 cores during the backend's runs")


def test_unmeasured_records_pass_through_and_nothing_is_an_error() -> None:
    unmeasured = timing_record("m", "trace_once", "train", None, status="not_measured")
    assert across.combine([unmeasured, unmeasured], 2) is unmeasured
    with pytest.raises(ValueError, match="at least one"):
        across.combine([], 3)


# --- a real session -----------------------------------------------------------------------------------------

BROKEN = '''

_register_tiny = pytest_xla_register_models


def _broken(tier):
    import torch

    class Broken(torch.nn.Linear):
        def forward(self, x):
            raise RuntimeError("broken on purpose")

    return Broken(8, 4)


def pytest_xla_register_models(register):
    _register_tiny(register)
    for name in ("broken", "known"):
        register(ModelSpec(name=name, source="user", build_model=_broken, build_inputs=_inputs,
                           batch_size={"small": 2, "full": 2}), replace=True)


def pytest_runtest_call(item):
    import os

    with open(os.path.join(str(item.config.rootpath), "pids.txt"), "a") as fh:
        fh.write(f"{item.name} {os.getpid()}\\n")
'''

KNOWN = """
[[issue]]
id = "local:known-broken"
title = "broken on purpose, and known"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "RuntimeError"
match = "broken on purpose"
tests = ["test_timing_train"]
models = ["known"]
"""


def test_each_timing_test_is_measured_in_fresh_processes(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PJRT_NPROC"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(TINY_CONFTEST + BROKEN)
    suite = Path(__file__).resolve().parents[1] / "suites" / "test_timing.py"
    pytester.path.joinpath("test_timing.py").write_text(suite.read_text())
    pytester.path.joinpath("known.toml").write_text(KNOWN)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "--xla-models=tiny,broken,known", "--xla-backend=trace_once",
        "--xla-known-issues-file=known.toml", "-rx",
        "--xla-modes=train", "--xla-repeat=3", "-o", "xla_min_run_time=0.05", "--xla-timing-processes=3",
        "--xla-report=json", "--xla-report-dir=rep", "-W", "ignore::pytest.PytestUnknownMarkWarning", timeout=900)
    result.assert_outcomes(passed=1, failed=1, xfailed=1)
    out = result.stdout.str()
    assert "Benchmark fixture was not used" not in out
    # the broken model fails at its first process, with that process's report and triage (no second triage)
    start = out.index("timing process 1 of 3 of broken / trace_once / train failed:")
    failure = out[start:out.index("short test summary info")]
    assert "error:     RuntimeError: broken on purpose" in failure and failure.count("xla-dynamo triage:") == 1
    # the known one is xfailed by its entry, in the first process, and so in this one
    assert "XFAIL test_timing.py::test_timing_train[known-trace_once] - timing process 1 of 3" in out
    records = {r["name"]: r for r in (json.loads(line) for line in
                                      (pytester.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines())}
    assert records["broken"]["status"] == records["known"]["status"] == "eager_fail_to_run"
    record: dict[str, Any] = records["tiny"]
    extra = record["extra"]
    assert extra["timing_processes"] == 3 and len(extra["process_speedups"]) == 3
    if record["status"] == "pass":
        assert record["speedup"] == pytest.approx(statistics.median(extra["process_speedups"]), abs=1e-5)
    assert extra["speedup_noise_statistic"] == across.STATISTIC
    assert "--xla-timing-processes=3" in record["repro"]
    # the parent ran each test once, its processes in fresh interpreters: 1 + 3 pids for tiny, 1 + 1 for broken
    pids: dict[str, set[str]] = {}
    for line in (pytester.path / "pids.txt").read_text().splitlines():
        name, pid = line.split()
        pids.setdefault(name, set()).add(pid)
    assert len(pids["test_timing_train[tiny-trace_once]"]) == 4
    assert len(pids["test_timing_train[broken-trace_once]"]) == len(pids["test_timing_train[known-trace_once]"]) == 2


@pytest.mark.parametrize("value", ["0", str(MAX_TIMING_PROCESSES + 1), "three"])
def test_a_bad_process_count_is_a_usage_error(value: str) -> None:
    assert usage_error(cli={"xla_timing_processes": value}) == (
        f"--xla-timing-processes: invalid value {value!r}; valid: an integer 1..{MAX_TIMING_PROCESSES}")
    assert usage_error(env={"PYTEST_XLA_TIMING_PROCESSES": value}).startswith(
        "--xla-timing-processes (env PYTEST_XLA_TIMING_PROCESSES): invalid value")
