"""The timing wing's options: its flags, in their own group of ``pytest --help`` (pytest-benchmark's way), and
its lab settings (ini keys and environment variables only). Each is declared once, in :data:`TIMING_OPTIONS`;
:mod:`pytest_xla_dynamo.timing.settings` resolves them. Imported by every pytest session (the options are declared
before any test is selected): nothing here but the declarations.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_xla_dynamo.options import Option, add_options

GROUP = ("xla-dynamo-timing", "dynamo + torch_xla timing (pytest-xla-dynamo)")
DEFAULT_MIN_RUN_TIME = 0.2
"""Seconds a timed run lasts at least by default: a millisecond-scale run is at the mercy of one scheduler tick
(docs/timing.md, "Calibration")."""
MIN_RUN_TIME_MAX = 60.0  # seconds: beyond anything a timing job wants per run (a typo guard)
PLACEMENTS = ("step", "run", "once", "fresh", "huge")  # xla_placements (pytest_xla_dynamo.timing.placement)
THREADS_MAX = 4096  # xla_threads: beyond any machine's cores (torch takes a C int)
MIN_AB_PAIRS = 3  # --xla-timing-base-python: the fewest pairs whose spread gives a noise (timing.noise)
THP_MODES = ("always", "madvise")  # the kernel's modes in which an madvise(MADV_HUGEPAGE) gets huge pages
DEFAULT_REMEASURE = 1  # xla_remeasure: bounded, a competing process that lasts will still be there
MAX_REMEASURE = 5  # xla_remeasure: each re-measurement times the case again
MAX_TIMING_PROCESSES = 15  # --xla-timing-processes: a typo guard (each process compiles the case again)

TIMING_OPTIONS: tuple[Option, ...] = (
    Option("iterations-per-run", "iterations per timed run, each ending in torch_xla.sync() "
           "(the seed's --iterations-per-run)", "1", metavar="INT", aliases=("--iterations-per-run",)),
    Option("repeat", "timed runs per case; baseline and backend runs interleave", "5", metavar="INT"),
    Option("timing-processes", "fresh processes each timing case is measured in, one after the other; the "
           "record is their median speedup, its noise the spread between them (1..15; 1: in this process)", "1",
           metavar="INT"),
    Option("baseline-backend", "backend the speedup is measured against; 'auto': eager where the XLA device "
           "is the CPU (PJRT_DEVICE=CPU), else trace_everytime", "auto", metavar="NAME"),
    Option("min-speedup-ratio", "fail when a speedup falls below RATIO x the stored timing baseline (or, with "
           "--xla-timing-base-python, x the base build's, measured beside it)", "", metavar="RATIO"),
    Option("timing-baseline", "stored timing baseline (a JSON report) for --xla-min-speedup-ratio", "",
           metavar="FILE"),
    Option("timing-base-python", "the A/B speed gate: the Python of the base build (a path, or a command such as "
           "'env VAR=1 /base/bin/python'; pytest and this plugin installed there); each timing case is measured in "
           "--xla-timing-processes (>= 3) pairs of processes, the base's and this interpreter's alternating, and "
           "--xla-min-speedup-ratio gates the median of the pairs' speedup ratios (no stored baseline)", "",
           metavar="COMMAND"),
    Option("min-run-time", "seconds each timed run lasts at least: the iterations per run grow to "
           "ceil(SECONDS / step) (the faster side's step, from the untimed steps), the same for baseline and "
           "backend; 0..60, 0 = off (exactly --xla-iterations-per-run)", f"{DEFAULT_MIN_RUN_TIME:g}",
           metavar="SECONDS", on_cli=False),
    Option("threads", "compute threads of the timed cases, baseline and backend alike (torch's intra-op "
           "threads and XLA:CPU's PJRT_NPROC): an integer >= 1 or 'auto' (1 on <= 2 cores)", "auto",
           metavar="N", on_cli=False),
    Option("placements", "where a CPU side's memory lands in the timed runs: drawn anew, untimed, before each "
           "timed 'step' or 'run'; 'once' (the process's one draw); 'fresh' (glibc malloc gives every block of "
           "128 KB or more new pages) or 'huge' (torch's CPU allocator asks for transparent huge pages), each "
           "compared only with a baseline measured so", "once", metavar="WHEN", on_cli=False),
    Option("remeasure", "times a case whose runs look disturbed is measured again before it is recorded "
           f"'unreliable' (0..{MAX_REMEASURE}; 0: recorded at once)", str(DEFAULT_REMEASURE), metavar="N",
           on_cli=False),
    Option("timing-cpus", "CPUs the timed runs are pinned to, every thread of the process (as taskset -c: 1, "
           "0-1, 0,2); empty: wherever the OS places the threads", "", metavar="CPUS", on_cli=False),
)
TIMING_BY_DEST: Mapping[str, Option] = {o.dest: o for o in TIMING_OPTIONS}


def add_timing_options(parser: pytest.Parser, help_values: Mapping[str, str]) -> None:
    """Declare the timing options in their group."""
    add_options(parser, help_values, TIMING_OPTIONS, GROUP)
