"""The timing wing's settings: its options (:mod:`pytest_xla_dynamo.timing.options`) resolved into the frozen
:class:`TimingSettings`, with the same precedence as the plugin's other options (command line > environment >
ini > default; :mod:`pytest_xla_dynamo.options`) and the same usage errors. The timing plugin
(:mod:`pytest_xla_dynamo.timing.plugin`) resolves them at configure time and keeps the result on the pytest
config's stash; every reader asks :func:`timing_settings`. The repro of a timing case says the settings that shaped
it (:meth:`TimingSettings.repro_args`). No torch here.
"""

from __future__ import annotations

import math
import os
import platform
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo import config as _config
from pytest_xla_dynamo.core.machine import THP_SETTING, can_pin, cpu_list, parse_cpus, thp_mode, usable_cpus
from pytest_xla_dynamo.options import Option, read_options
from pytest_xla_dynamo.timing.options import (
    DEFAULT_MIN_RUN_TIME,
    DEFAULT_REMEASURE,
    MAX_REMEASURE,
    MAX_TIMING_PROCESSES,
    MIN_AB_PAIRS,
    MIN_RUN_TIME_MAX,
    PLACEMENTS,
    THP_MODES,
    THREADS_MAX,
    TIMING_BY_DEST,
    TIMING_OPTIONS,
)


@dataclass(frozen=True)
class TimingSettings:
    """The resolved, validated timing options of one pytest session (:func:`timing_settings`). A field is its
    option's ini key without ``xla_``."""

    iterations_per_run: int = 1
    repeat: int = 5
    timing_processes: int = 1  # pytest_xla_dynamo.timing.across
    baseline_backend: str = "eager"
    baseline_auto: bool = False  # baseline_backend came from 'auto' (see auto_baseline)
    min_speedup_ratio: float | None = None
    timing_baseline: Path | None = None
    timing_base_python: tuple[str, ...] = ()  # split as a shell would (timing.across)
    min_run_time: float = DEFAULT_MIN_RUN_TIME  # seconds (0: runs not calibrated; timing.calibrate)
    threads: int | None = None  # None: auto (pytest_xla_dynamo.timing.threads.auto_threads)
    placements: str = "once"  # timing.placement: once, anew per timed step or run, fresh or huge
    timing_cpus: tuple[int, ...] = ()  # timing.affinity: the timed runs' CPUs; (): the OS's
    remeasure: int = DEFAULT_REMEASURE  # timing.in_process: re-measurements of a disturbed case
    sources: Mapping[str, str] = field(default_factory=dict)  # option dest -> where its value came from

    def repro_args(self) -> list[str]:
        """The options of a timing case's repro: the iterations and runs always, the others where they differ
        from their default (the gate's options excepted: they judge the record, they do not shape it)."""
        default = TimingSettings()
        args: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _NOT_REPRO or (value == getattr(default, f.name) and f.name not in _ALWAYS):
                continue
            if f.name == "baseline_backend" and self.baseline_auto:
                continue  # 'auto' follows PJRT_DEVICE: the repro's own session chooses it again
            args += TIMING_BY_DEST["xla_" + f.name].arg(_text(value))
        return args


_ALWAYS = ("iterations_per_run", "repeat", "baseline_backend")
_NOT_REPRO = ("baseline_auto", "min_speedup_ratio", "timing_baseline", "sources")


def _text(value: Any) -> str:
    """A settings value as its option's raw text."""
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return cpu_list(value)
    if isinstance(value, tuple):
        return shlex.join(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


KEY = pytest.StashKey[TimingSettings]()


def timing_settings(config: pytest.Config) -> TimingSettings:
    """The session's timing settings as the timing plugin resolved them (the defaults where it did not)."""
    return config.stash.get(KEY, None) or TimingSettings()


# --- resolving ----------------------------------------------------------------------------------------------

MIN_RUN_TIME_VALID = f"a number of seconds 0..{MIN_RUN_TIME_MAX:g} (0: off, runs of exactly --xla-iterations-per-run)"
THREADS_VALID = f"an integer 1..{THREADS_MAX}, or auto"
CPUS_VALID = "a CPU list as taskset -c takes it (1, 0-1, 0,2) of the CPUs this process may run on: {usable}"


def to_seconds(opt: Option, value: str) -> float:
    """``xla_min_run_time``: a finite number of seconds 0..:data:`MIN_RUN_TIME_MAX`."""
    try:
        number = float(value)
    except ValueError:
        raise _config.bad(opt, value, MIN_RUN_TIME_VALID) from None
    if not (math.isfinite(number) and 0 <= number <= MIN_RUN_TIME_MAX):
        raise _config.bad(opt, value, MIN_RUN_TIME_VALID)
    return number


def to_threads(opt: Option, value: str) -> int | None:
    """``xla_threads``: an integer 1..:data:`THREADS_MAX`, or ``auto`` (None)."""
    if value.strip().lower() == "auto":
        return None
    try:
        return _config.to_int(opt, value.strip(), maximum=THREADS_MAX)
    except pytest.UsageError:
        raise _config.bad(opt, value, THREADS_VALID) from None


def to_cpus(opt: Option, value: str) -> tuple[int, ...]:
    """``xla_timing_cpus`` (:mod:`pytest_xla_dynamo.timing.affinity`): a CPU list of CPUs this process may run on
    (empty: none)."""
    if not value.strip():
        return ()
    if not can_pin():
        raise _config.bad(opt, value, "empty (this platform cannot pin threads: Linux's sched_setaffinity is needed)")
    usable = sorted(usable_cpus())
    valid = CPUS_VALID.format(usable=cpu_list(usable) or "unknown")
    try:
        cpus = parse_cpus(value)
    except ValueError:
        raise _config.bad(opt, value, valid) from None
    if missing := [c for c in cpus if c not in usable]:
        raise _config.bad(opt, value, valid, f" (CPU {cpu_list(missing)} not available)")
    return cpus


def auto_baseline(environ: Mapping[str, str]) -> str:
    """``--xla-baseline-backend=auto``: CPU eager where the XLA device is the CPU (``PJRT_DEVICE``, CPU when
    unset), else ``trace_everytime`` (the seed's comparison on the same device). Touches no device."""
    device = environ.get("PJRT_DEVICE", "").strip().upper() or "CPU"
    return "eager" if device == "CPU" else "trace_everytime"


def _baseline(got: tuple[Option, str], backends: Sequence[str], aliases: Mapping[str, str]) -> str:
    """``--xla-baseline-backend``: one backend name, or 'auto'."""
    valid = [*backends, "auto"]
    baseline = _config.choice_list(*got, valid, allow_all=False, aliases=aliases)
    if len(baseline) != 1:
        raise _config.bad(got[0], got[1], valid)
    return baseline[0]


def resolve(config: pytest.Config, *, backends: Sequence[str], backend_aliases: Mapping[str, str],
            environ: Mapping[str, str] | None = None) -> TimingSettings:
    """Read every timing option once and validate it into :class:`TimingSettings` (UsageError on bad input)."""
    env = os.environ if environ is None else environ
    raw = read_options(config, TIMING_OPTIONS, environ)

    def get(name: str) -> tuple[Option, str]:
        return raw["xla_" + name]

    baseline = _baseline(get("baseline_backend"), backends, backend_aliases)
    values: dict[str, Any] = dict(
        iterations_per_run=_config.to_int(*get("iterations_per_run")),
        repeat=_config.to_int(*get("repeat")),
        timing_processes=_config.to_int(*get("timing_processes"), maximum=MAX_TIMING_PROCESSES),
        baseline_backend=auto_baseline(env) if baseline == "auto" else baseline,
        baseline_auto=baseline == "auto",
        min_speedup_ratio=_config.to_float(*get("min_speedup_ratio")),
        timing_baseline=_config.to_path(get("timing_baseline")[1]),
        timing_base_python=_config.to_command(*get("timing_base_python")),
        min_run_time=to_seconds(*get("min_run_time")),
        threads=to_threads(*get("threads")),
        placements=_config.choice(*get("placements"), PLACEMENTS),
        timing_cpus=to_cpus(*get("timing_cpus")),
        remeasure=_config.to_int(*get("remeasure"), minimum=0, maximum=MAX_REMEASURE),
    )
    settings = TimingSettings(**values, sources={dest: opt.source for dest, (opt, _) in raw.items()})
    _check_together(settings)
    return settings


def _check_together(s: TimingSettings) -> None:
    """The timing options that need another option, or a platform feature (UsageError). The files are checked by
    gating.paths."""
    if s.min_speedup_ratio is not None and s.timing_baseline is None and not s.timing_base_python:
        raise pytest.UsageError("--xla-min-speedup-ratio needs --xla-timing-baseline=FILE (a stored baseline) or "
                                "--xla-timing-base-python=COMMAND (the base build measured beside this one)")
    if s.timing_base_python:
        if s.timing_baseline is not None:
            raise pytest.UsageError("--xla-timing-base-python and --xla-timing-baseline: give one (the base build "
                                    "measured in this job, or a stored baseline), not both")
        if s.timing_processes < MIN_AB_PAIRS:
            raise pytest.UsageError(f"--xla-timing-base-python needs --xla-timing-processes >= {MIN_AB_PAIRS} (the "
                                    f"pairs of base and candidate processes; their spread is the gate's noise), not "
                                    f"{s.timing_processes}")
    placements = TIMING_BY_DEST["xla_placements"].shown
    if s.placements == "fresh" and platform.libc_ver()[0] != "glibc":
        raise pytest.UsageError(f"{placements}=fresh: needs glibc's malloc (mallopt), which this platform does "
                                f"not have; valid here: {', '.join(p for p in PLACEMENTS if p != 'fresh')}")
    if s.placements == "huge" and (mode := thp_mode()) not in THP_MODES:
        raise pytest.UsageError(f"{placements}=huge: needs the kernel's transparent huge pages (Linux, "
                                f"{THP_SETTING} 'always' or 'madvise'; here: {mode or 'none'}); valid here: "
                                f"{', '.join(p for p in PLACEMENTS if p != 'huge')}")
