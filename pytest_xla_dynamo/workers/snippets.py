"""Snippets in fresh interpreters: the object behind the ``xla_subprocess`` fixture.

For tests that need a clean process (e.g. pytorch/xla#4174, which depends on what ran before the XLA
runtime came up)::

    def test_x(xla_subprocess):
        result = xla_subprocess.run("import torch_xla; print(torch_xla.device())", timeout=300)
        assert result.returncode == 0, result.stderr
        xla_subprocess.check("raise ValueError('boom')")  # raises a ValueError subclass of SubprocessError

The snippet runs as ``__main__`` in ``python`` (``PJRT_DEVICE`` defaults to CPU there too); its
uncaught exception comes back typed. The child never outlives the test's process
(:mod:`pytest_xla_dynamo.workers.processes`). No torch here.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_xla_dynamo.session import CHILD_ENV
from pytest_xla_dynamo.workers import processes
from pytest_xla_dynamo.workers.processes import TAIL_LINES, signal_name, tail

SNIPPET_TIMEOUT = 600.0
WORKDIR_PREFIX = "xla-subprocess-"
# variables of this process that a snippet must not inherit
_ENV_DROP = ("PYTEST_CURRENT_TEST", CHILD_ENV)

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
        last = f"\n--- child stderr (last {TAIL_LINES} lines) ---\n{tail(self.stderr)}"
        if self.timed_out:
            raise SubprocessTimeout(f"xla_subprocess: {self.describe()}{last}", self)
        if self.signal:
            raise SubprocessCrashed(f"xla_subprocess: {self.describe()}{last}", self)
        if self.error:
            cls = _remote_class(self.error)
            raise cls(f"{self.error['message']}\n\n--- in the child (xla_subprocess) ---\n"
                      f"{self.error['traceback'].rstrip()}", self)
        raise SubprocessError(f"xla_subprocess: {self.describe()}{last}", self)


class Snippets:
    """Runs Python snippets in fresh interpreters (``PJRT_DEVICE`` defaults to CPU there too)."""

    def __init__(self, *, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
                 timeout: float = SNIPPET_TIMEOUT) -> None:
        self.cwd = cwd
        self.env = dict(env or {})
        self.timeout = timeout
        self.results: list[SubprocessResult] = []

    def run(self, code: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
            args: Sequence[str] = ()) -> SubprocessResult:
        """Run ``code`` (dedented) with ``python`` in a fresh process; never raises for its failure
        (an exception in this process during the wait, e.g. a pytest-timeout, ends the child and
        propagates)."""
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        try:
            code_path = workdir / "snippet.py"
            result_path = workdir / "error.json"
            code_path.write_text(textwrap.dedent(code), encoding="utf-8")
            full_env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
            full_env.setdefault("PJRT_DEVICE", "CPU")
            full_env.setdefault("PYTHONFAULTHANDLER", "1")
            full_env.update(self.env)
            full_env.update(env or {})
            cmd = [sys.executable, "-c", _BOOTSTRAP, str(code_path), str(result_path), *args]
            done = processes.run(cmd, env=full_env, cwd=self.cwd, workdir=workdir,
                                 timeout=self.timeout if timeout is None else timeout)
            if done.stopped_by is not None:
                raise done.stopped_by
            error = None
            if result_path.exists():
                try:
                    error = json.loads(result_path.read_text(encoding="utf-8"))
                except ValueError:
                    error = None
            result = SubprocessResult(done.returncode, done.stdout, done.stderr, signal=signal_name(done.returncode),
                                      error=error, timed_out=done.timed_out, duration=done.duration)
            self.results.append(result)
            return result
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def check(self, code: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None,
              args: Sequence[str] = ()) -> SubprocessResult:
        """Like :meth:`run`, but raise a typed :class:`SubprocessError` when the child fails."""
        return self.run(code, timeout=timeout, env=env, args=args).raise_for_error()
