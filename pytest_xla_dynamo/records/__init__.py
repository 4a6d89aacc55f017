"""Case records: the one result type that the checks write and the reports and the gate read.

Layout: ``case`` (:class:`CaseRecord` and its JSON form, :class:`RecordStore`, the flaky vote, the report
order), ``figures`` (the typed figures a record carries: :class:`ParityFigures`, :class:`GraphFigures`,
:class:`TimingFigures` and their parts) and ``jsonform`` (the figures as the JSON report's ``extra``
object: the one place that writes and reads it). No torch, no pytest.
"""

from pytest_xla_dynamo.records.case import (
    NOT_CAPTURED,
    PASSING,
    STATUSES,
    UNRELIABLE,
    CaseRecord,
    RecordError,
    RecordStore,
    json_fields,
    record_problem,
    record_value_problem,
    sort_records,
    vote,
    worst_status,
)
from pytest_xla_dynamo.records.figures import (
    MEMORY_UNIT,
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

__all__ = [
    "MEMORY_UNIT",
    "NOT_CAPTURED",
    "PASSING",
    "STATUSES",
    "UNRELIABLE",
    "Attempt",
    "CaseRecord",
    "GraphFigures",
    "Interference",
    "JsonObject",
    "MemoryFigures",
    "ParityFigures",
    "RecordError",
    "RecordStore",
    "TimingContext",
    "TimingFigures",
    "TimingRuns",
    "TimingStats",
    "TriageNote",
    "json_fields",
    "record_problem",
    "record_value_problem",
    "sort_records",
    "vote",
    "worst_status",
]
