"""Fresh interpreters: isolated tests (a crash is reported, never fatal) and the ``xla_subprocess`` fixture.

A test marked ``@pytest.mark.xla_isolated`` (or every test, with ``--xla-isolate``; and every test
of a known crash) runs in a child ``python -m pytest <nodeid>`` started from a ``tryfirst``
``pytest_runtest_protocol`` hook, like pytest-forked does with ``fork()`` but in a fresh interpreter.
The child gets the parent's relevant options and writes its serialized reports, one JSON line each,
to the file named by ``PYTEST_XLA_ISOLATED_CHILD``; the parent replays them as its own reports, and
merges the child's case records into its store. A child that dies (a signal, or an exit without its
reports) is reported with the signal name and exit code: as an xfail where it is the test's known
crash, as a failure otherwise. The session goes on. ``@pytest.mark.xla_isolated(timeout=S)`` bounds
the child (default 1800 s).

The ``xla_subprocess`` fixture runs a snippet in a fresh interpreter, for tests that need a clean
process (e.g. pytorch/xla#4174, which depends on what ran before the XLA runtime came up)::

    def test_x(xla_subprocess):
        result = xla_subprocess.run("import torch_xla; print(torch_xla.device())", timeout=300)
        assert result.returncode == 0, result.stderr
        xla_subprocess.check("raise ValueError('boom')")  # raises a ValueError subclass of SubprocessError

No torch here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal as _signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo import config as _config

CHILD_ENV = "PYTEST_XLA_ISOLATED_CHILD"
DEFAULT_TIMEOUT = 1800.0
SNIPPET_TIMEOUT = 600.0
TAIL_LINES = 60

# options of the parent that a child must not inherit (reports, gating and sharding are the parent's)
_CHILD_DROP = frozenset({"xla_report", "xla_report_dir", "xla_summary", "xla_expected", "xla_update_expected",
                         "xla_strict_improved", "xla_min_speedup_ratio", "xla_timing_baseline", "xla_shard",
                         "xla_isolate"})
_CHILD_FORCE = ("--xla-report=", "--xla-summary=", "--xla-expected=", "--xla-timing-baseline=",
                "--xla-min-speedup-ratio=", "--xla-shard=", "-o", "xla_update_expected=false",
                "-o", "xla_strict_improved=false")
_CHILD_ENV_DROP = ("PYTEST_XLA_UPDATE_EXPECTED", "PYTEST_XLA_STRICT_IMPROVED", "PYTEST_XLA_ISOLATE",
                   "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
                   "PYTEST_CURRENT_TEST")
# command-line options of the parent forwarded to the child: (names taking a value), (flags)
_FORWARD_VALUE = ("-p", "-o", "--override-ini", "-c", "--config-file", "--confcutdir", "--import-mode",
                  "-W", "--pythonwarnings", "--assert", "--tb", "--capture")
_FORWARD_FLAG = ("--noconftest", "--strict-markers", "--strict-config", "--strict", "--runxfail", "-s",
                 "-l", "--showlocals", "--full-trace")


def signal_name(returncode: int | None) -> str | None:
    """``-6`` -> ``"SIGABRT"`` (a child killed by a signal); None for a normal exit."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    parts = text.rstrip().splitlines()
    return "\n".join(parts[-lines:])


def is_isolated_child(config: pytest.Config) -> bool:
    """Whether this session is an isolated test's child (it must not write reports or gate)."""
    plugin = config.pluginmanager.get_plugin("xla_dynamo_isolation")
    return isinstance(plugin, IsolationPlugin) and plugin.child_output is not None


# --- the parent side -------------------------------------------------------------------------------


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
    (reports, gating and sharding excepted); the child reads the same ini file and environment."""
    args = forward_cli(config.invocation_params.args)
    xcfg = _config.get_config(config)
    for opt in _config.OPTIONS:
        if opt.dest in _CHILD_DROP or xcfg.sources.get(opt.dest) != "command line":
            continue
        value = config.getoption(opt.dest)
        args.append(opt.cli if opt.flag else f"{opt.cli}={value}")
    return args


def child_command(item: pytest.Item, output: Path, basetemp: Path) -> list[str]:
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
    duration: float = 0.0
    command: list[str] = field(default_factory=list)


def _run_process(cmd: Sequence[str], *, env: Mapping[str, str], cwd: Path | str | None,
                 timeout: float) -> tuple[int | None, str, str, bool]:
    """Run ``cmd`` in its own session; on timeout kill its whole process group."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=dict(env),
                                cwd=cwd, start_new_session=True, text=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, _signal.SIGKILL)
            proc.wait()
        out.seek(0)
        err.seek(0)
        return (None if timed_out else proc.returncode), out.read(), err.read(), timed_out


def run_child(item: pytest.Item, timeout: float) -> ChildRun:
    """Run ``item`` in a child pytest and read back what it wrote."""
    workdir = Path(tempfile.mkdtemp(prefix="xla-isolated-"))
    try:
        output = workdir / "reports.jsonl"
        cmd = child_command(item, output, workdir / "basetemp")
        start = time.monotonic()
        returncode, stdout, stderr, timed_out = _run_process(
            cmd, env=child_env(output), cwd=item.config.invocation_params.dir, timeout=timeout)
        run = ChildRun(returncode, stdout, stderr, timed_out=timed_out, duration=time.monotonic() - start,
                       command=cmd)
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


def _synthetic(item: pytest.Item, when: str, outcome: str, longrepr: Any, *, sections: Sequence[tuple[str, str]] = (),
               duration: float = 0.0, props: Sequence[tuple[str, str]] = (), **extra: Any) -> pytest.TestReport:
    now = time.time()
    return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, outcome,  # type: ignore[arg-type]
                             longrepr, when, sections=list(sections), duration=duration,  # type: ignore[arg-type]
                             start=now - duration, stop=now,
                             user_properties=[*item.user_properties, *props], **extra)


def child_reports(item: pytest.Item, run: ChildRun) -> list[pytest.TestReport]:
    """The reports of an isolated test: the child's own, completed by a crash report where it died."""
    from pytest_xla_dynamo import known_issues

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
    complete = "teardown" in phases and (not setup_ok or "call" in phases)
    if complete:
        return reports
    missing = "setup" if "setup" not in phases else ("call" if setup_ok and "call" not in phases else "teardown")
    sig = signal_name(run.returncode)
    if run.timed_out:
        how = "timed out (killed)"
    elif sig:
        how = f"crashed with signal {sig} (exit code {run.returncode})"
    else:
        how = f"exited with code {run.returncode} without reporting its {missing} phase"
    text = "\n".join([
        f"isolated test {how} in its {missing} phase",
        *(["collection errors in the child:", *run.collect_errors] if run.collect_errors else []),
        "command: " + " ".join(run.command),
        f"--- child stderr (last {TAIL_LINES} lines) ---",
        _tail(run.stderr) or "(empty)",
        f"--- child stdout (last {TAIL_LINES} lines) ---",
        _tail(run.stdout) or "(empty)",
    ])
    verdict = known_issues.crash_verdict(item, None if run.timed_out else sig,
                                         -1 if run.returncode is None else run.returncode,
                                         run.stderr + "\n" + run.stdout)
    sections = [("isolated child stderr", _tail(run.stderr))] if run.stderr.strip() else []
    if verdict.xfail_reason is not None:
        crash = _synthetic(item, missing, "skipped", f"{verdict.explanation}\n{text}", sections=sections,
                           duration=run.duration, props=verdict.user_properties, wasxfail=verdict.xfail_reason)
    else:
        crash = _synthetic(item, missing, "failed", f"{text}\n[{verdict.explanation}]", sections=sections,
                           duration=run.duration, props=verdict.user_properties)
    reports.append(crash)
    if missing != "teardown":  # pytest reports a teardown phase after a failed setup too
        reports.append(_synthetic(item, "teardown", "passed", None))
    return reports


class IsolationPlugin:
    """Runs isolated tests in children (parent side) and, in a child, writes the reports back."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        value = os.environ.pop(CHILD_ENV, None)  # popped: the child's own subprocesses are not children
        self.child_output: Path | None = Path(value) if value else None
        self.isolate_all = _config.get_config(config).isolate

    def should_isolate(self, item: pytest.Item) -> bool:
        if self.child_output is not None:
            return False
        if item.get_closest_marker("skip") is not None:
            return False  # skipped before anything runs: no child needed
        return self.isolate_all or item.get_closest_marker("xla_isolated") is not None

    @staticmethod
    def timeout(item: pytest.Item) -> float:
        marker = item.get_closest_marker("xla_isolated")
        value = marker.kwargs.get("timeout") if marker is not None else None
        return float(value) if value else DEFAULT_TIMEOUT

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if not self.should_isolate(item):
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        run = run_child(item, self.timeout(item))
        if run.records:
            from pytest_xla_dynamo.records import get_store

            get_store(item.config).loads(run.records)
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

    # --- the child side ----------------------------------------------------------------------------

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
        if self.child_output is None:
            return
        from pytest_xla_dynamo.records import get_store

        store = get_store(self.config)
        if len(store):
            self._write({"kind": "records", "data": store.dumps()})


# --- xla_subprocess: a snippet in a fresh interpreter ----------------------------------------------

_BOOTSTRAP = r"""
import json, sys, traceback
code_path, result_path = sys.argv[1], sys.argv[2]
sys.argv = [code_path, *sys.argv[3:]]
namespace = {"__name__": "__main__", "__file__": code_path}
try:
    with open(code_path, encoding="utf-8") as fh:
        source = fh.read()
    exec(compile(source, code_path, "exec"), namespace)
except SystemExit:
    raise  # sys.exit(n): the exit code says it
except BaseException as exc:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
    info = {"type": type(exc).__name__, "module": type(exc).__module__,
            "qualname": type(exc).__qualname__,
            "mro": [c.__module__ + "." + c.__qualname__ for c in type(exc).__mro__],
            "message": str(exc), "traceback": text}
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    sys.stderr.write(text)
    sys.stderr.flush()
    sys.exit(1)
"""


class SubprocessError(Exception):
    """A snippet run by ``xla_subprocess.check`` failed; ``result`` holds what the child left.

    Raised as a subclass that is also the child's exception type (or its nearest builtin base), so
    ``pytest.raises(RuntimeError)`` and a registry's ``raises = "RuntimeError"`` match it."""

    result: SubprocessResult

    def __init__(self, message: str, result: SubprocessResult | None = None) -> None:
        BaseException.__init__(self, message)  # not super(): a remote base may want other arguments
        if result is not None:
            self.result = result


class SubprocessCrashed(SubprocessError):
    """The child was killed by a signal (``result.signal``)."""


class SubprocessTimeout(SubprocessError):
    """The child ran past its timeout and was killed."""


_remote_classes: dict[tuple[str, ...], type[SubprocessError]] = {}


def _remote_class(error: Mapping[str, Any]) -> type[SubprocessError]:
    """A ``SubprocessError`` subclass that is also the child's exception class where this process has
    it loaded already, else the child's nearest builtin exception base."""
    mro: list[str] = list(error.get("mro", []))
    key = tuple(mro)
    if key in _remote_classes:
        return _remote_classes[key]
    bases: list[type] = []
    for path in mro:
        module_name, _, qualname = path.rpartition(".")
        module = sys.modules.get(module_name)
        obj: Any = module
        for attr in qualname.split("."):
            obj = getattr(obj, attr, None)
        if isinstance(obj, type) and issubclass(obj, BaseException) and obj not in (BaseException, object):
            bases.append(obj)
            break
    cls: type[SubprocessError] | None = None
    for base in [*bases, Exception]:
        try:
            cls = type(str(error.get("type", "Error")), (SubprocessError, base),
                       {"__module__": "xla_subprocess", "__qualname__": str(error.get("qualname", "Error")),
                        "__init__": SubprocessError.__init__, "__str__": Exception.__str__,
                        "__reduce__": Exception.__reduce__})
            break
        except TypeError:  # layout conflict with that base: try the next
            continue
    assert cls is not None
    _remote_classes[key] = cls
    return cls


@dataclass
class SubprocessResult:
    """What a snippet's fresh interpreter did."""

    returncode: int | None
    stdout: str
    stderr: str
    signal: str | None = None  # e.g. "SIGABRT" where a signal killed the child
    error: dict[str, Any] | None = None  # the child's uncaught exception: type, mro, message, traceback
    timed_out: bool = False
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        if self.timed_out:
            return f"timed out after {self.duration:.0f} s (killed)"
        if self.signal:
            return f"crashed with signal {self.signal} (exit code {self.returncode})"
        if self.error:
            return f"raised {self.error['type']}: {self.error['message']}"
        return f"exited with code {self.returncode}"

    def raise_for_error(self) -> SubprocessResult:
        """Raise a typed :class:`SubprocessError` unless the child exited with 0; return self."""
        if self.ok:
            return self
        tail = f"\n--- child stderr (last {TAIL_LINES} lines) ---\n{_tail(self.stderr)}"
        if self.timed_out:
            raise SubprocessTimeout(f"xla_subprocess: {self.describe()}{tail}", self)
        if self.signal:
            raise SubprocessCrashed(f"xla_subprocess: {self.describe()}{tail}", self)
        if self.error:
            cls = _remote_class(self.error)
            raise cls(f"{self.error['message']}\n\n--- in the child (xla_subprocess) ---\n"
                      f"{self.error['traceback'].rstrip()}", self)
        raise SubprocessError(f"xla_subprocess: {self.describe()}{tail}", self)


class XlaSubprocess:
    """Runs Python snippets in fresh interpreters (``PJRT_DEVICE`` defaults to CPU there too)."""

    def __init__(self, *, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
                 timeout: float = SNIPPET_TIMEOUT) -> None:
        self.cwd = cwd
        self.env = dict(env or {})
        self.timeout = timeout
        self.results: list[SubprocessResult] = []

    def run(self, code: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
            args: Sequence[str] = ()) -> SubprocessResult:
        """Run ``code`` (dedented) with ``python`` in a fresh process; never raises for its failure."""
        workdir = Path(tempfile.mkdtemp(prefix="xla-subprocess-"))
        try:
            code_path = workdir / "snippet.py"
            result_path = workdir / "error.json"
            code_path.write_text(textwrap.dedent(code), encoding="utf-8")
            full_env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", CHILD_ENV)}
            full_env.setdefault("PJRT_DEVICE", "CPU")
            full_env.setdefault("PYTHONFAULTHANDLER", "1")
            full_env.update(self.env)
            full_env.update(env or {})
            start = time.monotonic()
            cmd = [sys.executable, "-c", _BOOTSTRAP, str(code_path), str(result_path), *args]
            returncode, stdout, stderr, timed_out = _run_process(
                cmd, env=full_env, cwd=self.cwd, timeout=self.timeout if timeout is None else timeout)
            error = None
            if result_path.exists():
                try:
                    error = json.loads(result_path.read_text(encoding="utf-8"))
                except ValueError:
                    error = None
            result = SubprocessResult(returncode, stdout, stderr, signal=signal_name(returncode), error=error,
                                      timed_out=timed_out, duration=time.monotonic() - start)
            self.results.append(result)
            return result
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def check(self, code: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
              args: Sequence[str] = ()) -> SubprocessResult:
        """Like :meth:`run`, but raise a typed :class:`SubprocessError` when the child fails."""
        return self.run(code, timeout=timeout, env=env, args=args).raise_for_error()


@pytest.fixture
def xla_subprocess(request: pytest.FixtureRequest) -> XlaSubprocess:
    """Run a Python snippet in a fresh interpreter: ``xla_subprocess.run(code, timeout=...)`` returns
    a :class:`SubprocessResult` (returncode, signal, stdout, stderr, error); ``.check(code)`` raises
    a typed :class:`SubprocessError` (also an instance of the child's exception type)."""
    return XlaSubprocess(cwd=request.config.invocation_params.dir)
