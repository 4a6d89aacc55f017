"""The typed figures a case record carries beside its status: what a parity, graphs or timing check measured.

One dataclass per kind of figure, read by attribute: :class:`ParityFigures`, :class:`GraphFigures` and
:class:`TimingFigures` (its :class:`TimingContext`, :class:`TimingRuns` and :class:`TimingStats`, with the
:class:`Interference` of its :class:`Attempt` s and its :class:`MemoryFigures`). Plain data: no torch, no
pytest, no JSON here; their JSON form (the JSON report's ``extra`` object) is written and read in one place,
:mod:`pytest_xla_dynamo.records.jsonform`. A document whose shape another module owns and that the package
only passes on (a failure's triage, a divergence, a graph signature, what a device said about its memory,
the thread budget) stays its JSON object (:data:`JsonObject`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_xla_dynamo.core.capture import Capture

#: a JSON object another module defines (named where it is used)
JsonObject = dict[str, Any]
#: the unit of :class:`MemoryFigures`: its columns in GB, the devices' figures in bytes
MEMORY_UNIT = "GB (1e9 bytes) in the CSV columns; bytes here"


# --- parity and graphs ---------------------------------------------------------------------------------


@dataclass
class TriageNote:
    """A failure's triage as its record keeps it: :meth:`pytest_xla_dynamo.triage.Triage.to_dict`'s object (the
    JSON report's ``extra.triage``), whose one-line summary the gate reads and whose classification the tables."""

    document: JsonObject

    @property
    def line(self) -> str:
        return str(self.document.get("line", ""))

    @property
    def classification(self) -> str:
        return str(self.document.get("classification") or "")


@dataclass
class ParityFigures:
    """What a parity check measured beside its status."""

    tolerance: str = ""  # the tolerance, described (parity.compare.Tolerance.describe)
    runs: list[str] = field(default_factory=list)  # the statuses voted on (xla_accuracy_runs)
    tensor: str | None = None  # the first diverging tensor
    max_abs_err: float | None = None  # its largest absolute error
    step: int | None = None  # the step it diverged at
    compile_seconds: float | None = None  # the seconds the case's XLA compilations took
    capture: Capture | None = None  # what dynamo captured (a dynamo backend)
    triage: TriageNote | None = None  # a failure's triage (unless --xla-triage=off)
    divergences: list[JsonObject] | None = None  # the first divergences (parity.compare.Divergence.to_dict)
    divergences_total: int | None = None  # how many there were
    # CPU fallback ops the backend's run counted (op -> count; an XLA backend's, None where not measured): a pass
    # with fallbacks covers less of the backend than a clean pass
    cpu_fallbacks: JsonObject | None = None
    notes: list[str] | None = None  # what the case's status says beside it (a known issue present below tolerance)

    @property
    def coverage(self) -> str:
        """What the case covered of the backend (:data:`COVERAGES`): ``full``; ``cpu_fallbacks`` and/or
        ``partial_capture`` (joined by ``+``); ``""`` where neither was measured (a backend without XLA or dynamo)."""
        if self.cpu_fallbacks is None and self.capture is None:
            return ""
        parts = [name for name, on in (("cpu_fallbacks", bool(self.cpu_fallbacks)),
                                       ("partial_capture", self.capture is not None and self.capture.partial)) if on]
        return "+".join(parts) or "full"


#: what a parity case covered of the backend (ParityFigures.coverage; the expected file's ``coverage`` column)
COVERAGES = ("full", "cpu_fallbacks", "partial_capture", "cpu_fallbacks+partial_capture")


@dataclass
class GraphFigures:
    """What a graph check measured beside the record's graph counts."""

    signature: JsonObject  # the graph signature its snapshot holds (graphs.signature.build_signature)
    capture: Capture | None = None  # what dynamo captured (a dynamo backend)
    warmup_compile_time_count: list[int] = field(default_factory=list)  # CompileTime per warm-up step
    warmup_uncached_compile: list[int] = field(default_factory=list)  # UncachedCompile per warm-up step


# --- timing --------------------------------------------------------------------------------------------


@dataclass
class TimingContext:
    """What every timing record holds, whatever happened: how the case is timed."""

    iterations_per_run: int
    repeat: int
    threads: int
    thread_budget: JsonObject  # timing.threads.ThreadBudget.to_dict() and torch's thread count ("torch")
    baseline_choice: str  # how the baseline backend was chosen
    min_run_time: float | None = None  # xla_min_run_time (s; 0: not calibrated; None: a report from before it)


@dataclass
class TimingRuns:
    """A case that ran: its timed runs (ms per iteration), warm-up steps (s) and what timed them."""

    timer: str
    backend_runs_ms: list[float]
    baseline_runs_ms: list[float]
    backend_cpu_ms: list[float]
    baseline_cpu_ms: list[float]
    warmup_seconds: list[float]
    baseline_warmup_seconds: list[float]
    compilation_seconds: float  # the backend's first warm-up step
    timed_compiles: int  # XLA compilations during the timed runs
    xdist_workers: int
    loadavg_1min: float | None
    machine_lock_wait_s: float | None = None  # the timed runs' wait for the xdist workers' machine lock (None: none)
    # xla_min_run_time's calibration (None: a report from before it)
    requested_iterations_per_run: int | None = None  # --xla-iterations-per-run
    calibrated_iterations_per_run: int | None = None  # what the timed runs ran
    calibration_step_ms: float | None = None  # the step estimate the count came from (None: not calibrated)
    # the process's major page faults per timed run (pages read back from disk; None: not counted)
    backend_major_faults: list[int] | None = None
    baseline_major_faults: list[int] | None = None
    # xla_placements (timing.placement; None: a report from before it) and the redraws before the timed runs
    placements: str | None = None
    placement_redraws: int | None = None
    timing_cpus: list[int] | None = None  # xla_timing_cpus (timing.affinity; None: wherever the OS placed them)


@dataclass
class Attempt:
    """One measurement's interference figures (:func:`pytest_xla_dynamo.timing.in_process.judge`): the load, each side's
    CPU time over wall time and other processes' cores, and the reasons to distrust it (none: trusted)."""

    load: float | None
    baseline_cpu_wall: float | None
    backend_cpu_wall: float | None
    baseline_foreign_cores: float | None
    backend_foreign_cores: float | None
    reasons: list[str]


@dataclass
class Interference:
    """Every measurement of a case (a disturbed one is measured again); the last one is the record's."""

    attempts: list[Attempt]

    @property
    def remeasured(self) -> int:
        return max(len(self.attempts) - 1, 0)

    @property
    def reasons(self) -> list[str]:
        """Why the recorded measurement is not trusted (empty: it is)."""
        return self.attempts[-1].reasons if self.attempts else []


@dataclass
class MemoryFigures:
    """Peak memory of a timed case (:mod:`pytest_xla_dynamo.timing.memory`): the CSV columns that have an honest
    value (GB), what each side's device said (bytes) and why a column is empty."""

    baseline: JsonObject  # {"backend": name, **xm.get_memory_info(...)} or {"backend": name, "error": ...}
    backend: JsonObject
    empty: str | None = None  # why a column is empty (None: none is)
    eager_peak_mem: float | None = None  # the baseline's peak
    dynamo_peak_mem: float | None = None  # the backend's peak
    compression_ratio: float | None = None  # eager_peak_mem / dynamo_peak_mem
    unit: str = MEMORY_UNIT


@dataclass
class TimingStats:
    """A measured case's statistics (not under ``--benchmark-disable``) and the evidence of its verdict."""

    speedup_statistic: str
    baseline_spread: float | None
    backend_min_ms: float
    baseline_min_ms: float
    baseline_cpu_wall: float | None
    backend_cpu_wall: float | None
    interference: Interference
    memory: MemoryFigures
    # the speedup's noise (timing.noise; None: fewer than 3 runs, or a report from before it)
    speedup_noise: float | None = None  # the relative standard error of the median speedup
    speedup_noise_statistic: str | None = None  # how it was computed
    run_speedups: list[float] | None = None  # baseline run i / backend run i
    # --xla-timing-processes N > 1 (timing.across): the processes' speedups in their order, and how many ran
    process_speedups: list[float] | None = None
    timing_processes: int | None = None
    # --xla-timing-base-python (timing.across.pair): the base build's processes' speedups, each pair's ratio
    # (this build's process i / the base's process i), their median and its noise, and the base's median speedup
    base_process_speedups: list[float] | None = None
    pair_ratios: list[float] | None = None
    pair_ratio: float | None = None
    pair_noise: float | None = None
    base_speedup: float | None = None


@dataclass
class TimingFigures:
    """What a timing check recorded beside the speedup: how it timed, and (when the case ran) the runs and
    (when they were measured) their statistics."""

    context: TimingContext
    runs: TimingRuns | None = None
    stats: TimingStats | None = None
