"""Whether a stored timing baseline (``--xla-timing-baseline``) can gate this run's speedups: the timing settings
that put the speedups on a scale of their own, read from the baseline's records (:func:`measured_with`) and held
against this run's settings (:func:`baseline_mismatch`). The gate asks once; a setting that changes the scale is
added here alone. No torch here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_xla_dynamo.core.machine import cpu_list
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.timing.settings import TimingSettings

#: the xla_placements settings whose speedups are on a scale of their own (the others, once, run and step, on
#: malloc's 4 KB pages as a user's eager runs, share one), and why (:mod:`pytest_xla_dynamo.timing.placement`)
OWN_SCALE = {"fresh": "with 'fresh' the baseline side pays page faults at every step",
             "huge": "with 'huge' the CPU side's large buffers are on huge pages"}

_VALID = "valid: run with the baseline's setting{}, or record a baseline with this one"


@dataclass(frozen=True)
class MeasuredWith:
    """The scale-setting values a baseline's timing records say they were measured with, one entry per value seen
    (none: no timing record, nothing to refuse). A record from before a setting was measured with its default."""

    placements: frozenset[str] = frozenset()  # xla_placements
    pinned: frozenset[tuple[int, ...]] = frozenset()  # xla_timing_cpus of the records with a speedup; (): not pinned


def measured_with(records: Iterable[CaseRecord]) -> MeasuredWith:
    """What the timing records among ``records`` were measured with."""
    timed = [(record, runs) for record in records if record.suite == "timing"
             and record.timing is not None and (runs := record.timing.runs) is not None]
    return MeasuredWith(frozenset(runs.placements or "once" for _, runs in timed),
                        frozenset(record.pinned_cpus for record, _ in timed if record.speedup is not None))


def baseline_mismatch(path: Path, recorded: MeasuredWith, settings: TimingSettings) -> str:
    """Why the baseline at ``path``, measured with ``recorded``, cannot gate a run measured with ``settings`` ("" where
    it can): the first setting whose scale differs, both values named and the one to pass."""
    return (_placements_mismatch(path, recorded.placements, settings.placements)
            or _pinning_mismatch(path, recorded.pinned, settings.timing_cpus))


def _placements_mismatch(path: Path, recorded: frozenset[str], placements: str) -> str:
    """``fresh`` and ``huge`` each put the speedups on a scale of their own; once, run and step share one."""
    def scale(setting: str) -> str:
        return setting if setting in OWN_SCALE else "4 KB pages"

    scales = {scale(p) for p in recorded}
    if not recorded or scales == {scale(placements)}:
        return ""
    why = "; ".join(OWN_SCALE[p] for p in sorted({*scales, scale(placements)} & OWN_SCALE.keys()))
    return (f"{path} was measured with xla_placements={','.join(sorted(recorded))}, this run with "
            f"xla_placements={placements}: {why}, so the speedups are not comparable; {_VALID.format('')}")


def _pinning_mismatch(path: Path, recorded: frozenset[tuple[int, ...]], cpus: tuple[int, ...]) -> str:
    """Pinned, the XLA side loses the overlap of its tracing and execution on a second CPU (docs/timing.md "The
    seed's table, pinned and not"), so pinned and unpinned runs do not gate each other; a baseline whose records
    disagree among themselves says nothing."""
    pinned = {bool(c) for c in recorded}
    if len(pinned) != 1 or bool(cpus) in pinned:
        return ""
    if True in pinned:
        then = f"pinned to CPU {'; '.join(cpu_list(c) for c in sorted(recorded))}"
        setting = f"xla_timing_cpus={cpu_list(min(recorded))}"
    else:
        then, setting = "not pinned", "no xla_timing_cpus"
    return (f"{path} was measured with its timed runs {then}, "
            f"this run's are {f'pinned to CPU {cpu_list(cpus)}' if cpus else 'not pinned'} "
            "(xla_timing_cpus): the XLA side's speed differs between the two, so the speedups are not comparable; "
            f"{_VALID.format(f' ({setting})')}")
