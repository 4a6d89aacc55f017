"""How a timing case is measured: the measurement-method protocol, and what every method is given.

The ``xla_timing`` check (:mod:`~pytest_xla_dynamo.timing.check`) opens a case (:class:`CaseRun`: the model, the
backend and the baseline, the mode, the fields every record of it carries) and hands it to one method, chosen by
the timing settings: :mod:`~pytest_xla_dynamo.timing.in_process` (interleaved runs in this process, the default),
:mod:`~pytest_xla_dynamo.timing.process_median` (``--xla-timing-processes N``: N fresh processes, their median) or
:mod:`~pytest_xla_dynamo.timing.ab_pairs` (``--xla-timing-base-python``: N pairs of the base build's and this
build's processes). A method returns the case's record; what it may use of the check is :class:`Harness`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_xla_dynamo.records import CaseRecord, TimingContext, TimingFigures

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.session import XlaSession
    from pytest_xla_dynamo.timing.settings import TimingSettings

SUITE = "timing"


class Harness(Protocol):
    """What a method may use of the check that opened the case."""

    session: XlaSession
    item: pytest.Item
    benchmark: Any  # pytest-benchmark's fixture (None where it is not used: timing.benchmark)
    settings: TimingSettings

    @property
    def shared_lock(self) -> bool:
        """Whether the machine lock is shared with other xdist workers."""

    def machine_alone(self) -> AbstractContextManager[float]:
        """The machine held alone for timed work; yields the seconds waited."""


@dataclass
class CaseRun:
    """One opened timing case and what its records hold whatever happens (``fields``, ``context``)."""

    spec: zoo.ModelSpec
    backend: Backend
    base_backend: Backend
    mode: str
    threads: int
    cores: int
    fields: dict[str, Any]
    context: TimingContext

    def fail(self, harness: Harness, status: str, exc: BaseException, what: str) -> None:
        """Record the case as ``status`` (it could not be built, stepped or timed), ``what`` saying where."""
        harness.session.record(harness.item, CaseRecord(status=status, message=f"{what}: {exc!r}", **self.fields,
                                                        timing=TimingFigures(self.context)))


class MeasurementMethod(Protocol):
    """One way to measure an opened case: it records the case and returns its record (or ends the test as the
    measurement did: skipped, xfailed, failed)."""

    def time(self, harness: Harness, run: CaseRun) -> CaseRecord:
        """Measure ``run`` and return its record."""
