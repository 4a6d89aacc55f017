"""Peak memory of a timed case: the baseline's and the backend's, where the device reports an honest one.

The harness's CSV columns are ``eager_peak_mem`` (the baseline), ``dynamo_peak_mem`` (the backend), in GB
(10**9 bytes, as pytorch's ``benchmarks/dynamo``), and ``compression_ratio`` = eager peak / dynamo peak.
They are filled only with a per-case figure:

* CPU (eager, inductor, ...): only the process-wide peak RSS (``ru_maxrss``) exists; it covers compilation
  and every earlier case, so no per-case figure;
* an XLA device: ``xm.get_memory_info`` gives ``peak_bytes_used``, the device's peak since the process
  started: a case's own only in an isolated child (``--xla-isolate``: one test per process) and only
  when the other side is not on the same device. XLA:CPU reports no allocator statistics at all
  (torch_xla 2.9: "UNIMPLEMENTED: GetAllocatorStats is not supported").

What was read, and why a column is empty, goes to the record's :class:`~pytest_xla_dynamo.records.MemoryFigures`
with the columns (the JSON report's ``extra.memory``). A
session's own peak (:func:`process_peak_kb`, with its xdist workers') goes to the JSON report's environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.records import MemoryFigures

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend

GB = 1e9
CPU_REASON = ("on the CPU only the process-wide peak RSS (ru_maxrss) exists, which includes compilation and "
              "every earlier case")
SHARED_PEAK = ("the XLA device's peak_bytes_used is the process's peak since it started, not this case's: "
               "a per-case figure needs --xla-isolate")
SAME_DEVICE = "baseline and backend share the XLA device, whose peak_bytes_used covers both"


def process_peak_kb() -> int:
    """This process's peak resident memory in kB, or its waited-for children's where larger (an isolated
    test's child): ``ru_maxrss``, what GNU time reports."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return max(own.ru_maxrss, children.ru_maxrss)


def session_peaks(own_kb: int, workers: dict[str, int]) -> dict[str, Any]:
    """The environment's ``memory``: the session's peak resident memory (the largest of its processes') in kB,
    and each process's: ``this process`` and every xdist worker that said."""
    processes = {"this process": own_kb, **workers}
    return {"peak_rss_kb": max(processes.values()), "processes_peak_rss_kb": processes}


def device_memory(backend: Backend) -> dict[str, Any]:
    """What ``backend``'s device says about its memory: ``xm.get_memory_info``'s dict, or ``{"error": ...}``
    (``{}`` for a CPU backend: there is nothing to ask)."""
    if not backend.is_xla:
        return {}
    try:
        import torch_xla.core.xla_model as xm

        info = xm.get_memory_info(backend.device())
    except Exception as exc:  # XLA:CPU: UNIMPLEMENTED; another device may refuse otherwise
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {k: int(v) for k, v in dict(info).items() if isinstance(v, (int, float))}


def side_peak(side: Backend, info: dict[str, Any], *, isolated: bool, shared: bool) -> tuple[float | None, str]:
    """One side's per-case peak in GB, or None and why there is none. ``shared``: both sides on the XLA
    device; ``isolated``: this process runs one test (an ``--xla-isolate`` child)."""
    if not side.is_xla:
        return None, CPU_REASON
    if "error" in info or "peak_bytes_used" not in info:
        return None, f"the XLA device reports no peak memory ({info.get('error', 'no peak_bytes_used')})"
    if shared:
        return None, SAME_DEVICE
    if not isolated:
        return None, SHARED_PEAK
    return info["peak_bytes_used"] / GB, ""


def columns_of(eager: tuple[float | None, str], dynamo: tuple[float | None, str]) -> tuple[dict[str, float], str]:
    """The CSV columns of two sides' peaks (``compression_ratio`` when both exist), and why any is empty."""
    columns: dict[str, float] = {}
    if eager[0] is not None:
        columns["eager_peak_mem"] = eager[0]
    if dynamo[0] is not None:
        columns["dynamo_peak_mem"] = dynamo[0]
    if eager[0] is not None and dynamo[0]:
        columns["compression_ratio"] = eager[0] / dynamo[0]
    why = "; ".join(f"{name}: {peak[1]}" for name, peak in (("eager_peak_mem", eager), ("dynamo_peak_mem", dynamo))
                    if peak[0] is None)
    return columns, why


def memory_figures(baseline: Backend, backend: Backend, baseline_info: dict[str, Any],
                   backend_info: dict[str, Any], *, isolated: bool) -> MemoryFigures:
    """The CSV columns that have an honest value, what each side's device said, and why a column is empty."""
    shared = baseline.is_xla and backend.is_xla
    columns, why = columns_of(side_peak(baseline, baseline_info, isolated=isolated, shared=shared),
                              side_peak(backend, backend_info, isolated=isolated, shared=shared))
    return MemoryFigures({"backend": baseline.name, **baseline_info}, {"backend": backend.name, **backend_info},
                         why or None, columns.get("eager_peak_mem"), columns.get("dynamo_peak_mem"),
                         columns.get("compression_ratio"))
