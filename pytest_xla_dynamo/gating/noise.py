"""The noise-aware speed gate's inputs: the speedup noise of a run's timing record and of a stored baseline.

A timing record carries its ``speedup_noise`` (``record.timing.stats``, in the JSON report's ``extra``;
:mod:`pytest_xla_dynamo.timing.noise`: the relative standard error of its median speedup); the gate reads it
from this run's records and from the stored baseline (the JSON report given to ``--xla-timing-baseline``). A
baseline written before the field existed has none: its cases are gated by the plain ratio, as before
(:func:`pytest_xla_dynamo.gating.rules.speedup_rule`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from pytest_xla_dynamo.gating.expected import ExpectedFileError
from pytest_xla_dynamo.gating.labels import Key
from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord

NOISE_FIELD = "speedup_noise"


def record_noise(record: CaseRecord) -> float | None:
    """The record's speedup noise (a finite number >= 0), or None where it has none."""
    stats = record.timing.stats if record.timing is not None else None
    value = stats.speedup_noise if stats is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def baseline_noise(records: Iterable[CaseRecord]) -> dict[Key, float]:
    """The noise of every baseline case that has one, from the records the baseline speedups come from
    (``timing``, with a speedup, not ``unreliable``; the last record of a case wins, as for its speedup)."""
    out: dict[Key, float] = {}
    for record in records:
        if record.suite != "timing" or record.speedup is None or record.status == UNRELIABLE:
            continue
        key = (str(record.name), str(record.backend), str(record.mode))
        noise = record_noise(record)
        if noise is None:
            out.pop(key, None)
        else:
            out[key] = noise
    return out


def read_timing_noise(path: Path) -> dict[Key, float]:
    """:func:`baseline_noise` of a JSON report (an unreadable one: :class:`ExpectedFileError`, as
    :func:`pytest_xla_dynamo.gating.run.read_timing_baseline` says it)."""
    from pytest_xla_dynamo.report import read_json

    try:
        return baseline_noise(read_json(path))
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as err:
        raise ExpectedFileError(f"{path}: not a JSON report: {err}") from None


def noise_note(baseline: dict[Key, float] | None, noise: dict[Key, float]) -> str:
    """The header's word on the rule: how many baseline cases carry a noise figure (noise-aware) and how many
    do not (the plain ratio)."""
    total = len(baseline or {})
    if not total:
        return ""
    aware = sum(1 for key in (baseline or {}) if key in noise)
    if aware == total:
        return f" (noise-aware: all {total} baseline cases carry their noise)"
    if not aware:
        return " (the baseline records no noise: plain ratio, as before)"
    return f" (noise-aware for {aware} of {total} baseline cases; the others carry no noise: plain ratio)"
