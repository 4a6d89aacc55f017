"""The JSON form of a record's figures: the one place that writes and reads the JSON report's ``extra`` object.

:func:`extra_object` writes a record's typed figures (:mod:`~pytest_xla_dynamo.records.figures`) as the
``extra`` object, key for key and in the order the checks wrote it before the figures were typed (so the
JSON report, the JUnit properties and a merged report read as they did). :func:`parse_extra` reads it back
by the record's suite. A layout this version does not write (an older report's, or another writer's), or
a value of the wrong type, is not interpreted: the whole object is kept as read (``unparsed``), so that the
record is written back unchanged and nothing reads a guess.

:func:`json_problem` checks a value against a field's annotation, for :meth:`CaseRecord.from_json
<pytest_xla_dynamo.records.case.CaseRecord.from_json>`'s strict reading of the record's own fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any, TypeVar

from pytest_xla_dynamo.core.capture import Capture
from pytest_xla_dynamo.records.figures import (
    Attempt,
    GraphFigures,
    Interference,
    JsonObject,
    MemoryFigures,
    ParityFigures,
    TimingContext,
    TimingFigures,
    TimingRuns,
    TimingStats,
    TriageNote,
)

T = TypeVar("T")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


#: an annotation -> whether a JSON value fits it, and how to say what fits (bool is not a number here)
JSON_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "str | None": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "int": (_integer, "an integer"),
    "int | None": (lambda v: v is None or _integer(v), "an integer or null"),
    "float": (_number, "a number"),
    "float | None": (lambda v: v is None or _number(v), "a number or null"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "JsonObject": (lambda v: isinstance(v, dict), "an object"),
    "JsonObject | None": (lambda v: v is None or isinstance(v, dict), "an object or null"),
    "list[str] | None": (lambda v: v is None or _list_of(lambda s: isinstance(s, str))(v), "a list of strings or null"),
    "list[str]": (_list_of(lambda v: isinstance(v, str)), "a list of strings"),
    "list[int]": (_list_of(_integer), "a list of integers"),
    "list[int] | None": (lambda v: v is None or _list_of(_integer)(v), "a list of integers or null"),
    "list[float]": (_list_of(_number), "a list of numbers"),
    "list[float] | None": (lambda v: v is None or _list_of(_number)(v), "a list of numbers or null"),
    "list[JsonObject] | None": (lambda v: v is None or _list_of(lambda d: isinstance(d, dict))(v),
                                "a list of objects or null"),
}
#: keys of the ``extra`` object that are written only when they have a value (not None)
OPTIONAL_KEYS = frozenset({"capture", "triage", "divergences", "divergences_total", "cpu_fallbacks", "notes",
                           "empty", "eager_peak_mem",
                           "dynamo_peak_mem", "compression_ratio", "machine_lock_wait_s", "min_run_time",
                           "requested_iterations_per_run", "calibrated_iterations_per_run", "calibration_step_ms",
                           "speedup_noise", "speedup_noise_statistic", "run_speedups",
                           "backend_major_faults", "baseline_major_faults", "process_speedups",
                           "timing_processes", "placements", "placement_redraws", "base_process_speedups",
                           "pair_ratios", "pair_ratio", "pair_noise", "base_speedup", "timing_cpus"})
#: the memory columns, written beside ``memory`` rather than in it (the CSV's names)
MEMORY_COLUMNS = ("eager_peak_mem", "dynamo_peak_mem", "compression_ratio")


def json_problem(name: str, annotation: str, value: Any) -> str:
    """What is wrong with ``value`` as the field ``name`` of type ``annotation`` (``""``: nothing; an annotation
    not in :data:`JSON_TYPES` is not checked)."""
    if annotation not in JSON_TYPES:
        return ""
    fits, text = JSON_TYPES[annotation]
    return "" if fits(value) else f"field {name!r}: {json.dumps(value)[:80]} is not {text}"


class _Unfit(ValueError):
    """The ``extra`` object is not in a layout this version writes."""


# --- writing -------------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    """A figure's JSON value: a capture's object, a triage's document, else the value itself."""
    if isinstance(value, Capture):
        return value.to_dict()
    if isinstance(value, TriageNote):
        return value.document
    return value


def _plain(figures: Any, skip: tuple[str, ...] = ()) -> JsonObject:
    """``figures``'s fields (but ``skip``) by name, in their order; an optional key only when it has a value."""
    out: JsonObject = {}
    for f in fields(figures):
        value = getattr(figures, f.name)
        if f.name not in skip and not (f.name in OPTIONAL_KEYS and value is None):
            out[f.name] = _json_value(value)
    return out


def _timing_object(figures: TimingFigures) -> JsonObject:
    out = _plain(figures.context)
    if figures.runs is not None:
        out.update(_plain(figures.runs))
    stats = figures.stats
    if stats is not None:
        out.update(_plain(stats, skip=("interference", "memory")))
        attempts = [_plain(a) for a in stats.interference.attempts]
        out["interference"] = {"attempts": attempts, "remeasured": stats.interference.remeasured,
                               "reasons": stats.interference.reasons}
        memory = _plain(stats.memory)
        out["memory"] = {k: memory.pop(k) for k in ("unit", "baseline", "backend", "empty") if k in memory}
        out.update(memory)  # the columns
    return out


def extra_object(parity: ParityFigures | None, graphs: GraphFigures | None, timing: TimingFigures | None,
                 unparsed: Mapping[str, Any]) -> JsonObject:
    """The JSON report's ``extra`` object of a record's figures (and of what was read but not interpreted)."""
    out: JsonObject = {}
    if parity is not None:
        out.update(_plain(parity))
    if graphs is not None:
        out.update(_plain(graphs))
    if timing is not None:
        out.update(_timing_object(timing))
    out.update((k, v) for k, v in unparsed.items() if k not in out)
    return out


# --- reading -------------------------------------------------------------------------------------------


def _build(cls: type[T], obj: Mapping[str, Any], **given: Any) -> T:
    """``cls`` from the keys of ``obj`` named as its fields (``given``: fields read otherwise); :class:`_Unfit`
    when a key without a default is missing or a value does not fit its field's annotation."""
    kwargs = dict(given)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in kwargs:
            continue
        if f.name not in obj:
            if f.default is MISSING and f.default_factory is MISSING:
                raise _Unfit(f"missing {f.name!r}")
            continue
        if json_problem(f.name, str(f.type), obj[f.name]) or str(f.type) not in JSON_TYPES:
            raise _Unfit(f"{f.name!r}: {obj[f.name]!r}")
        kwargs[f.name] = obj[f.name]
    return cls(**kwargs)


def _object(obj: Mapping[str, Any], key: str) -> JsonObject | None:
    """``obj[key]`` where it is an object, None where absent; :class:`_Unfit` otherwise."""
    value = obj.get(key)
    if value is not None and not isinstance(value, dict):
        raise _Unfit(f"{key!r}: not an object")
    return value


def _capture(obj: Mapping[str, Any]) -> Capture | None:
    found = _object(obj, "capture")
    return None if found is None else Capture.from_dict(found)


def _parity(obj: Mapping[str, Any]) -> ParityFigures:
    triage = _object(obj, "triage")
    return _build(ParityFigures, obj, capture=_capture(obj), triage=None if triage is None else TriageNote(triage))


def _graphs(obj: Mapping[str, Any]) -> GraphFigures:
    return _build(GraphFigures, obj, capture=_capture(obj))


def _timing(obj: Mapping[str, Any]) -> TimingFigures:
    context = _build(TimingContext, obj)
    runs = _build(TimingRuns, obj) if "timer" in obj else None
    stats = None
    if "speedup_statistic" in obj:
        interference, memory = _object(obj, "interference") or {}, _object(obj, "memory") or {}
        attempts = interference.get("attempts")
        if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
            raise _Unfit("'interference': no attempts")
        columns = {k: obj[k] for k in MEMORY_COLUMNS if k in obj}
        stats = _build(TimingStats, obj, interference=Interference([_build(Attempt, a) for a in attempts]),
                       memory=_build(MemoryFigures, {**memory, **columns}))
    return TimingFigures(context, runs, stats)


#: a suite -> the reader of its records' ``extra`` object (the suites with typed figures)
_READERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {"parity": _parity, "graphs": _graphs, "timing": _timing}


def parse_extra(suite: str, extra: JsonObject) -> tuple[ParityFigures | None, GraphFigures | None,
                                                        TimingFigures | None, JsonObject]:
    """A record's figures from its ``extra`` object: ``(parity, graphs, timing, unparsed)``, where ``unparsed`` is
    the whole object when it is not in a layout this version writes for ``suite`` (then no figures), else ``{}``.
    An empty object is no figures (a graph check whose case failed to run)."""
    if not extra:
        return None, None, None, {}
    reader = _READERS.get(suite)
    try:
        figures = reader(extra) if reader is not None else None
    except (_Unfit, TypeError, ValueError, KeyError):
        figures = None
    parity = figures if isinstance(figures, ParityFigures) else None
    graphs = figures if isinstance(figures, GraphFigures) else None
    timing = figures if isinstance(figures, TimingFigures) else None
    if figures is None or json.dumps(extra_object(parity, graphs, timing, {})) != json.dumps(extra):
        return None, None, None, dict(extra)  # written back as read, interpreted by no one
    return parity, graphs, timing, {}
