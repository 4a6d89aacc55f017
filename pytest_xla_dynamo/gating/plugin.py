"""The gate in a pytest session: read the gate's files at start-up, judge the run at its end, report it.

:class:`GatingPlugin` (built with the session object by ``plugin.py``) checks and reads the expected
file and the timing baseline when the session starts, and at its end (on the process that reports:
not an xdist worker, not an isolated child) compares the merged records, fails the session on a
regression, rewrites the expected file under ``--xla-update-expected``, and writes the JUnit
properties, the Markdown summary and the terminal section. A session that did not finish
(interrupted, internal or usage error) or ``--collect-only`` rewrites nothing and claims no verdict.

The expected file records the kernel setting and the CPU its rows were recorded with (its metadata lines);
a run whose XLA tests use another kernel setting is told so in the header, at the top of the gate's
terminal section and of the summary, before any verdict; ``--xla-update-expected`` records this run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.gating.expected import CaseRow, ExpectedFileError, read_expected, read_metadata, write_expected
from pytest_xla_dynamo.gating.labels import GATE_FAILED_EXIT, UNFINISHED_EXITS, Key
from pytest_xla_dynamo.gating.noise import noise_note
from pytest_xla_dynamo.gating.paths import check_paths, write_summary
from pytest_xla_dynamo.gating.render import headline, render_markdown, terminal_lines, verdict_line
from pytest_xla_dynamo.gating.rules import GateResult, compare
from pytest_xla_dynamo.gating.run import (
    RunCase,
    cases_from_records,
    load_timing_baseline,
    timing_from_records,
)
from pytest_xla_dynamo.gating.update import merge_update
from pytest_xla_dynamo.timing.comparable import baseline_mismatch
from pytest_xla_dynamo.timing.settings import timing_settings
from pytest_xla_dynamo.workers.cpu_isa import cpu_line, kernel_setting, same_setting
from pytest_xla_dynamo.workers.sharding import shard_line

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession


class GatingPlugin:
    """Expected-results gate, speedup gate and the Markdown summary (``--xla-expected`` and friends)."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.config = session.config
        self.xcfg = xcfg = session.xcfg
        self.timing = timing = timing_settings(session.config)  # the speed gate's options are the timing wing's
        self.expected: dict[Key, CaseRow] | None = None
        self.baseline: dict[Key, float] | None = None
        self.baseline_noise: dict[Key, float] = {}  # the stored baseline's speedup noise (the noise-aware gate)
        self.between_noise: dict[Key, float] = {}  # its spread between processes (a baseline of several)
        self._failed_nodeids: set[str] = set()
        self.result: GateResult | None = None
        self.run_cases: dict[Key, RunCase] = {}
        self.update_line = ""
        self.summary_line = ""
        self.unfinished = ""  # why the session's end is not judged ("" when it is)
        self.write_failed = False  # the expected file or the summary could not be written at the end
        # what this run's XLA tests run with (the same in every process of the session) and what the file says
        self.run_metadata = {"kernels": kernel_setting(xcfg.cpu_isa), "cpu": cpu_line()}
        self.expected_metadata: dict[str, str] = {}
        if not session.reports_here:
            return
        check_paths(xcfg, timing.timing_baseline)
        try:
            if xcfg.expected is not None:
                self.expected = read_expected(xcfg.expected, columns_kept=xcfg.update_expected)
                self.expected_metadata = read_metadata(xcfg.expected)
            if timing.min_speedup_ratio is not None and timing.timing_baseline is not None:
                stored = load_timing_baseline(timing.timing_baseline)
                self.baseline, self.baseline_noise, self.between_noise = stored.speedups, stored.noise, stored.between
                if why := baseline_mismatch(timing.timing_baseline, stored.measured_with, timing):
                    raise ExpectedFileError(why)
        except (ExpectedFileError, OSError) as err:
            raise pytest.UsageError(f"xla-dynamo gate: {err}") from None

    @property
    def active(self) -> bool:
        """Whether the gate has anything to do in this session."""
        x, t = self.xcfg, self.timing
        return self.session.reports_here and (x.expected is not None or x.summary is not None
                                              or (t.min_speedup_ratio is not None
                                                  and (t.timing_baseline is not None or bool(t.timing_base_python))))

    @property
    def kernel_note(self) -> str:
        """Where the expected file was recorded with another kernel setting than this run's: the line that says
        so ("" where the settings match, or the file does not say)."""
        recorded = self.expected_metadata.get("kernels")
        if self.xcfg.expected is None or recorded is None or same_setting(recorded, self.run_metadata["kernels"]):
            return ""
        cpu = self.expected_metadata.get("cpu", "not recorded")
        return (f"xla-dynamo gate: WARNING: {self.xcfg.expected} was recorded with kernels {recorded} (CPU: {cpu}); "
                f"this run's XLA tests use {self.run_metadata['kernels']} (--xla-cpu-isa={self.xcfg.cpu_isa}; CPU: "
                f"{self.run_metadata['cpu']}): results can differ for that reason alone, so the comparison is not "
                f"like with like (pass the file's setting, or record a file for this one)")

    @property
    def shard_line(self) -> str:
        return shard_line(self.xcfg.shard, self.session.shard_counts)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        if self.xcfg.expected is not None:
            rows = len(self.expected or {})
            mode = "updating" if self.xcfg.update_expected else "gating against"
            lines.append(f"xla-dynamo gate: {mode} {self.xcfg.expected} ({rows} rows"
                         + (f", recorded with kernels {self.expected_metadata['kernels']}"
                            if "kernels" in self.expected_metadata else "") + ")"
                         + (", strict improved" if self.xcfg.strict_improved else ""))
            if self.kernel_note and not self.xcfg.update_expected:
                lines.append(self.kernel_note)
        t = self.timing
        if t.min_speedup_ratio is not None and t.timing_base_python:
            lines.append(f"xla-dynamo gate: speedup >= {t.min_speedup_ratio:g} x the base build's, measured "
                         f"beside it in {t.timing_processes} pairs of processes (A/B: "
                         f"{' '.join(t.timing_base_python)}); the median of the pairs' ratios is gated")
        elif t.min_speedup_ratio is not None:
            lines.append(f"xla-dynamo gate: speedup >= {t.min_speedup_ratio:g} x {t.timing_baseline}"
                         + noise_note(self.baseline, self.baseline_noise, self.between_noise))
        return lines

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.session.reports_here and report.failed:
            self._failed_nodeids.add(report.nodeid)

    @property
    def failed_tests(self) -> int:
        return len(self._failed_nodeids)

    # --- the session's end ----------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.active:
            return
        xcfg = self.xcfg
        status = int(session.exitstatus)
        if self.config.option.collectonly:
            self.unfinished = "--collect-only"
        elif status in UNFINISHED_EXITS:
            self.unfinished = f"the session did not finish (exit status {status})"
        if self.unfinished:
            if xcfg.update_expected and xcfg.expected is not None:
                self.update_line = f"xla-dynamo: {xcfg.expected} not updated: {self.unfinished}"
            if xcfg.summary is not None:
                self.summary_line = f"xla-dynamo: summary not written to {xcfg.summary}: {self.unfinished}"
            return
        store = list(self.session.store)
        self.run_cases = cases_from_records(store)
        if self.expected is not None or self.baseline is not None or self.timing.timing_base_python:
            self.result = compare(self.expected, self.run_cases, timing=timing_from_records(store),
                                  baseline=self.baseline, min_speedup_ratio=self.timing.min_speedup_ratio,
                                  baseline_noise=self.baseline_noise, between_noise=self.between_noise)
        if xcfg.update_expected and xcfg.expected is not None:
            self._update(xcfg.expected)
        elif self.result is not None and self.result.failed(xcfg.strict_improved):
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = GATE_FAILED_EXIT
        self._junit_property()
        if xcfg.summary is not None:
            self._write_summary(xcfg.summary)
        if self.write_failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _update(self, path: Path) -> None:
        rows, stats = merge_update(self.expected or {}, self.run_cases)
        try:
            write_expected(path, rows, self.run_metadata)  # the file now says this run's kernel setting and CPU
        except OSError as err:  # checked writable at the start: a disk that filled meanwhile, a file locked since
            self.update_line = (f"xla-dynamo: ERROR: {path} not updated: {err.strerror or err}; the file is left as "
                                "it was")
            self.write_failed = True
            return
        self.update_line = (f"xla-dynamo: updated {stats.updated} rows, kept {stats.kept} rows not run in this "
                            f"session ({stats.added} new) in {path}")
        if self.kernel_note and stats.kept:
            self.update_line += (f"; WARNING: the {stats.kept} rows kept were recorded with kernels "
                                 f"{self.expected_metadata['kernels']}, the file now says "
                                 f"{self.run_metadata['kernels']}: rerun them under this setting")

    def _junit_property(self) -> None:
        if self.result is None or self.xcfg.update_expected:
            return
        try:
            from _pytest.junitxml import xml_key
        except ImportError:  # pragma: no cover - pytest internals moved
            return
        xml = self.config.stash.get(xml_key, None)
        if xml is None:
            return
        _, text = headline(self.result, failed_tests=self.failed_tests, strict_improved=self.xcfg.strict_improved)
        xml.add_global_property("xla_gate", text)
        for label, count in sorted(self.result.counts().items()):
            xml.add_global_property(f"xla_gate_{label.lower()}", count)

    def _write_summary(self, path: Path) -> None:
        text = render_markdown(self.result, self.run_cases, failed_tests=self.failed_tests,
                               strict_improved=self.xcfg.strict_improved, expected_path=self.xcfg.expected,
                               shard_line=self.shard_line, update_line=self.update_line,
                               repro_prefix=self.session.repro_prefix, gating=not self.xcfg.update_expected)
        if self.kernel_note and not self.xcfg.update_expected:  # under the headline, before any verdict
            headline_text, _, rest = text.partition("\n")
            text = f"{headline_text}\n\n> **{self.kernel_note.removeprefix('xla-dynamo gate: ')}**\n{rest}"
        try:
            write_summary(path, text)  # appended to $GITHUB_STEP_SUMMARY, as merge --summary
        except OSError as err:  # checked writable at the start: a disk that filled meanwhile
            self.summary_line = f"xla-dynamo: ERROR: summary not written to {path}: {err.strerror or err}"
            self.write_failed = True
            return
        self.summary_line = f"xla-dynamo: summary written to {path}"

    # --- the terminal ---------------------------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self.session.reports_here:
            return
        if not self.active and self.xcfg.shard is None:
            return
        tr = terminalreporter
        tr.section("xla-dynamo gate")
        if self.kernel_note and not self.xcfg.update_expected:
            tr.write_line(self.kernel_note, yellow=True, bold=True)
        if self.xcfg.shard is not None:
            tr.write_line(self.shard_line)
        updating = self.xcfg.update_expected
        kwargs = {"updating": updating, "strict_improved": self.xcfg.strict_improved}
        for text, markup in terminal_lines(self.result, repro_prefix=self.session.repro_prefix, **kwargs):
            tr.write_line(text, **markup)
        for text in (self.update_line, self.summary_line):
            if text:
                tr.write_line(text, **({"red": True, "bold": True} if "ERROR:" in text else {}))
        if self.unfinished and self.active:
            tr.write_line(f"xla-dynamo gate: no verdict: {self.unfinished}", yellow=True)
        verdict = verdict_line(self.result, **kwargs)
        if verdict is not None:
            tr.write_line(verdict[0], **verdict[1])
