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
with the columns (the JSON report's ``extra.memory``). A session's own peak
(:func:`~pytest_xla_dynamo.core.machine.process_peak_kb`, with its xdist workers') goes to the JSON report's
environment, beside the peak of all its processes together: :class:`TreeSampler` sums the resident memory
(``VmRSS``) of the session's process tree (the controller, its xdist workers, their children: an op server, an isolated
test) every half second in a daemon thread, on the process that reports only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
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


def session_peaks(own_kb: int, workers: dict[str, int], summed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The environment's ``memory``: the session's largest process's peak resident memory in kB
    (``peak_rss_kb``), each process's (``this process`` and every xdist worker that said), and with ``summed``
    (:meth:`TreeSampler.figures`) the sampled peak of all its processes together (``summed_peak_rss_kb``)."""
    processes = {"this process": own_kb, **workers}
    peaks: dict[str, Any] = {"peak_rss_kb": max(processes.values()), "processes_peak_rss_kb": processes}
    if summed:
        peaks["summed_peak_rss_kb"] = summed["summed_peak_rss_kb"]
        peaks["summed_peak"] = {k: v for k, v in summed.items() if k != "summed_peak_rss_kb"}
    return peaks


def memory_line(peaks: dict[str, Any]) -> str:
    """The terminal's line of :func:`session_peaks`: the sum of all processes' peak, then the largest process."""
    processes = peaks["processes_peak_rss_kb"]
    # a tie with "this process" is a worker's peak: the controller's ru_maxrss covers its waited-for children
    largest = max(processes, key=lambda name: (processes[name], name != "this process"))
    own = f"the largest process {peaks['peak_rss_kb'] / 1e6:.2f} GB ({largest}, its peak RSS)"
    if "summed_peak_rss_kb" not in peaks:
        return f"memory: {own}; all processes together: not sampled (no /proc)"
    summed = peaks["summed_peak"]
    count = len(summed["at_peak_rss_kb"])
    return (f"memory: all processes together peaked at {peaks['summed_peak_rss_kb'] / 1e6:.2f} GB "
            f"({count} process{'es' if count != 1 else ''} at that moment, RSS summed every "
            f"{summed['sample_interval_s']} s); {own}")


# --- the process tree's resident memory, summed ------------------------------------------------------------

SAMPLE_INTERVAL = 0.5  # seconds between two samples of the process tree
_PROC = Path("/proc")


def _status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in kB (``{}``: the process is gone, or is a zombie)."""
    try:
        text = (_PROC / str(pid) / "status").read_text()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (``/proc/PID/task/TID/children``), else read from every
    process's parent (``/proc/*/stat``) where the kernel has no ``children`` files."""
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            if task.exists():  # a kernel without CONFIG_PROC_CHILDREN
                return _children_by_stat(pid)
        except OSError:  # the thread ended
            continue
    return found


def _children_by_stat(pid: int) -> list[int]:
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def process_tree(root: int) -> dict[int, int]:
    """``root`` and its descendants: pid -> parent pid (``root``'s parent: 0)."""
    tree = {root: 0}
    todo = [root]
    while todo:
        parent = todo.pop()
        for child in _children(parent):
            if child not in tree:
                tree[child] = parent
                todo.append(child)
    return tree


def _comm(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"


class TreeSampler:
    """The peak of a process tree's resident memory summed: ``VmRSS`` of ``root`` (default: this process) and
    of every descendant, read every :data:`SAMPLE_INTERVAL` seconds in a daemon thread, and each process's own
    peak (``VmHWM``) as last read. A peak between two samples is missed (it lasts less than half a second);
    what GNU time reports is the largest process's peak, not this sum. Linux only (``/proc``):
    :meth:`start` says whether it samples."""

    def __init__(self, root: int | None = None, interval: float = SAMPLE_INTERVAL, root_label: str = "this process"):
        self.root = root or os.getpid()
        self.interval = interval
        self.root_label = root_label
        self.samples = 0
        self.peak_kb = 0
        self._at_peak: dict[int, int] = {}  # pid -> RSS at the summed peak
        self._own_peaks: dict[int, int] = {}  # pid -> VmHWM, last read
        self._parents: dict[int, int] = {}  # pid -> parent pid, as seen
        self._comms: dict[int, str] = {}  # pid -> command name, as first seen
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        return (_PROC / str(self.root) / "status").exists()

    def start(self) -> bool:
        """Sample in a daemon thread until :meth:`stop`; False (nothing started) without ``/proc``."""
        if self._thread is not None or not self.available():
            return self._thread is not None
        self.sample()
        self._thread = threading.Thread(target=self._run, name="xla-dynamo-memory", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> int:
        """One sample: the tree's RSS summed, in kB (the peak and each process's own peak updated)."""
        tree = process_tree(self.root)
        rss: dict[int, int] = {}
        with self._lock:
            for pid, parent in tree.items():
                status = _status(pid)
                if "VmRSS" not in status:
                    continue
                rss[pid] = status["VmRSS"]
                self._own_peaks[pid] = max(self._own_peaks.get(pid, 0), status.get("VmHWM", 0))
                self._parents.setdefault(pid, parent)
                if pid not in self._comms:
                    self._comms[pid] = _comm(pid)
            total = sum(rss.values())
            self.samples += 1
            if total > self.peak_kb:
                self.peak_kb, self._at_peak = total, rss
        return total

    def stop(self, names: Mapping[int, str] | None = None) -> dict[str, Any] | None:
        """Stop sampling (one last sample) and return :meth:`figures`."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample()
        return self.figures(names)

    def label(self, pid: int, names: Mapping[int, str]) -> str:
        """A process's name in the figures: ``this process``, a name given (``gw0``, by pid), or its command
        (a child of a named process: ``gw0's child python``), with its pid."""
        if pid == self.root:
            return self.root_label
        if pid in names:
            return f"{names[pid]} (pid {pid})"
        parent = self._parents.get(pid, 0)
        comm = self._comms.get(pid, "?")
        if parent in names:
            return f"{names[parent]}'s child {comm} (pid {pid})"
        return f"{comm} (pid {pid})"

    def figures(self, names: Mapping[int, str] | None = None) -> dict[str, Any] | None:
        """``summed_peak_rss_kb`` (the peak of the sum), the processes summed then (``at_peak_rss_kb``), each
        process's own peak as last read (``processes_peak_rss_kb``: VmHWM), the interval and the sample count;
        ``names``: pid -> a process's name (an xdist worker's id). None: no sample."""
        names = names or {}
        with self._lock:
            if not self.samples:
                return None
            return {"summed_peak_rss_kb": self.peak_kb,
                    "at_peak_rss_kb": {self.label(pid, names): kb for pid, kb in self._at_peak.items()},
                    "processes_peak_rss_kb": {self.label(pid, names): kb for pid, kb in self._own_peaks.items()},
                    "sample_interval_s": self.interval, "samples": self.samples}


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
