"""The triage header on top of pytest's failure report, and torch's error in a few lines.

With pytest's default ``--tb=auto`` a triaged failure reads: the header (:meth:`Triage.header`), the
test's line, then torch's error compact: each exception of the chain (cause first) with the frame it was
raised in and its first lines; an error the harness's own check raised (a snapshot diff, a recompilation)
keeps its whole message, as pytest's ``E`` lines (a parity failure's divergences are in the header).
Every other ``--tb`` style keeps pytest's own report, torch's frames included (``--tb=long``), with the
header put first. The plugin's frames are hidden (``__tracebackhide__``) either way. The short summary
line gets the stage and the matching issue.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MESSAGE_LINES = 4  # lines of each chained exception's message in the compact form
_SITE = re.compile(r".*/(?:site|dist)-packages/")


def short_path(path: str) -> str:
    """A frame's file with the site-packages prefix removed (``torch/autograd/graph.py``)."""
    return _SITE.sub("", path)


def error_lines(exc: BaseException, limit: int = 4) -> list[str]:
    """The exception chain, cause first: the frame each was raised in and its message's first lines."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < limit and current not in chain:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    lines: list[str] = []
    for index, item in enumerate(reversed(chain)):
        if index:
            lines.append("  which caused:")
        frames = traceback.extract_tb(item.__traceback__) if item.__traceback__ is not None else []
        if frames:
            last = frames[-1]
            lines.append(f"  {short_path(last.filename)}:{last.lineno} in {last.name}")
        text = [line for line in str(item).strip().splitlines() if line.strip()] or [""]
        lines.append(f"  {type(item).__name__}: {text[0][:300]}".rstrip(": "))
        lines += [f"    {line[:300]}" for line in text[1:MESSAGE_LINES]]
        if len(text) > MESSAGE_LINES:
            lines.append(f"    ... ({len(text) - MESSAGE_LINES} more lines: --tb=long)")
    return lines


def test_line(excinfo: Any, test_path: Path | None) -> str:
    """``suites/test_x.py:19: xla_parity.check_case(...)``: the last frame in the test's file."""
    if test_path is None:
        return ""
    found = ""
    for entry in excinfo.traceback:
        if Path(str(entry.path)) == test_path:
            source = str(entry.statement).strip().splitlines()
            found = f"{test_path.name}:{entry.lineno + 1}: {source[0] if source else ''}"
    return found


PACKAGE = Path(__file__).resolve().parents[1]


def raised_by_harness(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in this package (a parity or graph check), not in torch or the test."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    return bool(frames) and Path(frames[-1].filename).resolve().is_relative_to(PACKAGE)


def compact(header: Sequence[str], excinfo: Any, test_path: Path | None) -> list[str]:
    """The whole failure in the compact form (``--tb=auto``)."""
    lines = list(header)
    where = test_line(excinfo, test_path)
    if where:
        lines.append(f"  test:      {where}")
    exc = excinfo.value
    if raised_by_harness(exc):
        if getattr(exc, "divergences", None) is None:  # the check's whole message (a snapshot diff, ...)
            cls = type(exc)
            name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
            text = str(exc).strip().splitlines() or [""]
            lines += [f"E   {name}: {text[0]}", *(f"E   {line}" for line in text[1:])]
        return [*lines, "(the harness's check, summarized above; --tb=long for pytest's whole report)"]
    lines.append("torch's error (--tb=long for the whole traceback, torch's frames included):")
    return lines + error_lines(excinfo.value)


def decorate(rep: Any, header: Sequence[str], excinfo: Any, *, style: str, test_path: Path | None,
             tag: str) -> None:
    """Put the triage on ``rep``'s failure report (see the module docstring); ``tag`` prefixes the
    one-line crash message of the short summary."""
    from _pytest._code.code import ExceptionChainRepr, ReprEntryNative, ReprTraceback

    old = rep.longrepr
    crash = getattr(old, "reprcrash", None)
    if crash is not None and tag:
        try:
            crash.message = f"[{tag}] {crash.message}"
        except (AttributeError, TypeError):  # pragma: no cover - a frozen repr
            pass
    if style == "auto" or not isinstance(old, ExceptionChainRepr):
        lines = compact(header, excinfo, test_path)
        block = ReprTraceback([ReprEntryNative([line + "\n" for line in lines])], None, "native")
        new = ExceptionChainRepr([(block, crash, None)])
    else:
        block = ReprTraceback([ReprEntryNative([line + "\n" for line in header])], None, "native")
        new = ExceptionChainRepr([(block, None, "the error as raised:"), *old.chain])
    for section in getattr(old, "sections", []):
        new.addsection(*section)
    rep.longrepr = new
