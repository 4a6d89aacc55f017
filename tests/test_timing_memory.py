"""Tests of pytest_xla_dynamo.timing.memory: which peak-memory columns get a figure and why the others are
empty (pure, on the built-in backends), and what XLA:CPU really reports (a subprocess on the real runtime)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pytest_xla_dynamo.core.backends import BUILTIN_BACKENDS
from pytest_xla_dynamo.records import MemoryFigures
from pytest_xla_dynamo.timing.memory import (
    CPU_REASON,
    GB,
    SAME_DEVICE,
    SHARED_PEAK,
    columns_of,
    device_memory,
    memory_figures,
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
