"""The noise-aware speed gate's inputs: the speedup noise of a run's timing record and of a stored baseline.

A timing record carries its ``speedup_noise`` (``record.timing.stats``, in the JSON report's ``extra``;
:mod:`pytest_xla_dynamo.timing.noise`: the relative standard error of its median speedup); the gate reads it
from this run's records and from the stored baseline (the JSON report given to ``--xla-timing-baseline``). A
baseline written before the field existed has none: its cases are gated by the plain ratio, as before
(:func:`pytest_xla_dynamo.gating.rules.speedup_rule`).

A baseline measured in several processes (``--xla-timing-processes N``, N >= 3) also says how far *one* process's
speedup strays from another's (:func:`between_noise`, from its ``process_speedups``): a run measured in fewer
processes carries that shift, which its own runs cannot see, so the gate takes it as the run's noise where it is
the larger (:func:`pytest_xla_dynamo.gating.rules.run_noise`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from pytest_xla_dynamo.gating.labels import Key
from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord
from pytest_xla_dynamo.timing.noise import value_noise

NOISE_FIELD = "speedup_noise"


def record_noise(record: CaseRecord) -> float | None:
    """The record's speedup noise (a finite number >= 0), or None where it has none."""
    stats = record.timing_stats
    value = stats.speedup_noise if stats is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _per_case(records: Iterable[CaseRecord], figure: Callable[[CaseRecord], float | None]) -> dict[Key, float]:
    """``figure`` of every baseline case that has one, from the records the baseline speedups come from
    (``timing``, with a speedup, not ``unreliable``; the last record of a case wins, as for its speedup)."""
    out: dict[Key, float] = {}
    for record in records:
        if record.suite != "timing" or record.speedup is None or record.status == UNRELIABLE:
            continue
        key = (str(record.name), str(record.backend), str(record.mode))
        value = figure(record)
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def baseline_noise(records: Iterable[CaseRecord]) -> dict[Key, float]:
    """The noise of every baseline case that has one (:func:`record_noise`)."""
    return _per_case(records, record_noise)


def _process_noise(record: CaseRecord) -> float | None:
    stats = record.timing_stats
    value = value_noise(stats.process_speedups or []) if stats is not None else None
    return None if value is None else round(value, 5)


def between_noise(records: Iterable[CaseRecord]) -> dict[Key, float]:
    """Per baseline case measured in 3 or more processes: the relative standard deviation of one process's speedup
    (:func:`~pytest_xla_dynamo.timing.noise.value_noise` of its ``process_speedups``)."""
    return _per_case(records, _process_noise)


def noise_note(baseline: dict[Key, float] | None, noise: dict[Key, float],
               between: dict[Key, float] | None = None) -> str:
    """The header's word on the rule: how many baseline cases carry a noise figure (noise-aware) and how many
    do not (the plain ratio), and how many a between-process spread."""
    total = len(baseline or {})
    if not total:
        return ""
    aware = sum(1 for key in (baseline or {}) if key in noise)
    spread = sum(1 for key in (baseline or {}) if key in (between or {}))
    across = f"; {spread} with the spread between its processes" if spread else ""
    if aware == total:
        return f" (noise-aware: all {total} baseline cases carry their noise{across})"
    if not aware:
        return " (the baseline records no noise: plain ratio, as before)"
    return f" (noise-aware for {aware} of {total} baseline cases{across}; the others carry no noise: plain ratio)"
