"""``--xla-timing-processes N``: the case measured in N fresh processes, one after the other, and recorded as their
median (:func:`pytest_xla_dynamo.timing.across.combine`; why: :mod:`~pytest_xla_dynamo.timing.across`).

Each process is a child ``pytest <the test>`` started as isolated tests are
(:func:`pytest_xla_dynamo.workers.isolation.run_child`), holding the machine alone, compile included; it measures
the case in process (:mod:`~pytest_xla_dynamo.timing.in_process`) and leaves its record. Where a process's test did
not pass, this test ends as it did.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace

import pytest

from pytest_xla_dynamo.core.stages import TRIAGED
from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord, RecordStore
from pytest_xla_dynamo.timing import across
from pytest_xla_dynamo.timing.method import SUITE, CaseRun, Harness
from pytest_xla_dynamo.workers import isolation

#: one side of a round: the interpreter's command (empty: this one) and the records its processes left
Side = tuple[tuple[str, ...], list[CaseRecord]]


class ProcessMedian:
    """N fresh processes of this build, their median (see the module docstring)."""

    def sides(self, index: int, records: list[CaseRecord], base: list[CaseRecord]) -> list[Side]:
        """The processes of round ``index`` (1-based), in order."""
        return [((), records)]

    def combine(self, records: Sequence[CaseRecord], base: Sequence[CaseRecord], count: int) -> CaseRecord:
        """The case's record from its processes' records."""
        return across.combine(records, count)

    def time(self, harness: Harness, run: CaseRun) -> CaseRecord:
        """Run the rounds, one process after the other, and record their combination."""
        count = harness.settings.timing_processes
        if hasattr(harness.benchmark, "_mode"):
            # pytest-benchmark times nothing in this process (the children do, each with its own benchmark
            # fixture): marked used, so that it does not warn "Benchmark fixture was not used at all"; it then has no
            # figures of this test for its tables (their figures are in the plugin's records)
            harness.benchmark._mode = "xla-dynamo: timed in --xla-timing-processes children"
        records: list[CaseRecord] = []
        base: list[CaseRecord] = []
        for index in range(1, count + 1):
            for command, into in self.sides(index, records, base):
                which = (f"base build's ({' '.join(command)}) timing process {index} of {count}" if command
                         else f"timing process {index} of {count}")
                with harness.machine_alone():
                    child = isolation.run_child(harness.item, harness.session.xcfg.isolate_timeout, python=command)
                into.append(self._process_record(harness, run, child, which))
        record = self.combine(records, base, count)
        if record.status == UNRELIABLE:
            warnings.warn(pytest.PytestWarning(f"{harness.item.nodeid}: {record.message}"), stacklevel=2)
        if hasattr(harness.benchmark, "extra_info"):
            harness.benchmark.extra_info.update({
                "model": run.spec.name, "backend": run.backend.name, "mode": run.mode, "status": record.status,
                "speedup": record.speedup, "timing_processes": count, "process_speedups": [r.speedup for r in records],
                **({"base_process_speedups": [r.speedup for r in base]} if base else {})})
        return harness.session.record(harness.item, replace(record, repro=run.fields["repro"]))

    def _process_record(self, harness: Harness, run: CaseRun, child: isolation.ChildRun, which: str) -> CaseRecord:
        """The record one timing process left. Where the process's test did not pass, this test ends as it did
        (the process's record kept): failed with its report (a crash or time-out included), xfailed by its known
        issue, or skipped."""
        store = RecordStore()
        if child.records:
            store.loads(child.records)
        found = [r for r in store.by_suite(SUITE) if (r.name, r.backend, r.mode) ==
                 (run.spec.name, run.backend.name, run.mode)]
        reports = isolation.child_reports(harness.item, child)
        failed = [r for r in reports if r.failed]
        skipped = [r for r in reports if r.skipped]
        if found and not failed and not skipped:
            return found[0]
        for record in found:
            harness.session.record(harness.item, record)
        if not found:
            run.fail(harness, "fail_to_run", RuntimeError(f"{which} left no record"), which)
        what = f"{which} of {run.spec.name} / {run.backend.name} / {run.mode}"
        if not failed and skipped and hasattr(skipped[0], "wasxfail"):
            pytest.xfail(f"{what}: {skipped[0].wasxfail}")
        if not failed and skipped:
            longrepr = skipped[0].longrepr
            pytest.skip(f"{what}: {longrepr[2] if isinstance(longrepr, tuple) else longrepr}")
        text = failed[0].longreprtext if failed else "(no report)"
        failure = pytest.fail.Exception(f"{what} failed:\n{text}", pytrace=False)
        setattr(failure, TRIAGED, True)  # the process's report, triage included, is the message
        raise failure
