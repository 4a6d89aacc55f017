"""Tests of pytest_xla_dynamo.timing.memory: which peak-memory columns get a figure and why the others are
empty (pure, on the built-in backends), and what XLA:CPU really reports (a subprocess on the real runtime)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_xla_dynamo.core.backends import BUILTIN_BACKENDS
from pytest_xla_dynamo.records import MemoryFigures
from pytest_xla_dynamo.timing.memory import (
    CPU_REASON,
    GB,
    SAME_DEVICE,
    SHARED_PEAK,
    TreeSampler,
    columns_of,
    device_memory,
    memory_figures,
    memory_line,
    process_tree,
    session_peaks,
    side_peak,
)

BACKENDS = {b.name: b for b in BUILTIN_BACKENDS}
EAGER, ONCE, EVERY = BACKENDS["eager"], BACKENDS["trace_once"], BACKENDS["trace_everytime"]
TPU_INFO = {"bytes_used": 1_000, "bytes_limit": 16 * 10**9, "peak_bytes_used": 3 * 10**9}


def columns(memory: MemoryFigures) -> dict[str, float]:
    """The CSV columns ``memory`` fills."""
    found = {"eager_peak_mem": memory.eager_peak_mem, "dynamo_peak_mem": memory.dynamo_peak_mem,
             "compression_ratio": memory.compression_ratio}
    return {k: v for k, v in found.items() if v is not None}


def test_cpu_has_no_per_case_peak_and_says_why() -> None:
    assert device_memory(EAGER) == {}
    info = memory_figures(EAGER, BACKENDS["inductor"], {}, {}, isolated=True)
    assert columns(info) == {}
    assert info.empty == f"eager_peak_mem: {CPU_REASON}; dynamo_peak_mem: {CPU_REASON}"
    assert info.baseline == {"backend": "eager"} and info.backend == {"backend": "inductor"}


def test_xla_cpu_reports_no_allocator_stats() -> None:
    error = {"error": "RuntimeError: Bad StatusOr access: UNIMPLEMENTED: GetAllocatorStats is not supported"}
    info = memory_figures(EAGER, ONCE, {}, error, isolated=False)
    assert columns(info) == {}
    assert "dynamo_peak_mem: the XLA device reports no peak memory (RuntimeError: " in (info.empty or "")
    assert info.backend["error"] == error["error"]


def test_a_device_peak_counts_only_in_an_isolated_child_and_not_when_the_sides_share_the_device() -> None:
    info = memory_figures(EAGER, ONCE, {}, TPU_INFO, isolated=False)
    assert columns(info) == {} and f"dynamo_peak_mem: {SHARED_PEAK}" in (info.empty or "")
    info = memory_figures(EAGER, ONCE, {}, TPU_INFO, isolated=True)
    assert columns(info) == {"dynamo_peak_mem": pytest.approx(3.0)}  # GB, as the harness's CSV
    assert info.empty == f"eager_peak_mem: {CPU_REASON}"
    assert info.backend["peak_bytes_used"] == 3 * 10**9
    info = memory_figures(EVERY, ONCE, TPU_INFO, TPU_INFO, isolated=True)
    assert columns(info) == {} and info.empty == f"eager_peak_mem: {SAME_DEVICE}; dynamo_peak_mem: {SAME_DEVICE}"


def test_compression_ratio_is_eager_peak_over_dynamo_peak_when_both_exist() -> None:
    """No built-in pair has both peaks today (the baseline on the CPU, or both sides on the one XLA device),
    so the columns are computed from two sides' peaks directly."""
    columns, why = columns_of((6.0, ""), (3.0, ""))
    assert columns == {"eager_peak_mem": 6.0, "dynamo_peak_mem": 3.0, "compression_ratio": pytest.approx(2.0)}
    assert why == ""
    columns, why = columns_of((None, CPU_REASON), (3.0, ""))
    assert columns == {"dynamo_peak_mem": 3.0} and why == f"eager_peak_mem: {CPU_REASON}"
    assert side_peak(ONCE, TPU_INFO, isolated=True, shared=False) == (pytest.approx(3.0), "")
    assert side_peak(ONCE, TPU_INFO, isolated=True, shared=True) == (None, SAME_DEVICE)
    assert GB == 1e9


def test_device_memory_on_xla_cpu_is_the_runtimes_refusal() -> None:
    code = ("import json; from pytest_xla_dynamo.core.backends import BUILTIN_BACKENDS as B; "
            "from pytest_xla_dynamo.timing.memory import device_memory; "
            "print('INFO', json.dumps(device_memory(B[0])))")
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("INFO "))[5:])
    assert "UNIMPLEMENTED" in info["error"] and "GetAllocatorStats" in info["error"]


# --- the peak of all processes together ----------------------------------------------------------------

# A child holding 200 MB that starts a grandchild holding 100 MB; both hold them until the file ``release`` exists.
TREE = '''
import subprocess, sys, time
from pathlib import Path
held = bytearray(200_000_000)
code = "import time; from pathlib import Path; held = bytearray(100_000_000); Path(sys.argv[1]).touch(); " \\
       "[time.sleep(0.02) for _ in iter(lambda: Path(sys.argv[2]).exists(), True)]"
child = subprocess.Popen([sys.executable, "-c", "import sys; " + code, sys.argv[1], sys.argv[2]])
while not Path(sys.argv[2]).exists():
    time.sleep(0.02)
child.wait()
'''


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the sampler reads /proc (Linux)")
def test_the_sampler_sums_the_resident_memory_of_a_process_tree(tmp_path: Path) -> None:
    ready, release = tmp_path / "ready", tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", TREE, str(ready), str(release)])
    try:
        while not ready.exists():
            time.sleep(0.02)
        sampler = TreeSampler(interval=0.05)
        assert sampler.start()
        time.sleep(0.3)
    finally:
        release.touch()
        proc.wait(timeout=60)
    assert set(process_tree(os.getpid())) >= {os.getpid()} and proc.pid not in process_tree(os.getpid())  # gone
    figures = sampler.stop({proc.pid: "gw0"})
    assert figures is not None and figures["samples"] >= 3 and figures["sample_interval_s"] == 0.05
    at_peak = figures["at_peak_rss_kb"]
    assert figures["summed_peak_rss_kb"] == sum(at_peak.values()) > 300_000  # kB: 200 MB + 100 MB + interpreters
    worker, child = f"gw0 (pid {proc.pid})", next(k for k in at_peak if k.startswith("gw0's child "))
    assert set(at_peak) == {"this process", worker, child}
    assert at_peak[worker] > 200_000 and at_peak[child] > 100_000
    assert figures["processes_peak_rss_kb"][worker] >= at_peak[worker]  # each process's own peak (VmHWM) beside
    assert TreeSampler(root=2**22 + 1).start() is False  # no such process: nothing sampled


def test_the_session_peaks_and_their_line() -> None:
    summed = {"summed_peak_rss_kb": 7_900_000, "at_peak_rss_kb": {"this process": 400_000, "gw0 (pid 7)": 4_000_000,
                                                                  "gw1 (pid 8)": 3_500_000},
              "processes_peak_rss_kb": {}, "sample_interval_s": 0.5, "samples": 900}
    peaks = session_peaks(5_100_000, {"gw0": 5_100_000, "gw1": 3_600_000}, summed)  # a tie: the worker's peak
    assert peaks["peak_rss_kb"] == 5_100_000 and peaks["summed_peak_rss_kb"] == 7_900_000
    assert peaks["processes_peak_rss_kb"] == {"this process": 5_100_000, "gw0": 5_100_000, "gw1": 3_600_000}
    assert peaks["summed_peak"]["samples"] == 900 and "summed_peak_rss_kb" not in peaks["summed_peak"]
    assert memory_line(peaks) == ("memory: all processes together peaked at 7.90 GB (3 processes at that moment, RSS "
                                  "summed every 0.5 s); the largest process 5.10 GB (gw0, its peak RSS)")
    alone = session_peaks(450_000, {})
    assert "summed_peak_rss_kb" not in alone
    assert memory_line(alone) == ("memory: the largest process 0.45 GB (this process, its peak RSS); all processes "
                                  "together: not sampled (no /proc)")
