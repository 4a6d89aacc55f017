"""The timing check: the ``xla_timing`` fixture's object. It opens a case (refusals, the thread budget, what every
record of it says) and hands it to the measurement method the timing settings choose
(:mod:`~pytest_xla_dynamo.timing.method`): in this process (the default), the median of fresh processes
(``--xla-timing-processes``) or the A/B pairs (``--xla-timing-base-python``).

Under pytest-xdist with more than one worker the timed runs hold the machine lock exclusive
(:mod:`~pytest_xla_dynamo.workers.machine_lock`: the other workers wait); where there is no lock, timing is refused
(a skip naming the fix). Both cases run with the session's thread budget (:mod:`~pytest_xla_dynamo.timing.threads`).
pytest-benchmark's part: :mod:`~pytest_xla_dynamo.timing.benchmark`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.records import CaseRecord, TimingContext
from pytest_xla_dynamo.session import CaseCheck, XlaSession
from pytest_xla_dynamo.timing.ab_pairs import ABPairs
from pytest_xla_dynamo.timing.in_process import InProcess
from pytest_xla_dynamo.timing.measure import settle
from pytest_xla_dynamo.timing.method import SUITE, CaseRun, MeasurementMethod
from pytest_xla_dynamo.timing.plugin import session_budget
from pytest_xla_dynamo.timing.process_median import ProcessMedian
from pytest_xla_dynamo.timing.settings import TimingSettings, timing_settings
from pytest_xla_dynamo.timing.threads import apply_torch_threads
from pytest_xla_dynamo.workers.machine_lock import MachineLock, NoLock, session_lock

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import Backend


def xdist_refusal(workers: int, cores: int | None = None, locked: bool = False) -> str | None:
    """Why timing is refused with ``workers`` pytest-xdist workers (None: it may time). ``locked``: the workers
    share the machine lock, so the timed runs have the cores alone (:mod:`~pytest_xla_dynamo.workers.machine_lock`)."""
    if workers <= 1 or locked:
        return None
    cores = cores or os.cpu_count() or 1
    return (f"timing is refused under pytest-xdist with {workers} workers: the workers compete for the "
            f"{cores} core{'s' if cores != 1 else ''} and this platform has no lock (POSIX flock) to give the "
            f"timed runs the cores alone; run the timing suite (suites/test_timing.py) with -n 0 (or -n 1)")


def method_for(settings: TimingSettings, *, in_child: bool) -> MeasurementMethod:
    """The measurement method the settings choose (an isolated child of a timing process measures in process)."""
    if settings.timing_processes > 1 and not in_child:
        return ABPairs(settings.timing_base_python) if settings.timing_base_python else ProcessMedian()
    return InProcess()


class XlaTiming(CaseCheck):
    """The ``xla_timing`` fixture: ``xla_timing.check_case(spec, backend)`` times a zoo case against the
    baseline (``--xla-baseline-backend``), records it and returns the record."""

    suite = SUITE

    def __init__(self, session: XlaSession, item: pytest.Item, benchmark: Any) -> None:
        super().__init__(session, item)
        self.benchmark = benchmark
        self.settings: TimingSettings = timing_settings(session.config)
        self._lock = session_lock(session.config)  # shared with the other xdist workers, else a no-op

    def check_case(self, spec: zoo.ModelSpec, backend: Backend, mode: str | None = None) -> CaseRecord:
        """Time ``spec`` on ``backend`` (mode: the ``xla_mode`` marker by default) and record it.

        Raises (after recording ``fail_to_run`` or ``eager_fail_to_run``) when a case cannot be built
        or stepped; skips under xdist with more than one worker and no machine lock, and when ``backend`` is
        the baseline.
        """
        run = self._open(spec, backend, self._mode(mode))
        method = method_for(self.settings, in_child=self.session.child_output is not None)
        return method.time(self, run)

    def _open(self, spec: zoo.ModelSpec, backend: Backend, mode: str) -> CaseRun:
        """Refuse what cannot be timed (skips, usage errors), set the threads and say what the record holds."""
        session, settings = self.session, self.settings
        refusal = xdist_refusal(session.worker_count, locked=not isinstance(self._lock, NoLock))
        if refusal is not None:
            pytest.skip(refusal)
        base_backend = session.backends.get(settings.baseline_backend)
        if backend.name == base_backend.name:
            pytest.skip(f"{backend.name} is the timing baseline (--xla-baseline-backend): its speedup is 1 by "
                        "definition")
        self._supports(mode, backend, base_backend, what="timing: ")
        iterations, repeat = settings.iterations_per_run, settings.repeat
        budget = session_budget(session)
        thread_info = {**budget.to_dict(), "torch": apply_torch_threads(budget.threads)}
        base_fields: dict[str, Any] = dict(
            **self._fields(spec, backend, mode, self._repro(backend, timing=settings.repro_args())),
            baseline=base_backend.name, iterations_per_run=iterations, repeat=repeat)
        context = TimingContext(iterations, repeat, budget.threads, thread_info,
                                "auto (PJRT_DEVICE)" if settings.baseline_auto else "--xla-baseline-backend",
                                settings.min_run_time)
        return CaseRun(spec, backend, base_backend, mode, budget.threads, budget.cores, base_fields, context)

    @property
    def shared_lock(self) -> bool:
        """Whether the machine lock is shared with other xdist workers (else it is a no-op)."""
        return isinstance(self._lock, MachineLock)

    @contextlib.contextmanager
    def machine_alone(self) -> Iterator[float]:
        """Hold the machine alone for timed work: the lock exclusive (other xdist workers wait; a no-op without
        them), then until the other workers' last work (a report sent, a model freed) has ended; yields the
        seconds waited, the settling included."""
        with self._lock.exclusive() as waited:
            yield waited + (settle() if self.shared_lock else 0.0)
