"""Isolated tests: a test run in a fresh interpreter, whose crash or hang is reported, never fatal.

A test marked ``@pytest.mark.xla_isolated`` (or every test, with ``--xla-isolate``; and every test
of a known crash) runs in a child ``python -m pytest <nodeid>`` started from a ``tryfirst``
``pytest_runtest_protocol`` hook, like pytest-forked does with ``fork()`` but in a fresh interpreter.
The child gets the parent's relevant options and writes its serialized reports, one JSON line each,
to the file named by ``PYTEST_XLA_ISOLATED_CHILD`` (the session object pops it: ``child_output``);
the parent replays them as its own reports and merges the child's case records into its store.

A child that dies (a signal, or an exit without its reports) is reported with the signal name and
exit code: as an xfail where it is the test's known crash, as a failure otherwise. A child that runs
past ``xla_isolate_timeout`` (or ``@pytest.mark.xla_isolated(timeout=S)``), or that a pytest-timeout
stops, is asked for its Python stack (faulthandler on SIGUSR1), ended, and reported as a timeout with
the limit and that stack. The session goes on. The child never outlives the parent
(:mod:`pytest_xla_dynamo.workers.processes`). No torch here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import markers
from pytest_xla_dynamo.activation import CHILD_ENV
from pytest_xla_dynamo.options import OPTIONS_BY_DEST, declared
from pytest_xla_dynamo.workers import processes
from pytest_xla_dynamo.workers.processes import TAIL_LINES, signal_name, tail

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

#: the fixtures whose checks start children of their own this session (set by the timing wing with several timing
#: processes): their tests are not isolated again
SELF_ISOLATING_KEY = pytest.StashKey[frozenset[str]]()
WORKDIR_PREFIX = "xla-isolated-"
STACK_FILE = "stack.txt"  # in the child's temp folder: its faulthandler dump on SIGUSR1
STACK_SIGNAL = signal.SIGUSR1
# ``python -m pytest ARGS``, with faulthandler answering SIGUSR1 from the first line on (a hang in start-up,
# collection or a test alike): ``python -c _CHILD_MAIN STACK_FILE ARGS``
_CHILD_MAIN = ("import faulthandler, runpy, signal, sys; "
               "faulthandler.register(signal.SIGUSR1, file=open(sys.argv.pop(1), 'w'), all_threads=True); "
               "runpy.run_module('pytest', run_name='__main__', alter_sys=True)")

# options of the parent that a child must not inherit (reports, gating, sharding, isolation are the parent's)
_CHILD_DROP = frozenset({"xla_report", "xla_report_dir", "xla_summary", "xla_expected", "xla_update_expected",
                         "xla_strict_improved", "xla_min_speedup_ratio", "xla_timing_baseline", "xla_shard",
                         "xla_isolate", "xla_isolate_timeout", "xla_timing_processes", "xla_timing_base_python"})
_CHILD_FORCE = ("--xla-report=", "--xla-summary=", "--xla-expected=", "--xla-timing-baseline=",
                "--xla-timing-base-python=", "--xla-min-speedup-ratio=", "--xla-shard=",
                "-o", "xla_update_expected=false", "-o", "xla_strict_improved=false")
_CHILD_ENV_DROP = ("PYTEST_XLA_UPDATE_EXPECTED", "PYTEST_XLA_STRICT_IMPROVED", "PYTEST_XLA_ISOLATE",
                   "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
                   "PYTEST_CURRENT_TEST")
# command-line options of the parent forwarded to the child: (names taking a value), (flags)
_FORWARD_VALUE = ("-p", "-o", "--override-ini", "-c", "--config-file", "--confcutdir", "--import-mode",
                  "-W", "--pythonwarnings", "--assert", "--tb", "--capture")
# --snapshot-update (syrupy): an isolated graph test writes its snapshot too
_FORWARD_FLAG = ("--noconftest", "--strict-markers", "--strict-config", "--strict", "--runxfail", "-s",
                 "-l", "--showlocals", "--full-trace", "--snapshot-update")


# --- the parent side: the child's command --------------------------------------------------------------


def forward_cli(given: Sequence[str]) -> list[str]:
    """The arguments of a parent's command line that its isolated children get too: plugins (``-p``),
    ini overrides (``-o``), the config file, conftest/import/warning/assert options."""
    args: list[str] = []
    i = 0
    while i < len(given):
        arg = given[i]
        name, eq, _ = arg.partition("=")
        if arg in _FORWARD_FLAG:
            args.append(arg)
        elif arg in _FORWARD_VALUE and i + 1 < len(given):
            args += [arg, given[i + 1]]
            i += 1
        elif eq and name.startswith("--") and name in _FORWARD_VALUE:
            args.append(arg)
        elif not arg.startswith("--") and len(arg) > 2 and arg[:2] in _FORWARD_VALUE:
            args.append(arg)  # -pname, -Wignore, -oname=value
        i += 1
    return args


def forwarded_args(config: pytest.Config) -> list[str]:
    """:func:`forward_cli` of the invocation, plus the ``--xla-*`` options given on the command line
    (reports, gating, sharding and isolation excepted); the child reads the same ini file and environment."""
    args = forward_cli(config.invocation_params.args)
    for opt in declared():
        value = config.getoption(opt.dest, None) if opt.on_cli else None  # None: not on the command line
        if opt.dest in _CHILD_DROP or value is None:
            continue
        args.append(opt.cli if opt.flag else f"{opt.cli}={value}")
    return args


def child_command(item: pytest.Item, basetemp: Path) -> list[str]:
    """``python -m pytest <the item>`` with the parent's relevant options."""
    config = item.config
    rest = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
    target = f"{item.path}::{rest}" if rest else str(item.path)
    # tee-sys: what the test prints still reaches the child's real stderr, so a crash's output (and
    # C++ messages, which bypass sys.stderr) survives it; a forwarded -s/--capture overrides it
    cmd = [sys.executable, "-m", "pytest", target, "-p", "no:cacheprovider", "-q", "-rN", "--capture=tee-sys",
           f"--rootdir={config.rootpath}", f"--basetemp={basetemp}", *forwarded_args(config), *_CHILD_FORCE]
    if config.pluginmanager.hasplugin("xdist"):
        cmd.append("-n0")
    return cmd


def child_env(output: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CHILD_ENV_DROP}
    env[CHILD_ENV] = str(output)
    env.setdefault("PJRT_DEVICE", "CPU")
    env.setdefault("PYTHONFAULTHANDLER", "1")
    return env


# --- the parent side: running the child and reading what it left -------------------------------------


@dataclass
class ChildRun:
    """What an isolated test's child left behind."""

    returncode: int | None
    stdout: str
    stderr: str
    reports: list[dict[str, Any]] = field(default_factory=list)
    records: str | None = None
    collect_errors: list[str] = field(default_factory=list)
    timed_out: bool = False
    stopped_by: BaseException | None = None  # e.g. pytest-timeout's Failed, raised in the parent
    stack: str = ""  # the child's Python stack when it was ended (faulthandler)
    limit: float = 0.0
    limit_source: str = "xla_isolate_timeout"
    duration: float = 0.0
    command: list[str] = field(default_factory=list)


def run_child(item: pytest.Item, limit: float,
              limit_source: str = "xla_isolate_timeout", *, python: Sequence[str] = ()) -> ChildRun:
    """Run ``item`` in a child pytest and read back what it wrote; its temp folder is removed on every
    exit path (a Ctrl-C or SIGTERM is re-raised after the child is ended). ``python``: the interpreter's command
    (default: this one; the base build's for ``--xla-timing-base-python``)."""
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    try:
        output = workdir / "reports.jsonl"
        cmd = child_command(item, workdir / "basetemp")
        stack: list[str] = []
        stack_file = workdir / STACK_FILE
        interpreter = list(python) or [sys.executable]
        wrapped = [*interpreter, "-c", _CHILD_MAIN, str(stack_file), *cmd[3:]]  # cmd: python -m pytest ...
        done = processes.run(wrapped, env=child_env(output), cwd=item.config.invocation_params.dir, timeout=limit,
                             workdir=workdir,
                             on_timeout=lambda pid: stack.append(processes.request_stack(pid, stack_file,
                                                                                         signum=STACK_SIGNAL)))
        run = ChildRun(done.returncode, done.stdout, done.stderr, timed_out=done.timed_out,
                       stopped_by=done.stopped_by, stack="".join(stack).strip(), limit=limit,
                       limit_source=limit_source, duration=done.duration,
                       command=[*interpreter, *cmd[1:]])
        if output.exists():
            for line in output.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut short by the crash
                if entry.get("kind") == "report":
                    run.reports.append(entry["data"])
                elif entry.get("kind") == "records":
                    run.records = entry["data"]
                elif entry.get("kind") == "collect_error":
                    run.collect_errors.append(entry["text"])
        return run
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _synthetic(item: pytest.Item, when: str, outcome: str, longrepr: Any, *, duration: float = 0.0,
               props: Sequence[tuple[str, str]] = (), **extra: Any) -> pytest.TestReport:
    now = time.time()
    return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, outcome,  # type: ignore[arg-type]
                             longrepr, when, sections=[], duration=duration,  # type: ignore[arg-type]
                             start=now - duration, stop=now,
                             user_properties=[*item.user_properties, *props], **extra)


def _how(run: ChildRun, missing: str) -> str:
    """What happened to the child, as the first line of its report says it."""
    if run.timed_out:
        return f"timed out after {run.limit:g} s ({run.limit_source})"
    if run.stopped_by is not None:
        return f"was stopped after {run.duration:.1f} s"
    sig = signal_name(run.returncode)
    if sig:
        return f"crashed with signal {sig} (exit code {run.returncode})"
    return f"exited with code {run.returncode} without reporting its {missing} phase"


def _stopped_by(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if isinstance(exc, pytest.fail.Exception) else f"{type(exc).__name__}: {text}"


def child_reports(item: pytest.Item, run: ChildRun) -> list[pytest.TestReport]:
    """The reports of an isolated test: the child's own, completed by a crash or timeout report where
    it died or was ended."""
    from pytest_xla_dynamo.known_issues import crash_verdict

    config = item.config
    reports: list[pytest.TestReport] = []
    for data in run.reports:
        rep = config.hook.pytest_report_from_serializable(config=config, data=data)
        if isinstance(rep, pytest.TestReport):
            rep.nodeid = item.nodeid
            rep.location = item.location
            reports.append(rep)
    phases = [r.when for r in reports]
    setup_ok = bool(reports) and reports[0].when == "setup" and reports[0].passed
    if "teardown" in phases and (not setup_ok or "call" in phases):
        return reports
    missing = "setup" if "setup" not in phases else ("call" if setup_ok and "call" not in phases else "teardown")
    ended = run.timed_out or run.stopped_by is not None
    text = "\n".join([
        f"isolated test {_how(run, missing)} in its {missing} phase",
        *([f"stopped by: {_stopped_by(run.stopped_by)} (the child was ended)"] if run.stopped_by else []),
        *(["--- the child's Python stack when it was ended (faulthandler) ---", run.stack or "(none)"]
          if ended else []),
        *(["collection errors in the child:", *run.collect_errors] if run.collect_errors else []),
        "command: " + " ".join(run.command),
        f"--- child stderr (last {TAIL_LINES} lines) ---",
        tail(run.stderr) or "(empty)",
        f"--- child stdout (last {TAIL_LINES} lines) ---",
        tail(run.stdout) or "(empty)",
    ])
    sig = signal_name(run.returncode)
    verdict = crash_verdict(item, sig, -1 if run.returncode is None else run.returncode,
                            run.stderr + "\n" + run.stdout)
    if ended:  # a hang is not a crash: never the known crash, and judged as failing another way
        props = verdict.user_properties if verdict.xfail_reason is None else tuple(
            (key, "other_failure") for key, _ in verdict.user_properties)
        crash = _synthetic(item, missing, "failed", text, duration=run.duration, props=props)
    elif verdict.xfail_reason is not None:
        crash = _synthetic(item, missing, "skipped", f"{verdict.explanation}\n{text}", duration=run.duration,
                           props=verdict.user_properties, wasxfail=verdict.xfail_reason)
    else:
        crash = _synthetic(item, missing, "failed", f"{text}\n[{verdict.explanation}]", duration=run.duration,
                           props=verdict.user_properties)
    reports.append(crash)
    if missing != "teardown":  # pytest reports a teardown phase after a failed setup too
        reports.append(_synthetic(item, "teardown", "passed", None))
    return reports


def check_child_output(path: Path) -> None:
    """:class:`pytest.UsageError` where the file a child writes its reports to (``PYTEST_XLA_ISOLATED_CHILD``, set by
    the parent for an isolated test) cannot be appended to: said before any test, not as an INTERNALERROR at the
    first report."""
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as err:
        raise pytest.UsageError(f"{CHILD_ENV}={str(path)!r}: cannot write the isolated test's reports there: "
                                f"{err.strerror or err}; valid: unset it (the plugin sets it for the child of an "
                                "isolated test), or a writable file") from None


# --- the plugin -------------------------------------------------------------------------------------


class IsolationPlugin:
    """Runs isolated tests in children (parent side) and, in a child, writes the reports back."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.config = session.config
        self.child_output: Path | None = session.child_output
        if self.child_output is not None:
            check_child_output(self.child_output)

    def should_isolate(self, item: pytest.Item) -> bool:
        if self.child_output is not None:
            return False
        if item.get_closest_marker("skip") is not None:
            return False  # skipped before anything runs: no child needed
        if self.config.stash.get(SELF_ISOLATING_KEY, frozenset()).intersection(getattr(item, "fixturenames", ())):
            return False  # its check runs its work in children of its own (timing.across)
        return self.session.xcfg.isolate or item.get_closest_marker("xla_isolated") is not None

    def timeout(self, item: pytest.Item) -> tuple[float, str]:
        """The item's time limit in seconds and where it comes from."""
        marked = markers.isolated_timeout(item)
        if marked is not None:
            return marked, f"@pytest.mark.xla_isolated(timeout={marked:g})"
        source = self.session.xcfg.sources.get("xla_isolate_timeout", "default")
        where = "" if source == "command line" else f", {source}"
        return self.session.xcfg.isolate_timeout, f"{OPTIONS_BY_DEST['xla_isolate_timeout'].shown}{where}"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if not self.should_isolate(item):
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        run = run_child(item, *self.timeout(item))
        if run.records:
            self.session.store.loads(run.records)
        reports = child_reports(item, run)
        # the parent set nothing up for this item; tear down what the next item does not need
        teardown = pytest.CallInfo.from_call(lambda: item.session._setupstate.teardown_exact(nextitem),
                                             when="teardown")
        for rep in reports:
            if rep.when == "teardown" and teardown.excinfo is not None:
                rep = ihook.pytest_runtest_makereport(item=item, call=teardown)
            ihook.pytest_runtest_logreport(report=rep)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        processes.end_all()  # a child still running at the session's end (never waited for) ends too

    # --- the child side -----------------------------------------------------------------------------

    def _write(self, entry: dict[str, Any]) -> None:
        assert self.child_output is not None
        with self.child_output.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, default=str) + "\n")
            fh.flush()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.child_output is None:
            return
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        self._write({"kind": "report", "data": data})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if self.child_output is not None and report.failed:
            self._write({"kind": "collect_error", "text": str(report.longrepr)})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.child_output is not None and len(self.session.store):
            self._write({"kind": "records", "data": self.session.store.dumps()})
