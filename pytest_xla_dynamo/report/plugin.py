"""The report plugin: at the end of a session that reports, the file set and the terminal tables.

Only the process that reports writes (``session.reports_here``: not an xdist worker, whose records reach
the controller, nor an isolated test's child, whose records reach its parent). At
``pytest_sessionfinish`` (trylast) it writes the files selected by ``--xla-report`` into
``--xla-report-dir`` as one set (:mod:`~pytest_xla_dynamo.report.writer`); the ``xla-dynamo results``
section of the terminal summary then shows the record count, the tables (with ``table``) and what was
written. A set that cannot be written is an error line and a failing exit status (nothing is moved in);
``png`` without matplotlib is one line.

A session that did not finish writes no file: after Ctrl-C, ``pytest.exit`` or an internal error
(exit status 2 or 3) the report folder is left as it was and the section says
``session interrupted: no ... report written; <dir> is left as it was``. Ctrl-C while the files are
written: nothing is moved in (or, in the last step, the whole new set), a line says so, no traceback,
exit status 2. SIGTERM while writing: the temporary files go, then the process ends by SIGTERM as the
sender asked. ``--collect-only`` writes nothing.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.core.machine import process_peak_kb
from pytest_xla_dynamo.records import CaseRecord, sort_records
from pytest_xla_dynamo.report.jsonl import environment_info
from pytest_xla_dynamo.report.tables import speedup_tables, status_table
from pytest_xla_dynamo.report.writer import ReportSet, Terminated, file_formats
from pytest_xla_dynamo.timing.memory import TreeSampler, memory_line, session_peaks
from pytest_xla_dynamo.timing.settings import timing_settings

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

SECTION = "xla-dynamo results"
UNFINISHED = (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)


class ReportPlugin:
    """End-of-session reports of the process that reports: files at sessionfinish, tables in the summary."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.config = session.config
        self.timing = timing_settings(session.config)  # the speedup table's baseline, iterations and runs
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.interrupted = False  # Ctrl-C or pytest.exit during the session
        self.reports: ReportSet | None = None  # the set this session wrote
        # the peak of all the session's processes together, sampled by the process that reports only
        self.sampler = TreeSampler() if session.reports_here else None
        if self.sampler is not None and not self.sampler.start():
            self.sampler = None
        self.memory: dict[str, Any] | None = None  # the environment's memory, once the session ended

    def records(self) -> list[CaseRecord]:
        """The session's records in a stable order (under xdist they arrive as workers finish):
        models in zoo order, backends in registry order, then modes; unknown names after, by name."""
        from pytest_xla_dynamo.zoo import model_names

        return sort_records(self.session.store, model_names(), self.session.backends.names())

    def _active(self) -> bool:
        return self.session.reports_here and not self.config.option.collectonly

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = True

    def _memory(self) -> dict[str, Any]:
        """The session's peaks (:func:`session_peaks`): its largest process's, each process's and, sampling
        stopped now, all processes' together."""
        if self.memory is None:
            summed = self.sampler.stop(self.session.worker_pids) if self.sampler is not None else None
            self.memory = session_peaks(process_peak_kb(), self.session.worker_peaks, summed)
        return self.memory

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self._active():
            return
        try:
            self._write(session, exitstatus)
        except KeyboardInterrupt:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            self.interrupted = True
            self.lines.append("interrupted while writing the reports: " + self._outcome())
        except Terminated as exc:
            sys.stderr.write(f"xla-dynamo: terminated while writing the reports: {self._outcome()}\n")
            sys.stderr.flush()
            signal.raise_signal(exc.signum)  # the previous handler is back: by default the process ends here
            session.exitstatus = pytest.ExitCode.INTERRUPTED
            self.interrupted = True

    def _outcome(self) -> str:
        if self.reports is not None and self.reports.published:
            return "the set above is complete (the signal came as it was moved into place)"
        return f"none written; {self.session.xcfg.report_dir} is left as it was"

    def _write(self, session: pytest.Session, exitstatus: int) -> None:
        xcfg = self.session.xcfg
        formats = file_formats(xcfg.report)
        if not formats:
            return
        names = "/".join(formats)
        if exitstatus in UNFINISHED or self.interrupted:
            self.lines.append(f"session interrupted: no {names} report written; {xcfg.report_dir} is left as it was")
            return
        records = self.records()
        if not records:
            self.lines.append(f"no records: no {names} report written")
            return
        workers = len(self.session.worker_records)
        if not workers:
            numprocesses = getattr(self.config.option, "numprocesses", None)
            workers = numprocesses if isinstance(numprocesses, int) else 0
        environment = environment_info(xcfg, self.timing, argv=self.config.invocation_params.args, workers=workers)
        environment["memory"] = self._memory()
        reports = self.reports = ReportSet(records, formats, xcfg.report_dir, environment,
                                           self.timing.baseline_backend)
        try:
            reports.write()
        finally:
            self.lines, self.errors = list(reports.lines), list(reports.errors)
        if reports.errors:
            self.lines.append(f"no report written: {xcfg.report_dir} is left as it was (a set is written whole "
                              "or not at all)")
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self._active():
            return
        xcfg = self.session.xcfg
        records = self.records()
        if not records and not self.lines and not self.errors:
            return
        tr = terminalreporter
        tr.write_sep("=", SECTION)
        line = f"{len(records)} record{'s' if len(records) != 1 else ''}"
        worker_records = self.session.worker_records
        if worker_records:
            workers = len(worker_records)
            line += (f" from {workers} xdist worker{'s' if workers != 1 else ''} ("
                     + ", ".join(f"{w}: {n}" for w, n in sorted(worker_records.items())) + ")")
        for worker in sorted(self.session.dead_workers):
            count = self.session.recovered_records.get(worker)
            line += (f"; {worker} died before its end: its {count} record(s) taken from its test reports" if count
                     else f"; {worker} died before its end, with no record to take from its test reports")
        if self.session.snapshot_cleanup_off:
            line += ("; syrupy's unused-snapshot check switched off (a dead worker's snapshot use is lost: "
                     "nothing deleted as unused; rerun its tests to rewrite their snapshots)")
        if self.interrupted or exitstatus in UNFINISHED:
            line += " (session interrupted)"
        tr.write_line(line)
        tr.write_line(memory_line(self._memory()))  # what ran, interrupted or not
        if "table" in xcfg.report:
            status = status_table(records)
            if status:
                tr.write_line("")
                tr.write_line("parity")
                tr.write_line(status)
            speed = speedup_tables(records, baseline=self.timing.baseline_backend,
                                   iterations_per_run=self.timing.iterations_per_run, repeat=self.timing.repeat)
            if speed:
                tr.write_line("")
                tr.write_line(speed)
        if self.lines or self.errors:
            tr.write_line("")
        for text in self.lines:
            tr.write_line(text, red=self.interrupted)
        for text in self.errors:
            tr.write_line("ERROR: " + text, red=True, bold=True)
