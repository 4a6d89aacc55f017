"""Judging a known-issue test's report: did it fail as recorded, and what to change where it did not.

Called from the ``pytest_runtest_makereport`` wrapper for a test the registry applies to. A strict
xfail must fail with the recorded exception (a dotted ``raises`` matched here, by the class path of the
exception's MRO) *and* message (``match``) and, for an entry with
``diverging`` globs, with no diverging tensor outside them; a regression test must pass.
Every mismatch turns into a failure that says what was expected and where the entry is; a strict
XPASS says which registry line to change (:func:`suggestion`). Each report is tagged with its
outcome (a user property), so the summary can be built from reports alone. No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_xla_dynamo.known_issues.apply import PROP_HINT, PROP_OUTCOME, Applied
from pytest_xla_dynamo.known_issues.exceptions import exception_matches, type_name
from pytest_xla_dynamo.known_issues.registry import KnownIssue
from pytest_xla_dynamo.versions import installed_versions, public_version, versions_text

# outcomes, worst first (a test's outcome is the worst of its phases)
OUTCOMES = (
    "other_failure",  # affected, but it failed another way than recorded
    "regression_failed",  # not affected (fixed), but its test fails
    "no_longer_reproduces",  # affected, but it passed: strict XPASS
    "reproduced",  # affected, and it failed as recorded: xfailed
    "run_failed",  # --xla-known-issues=run: raw failure
    "skipped",  # --xla-known-issues=skip
    "run_passed",  # --xla-known-issues=run: raw pass
    "passed",  # not affected, and it passes: a regression test
)


def judge(applied: Applied, call: pytest.CallInfo[None], rep: pytest.TestReport, *, runxfail: bool = False) -> None:
    """Check ``rep`` (one phase of a test ``applied`` to) against its entry: explain and tag it."""
    entry = applied.entry
    excinfo = call.excinfo
    action = "run" if applied.action == "xfail" and runxfail else applied.action
    if action == "xfail":
        if excinfo is not None and rep.skipped and hasattr(rep, "wasxfail"):
            if excinfo.errisinstance(pytest.xfail.Exception):  # an explicit pytest.xfail()
                return
            message = str(excinfo.value)
            unexplained = entry.unexplained(getattr(excinfo.value, "diverging", None) or ())
            if entry.kind != "crash" and entry.raises and not exception_matches(entry.raises, excinfo.value):
                # a dotted raises= is matched by name here (never imported at collection)
                other_failure(rep, entry, _expected_got(entry, excinfo.value), "wrong exception")
            elif not entry.matches(message):
                other_failure(rep, entry, f"expected {entry.raises} matching {entry.match!r}, got "
                                          f"{type_name(excinfo.value)} with another message:\n{short(message)}",
                              "wrong message")
            elif unexplained:
                shown = ", ".join(unexplained[:6]) + (f", +{len(unexplained) - 6} more" if len(unexplained) > 6 else "")
                other_failure(rep, entry, f"diverging beyond the known issue (it covers {', '.join(entry.diverging)}): "
                                          f"{shown}\n{short(message)}", "more diverges")
            else:
                tag(rep, "reproduced")
        elif excinfo is not None and rep.failed:
            if entry.kind == "crash":
                got = (f"expected the crash (signal {entry.signal or 'any'}), got the exception "
                       f"{type_name(excinfo.value)}: {short(str(excinfo.value))}")
            else:
                got = _expected_got(entry, excinfo.value)
            other_failure(rep, entry, got, "wrong exception")
        elif rep.failed and rep.when == "call" and str(rep.longrepr).startswith("[XPASS(strict)]"):
            hint = suggestion(entry)
            rep.longrepr = (f"{rep.longrepr}\nknown issue {entry.id} no longer reproduces with "
                            f"{versions_text()}: {hint}")
            tag(rep, "no_longer_reproduces")
            rep.user_properties.append((PROP_HINT, hint))
    elif action == "regression":
        if rep.failed:
            explain(rep, entry, f"{entry.id} is recorded as not affecting {versions_text()} "
                                f"(affects = {dict(entry.affects)}), but its test fails: it has "
                                "come back, or the test fails for another reason", "regression")
            tag(rep, "regression_failed")
        elif rep.passed and rep.when == "call":
            tag(rep, "passed")
    elif action == "run":
        if rep.failed:
            tag(rep, "run_failed")
        elif rep.passed and rep.when == "call":
            tag(rep, "run_passed")
    elif action == "skip" and rep.skipped:
        tag(rep, "skipped")


def _expected_got(entry: KnownIssue, exc: BaseException) -> str:
    """``expected CLASS matching 'MATCH', got CLASS: message``: an exception other than the recorded one."""
    return (f"expected {entry.raises}" + (f" matching {entry.match!r}" if entry.match else "")
            + f", got {type_name(exc)}: {short(str(exc))}")


def other_failure(rep: pytest.TestReport, entry: KnownIssue, text: str, label: str) -> None:
    """``rep`` failed otherwise than ``entry`` records: a failure (no longer an xfail) that says how."""
    rep.outcome = "failed"
    if hasattr(rep, "wasxfail"):
        del rep.wasxfail
    explain(rep, entry, text, label)
    tag(rep, "other_failure")


def explain(rep: pytest.TestReport, entry: KnownIssue, text: str, label: str) -> None:
    """Add the ``xla known issue`` section to ``rep`` and prefix its one-line crash message."""
    where = f"{entry.source}:{entry.line}" if entry.line else entry.source
    rep.sections.append(("xla known issue", f"known issue {entry.reason}\n[{label}] {text}\n"
                                            f"registry entry: {where}"))
    crash = getattr(rep.longrepr, "reprcrash", None)
    if crash is not None and hasattr(crash, "message"):
        try:
            crash.message = f"[known issue {entry.id}: {label}] {crash.message}"
        except (AttributeError, TypeError):  # pragma: no cover - a frozen repr
            pass


def tag(rep: pytest.TestReport, outcome: str) -> None:
    """Record ``outcome`` (one of :data:`OUTCOMES`) on the report, replacing an earlier one."""
    rep.user_properties = [p for p in rep.user_properties if p[0] != PROP_OUTCOME]
    rep.user_properties.append((PROP_OUTCOME, outcome))


def short(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def suggestion(entry: KnownIssue, versions: Mapping[str, str | None] | None = None) -> str:
    """The registry change that stops ``entry`` applying to the installed versions."""
    versions = installed_versions() if versions is None else versions
    affects = dict(entry.affects)
    dist = "torch_xla" if ("torch_xla" in affects or not affects) else next(iter(affects))
    installed = versions.get(dist) or "?"
    bound = f"<{public_version(installed)}"
    affects[dist] = f"{affects[dist]},{bound}" if affects.get(dist) else bound
    where = f"{dist} {installed}"
    if entry.source == "marker":
        return (f"@pytest.mark.xla_known_issue({entry.id!r}, ...) on the test: set {dist}=\"{affects[dist]}\" "
                f"(installed {where} no longer reproduces it)")
    table = ", ".join(f'{k} = "{v}"' for k, v in affects.items())
    line = f"affects = {{ {table} }}"
    why = f"(installed {where} no longer reproduces it; if torch brought the fix, bound affects.torch instead)"
    if entry.source.endswith(".toml") or entry.line is not None:
        at = entry.affects_line or entry.line
        loc = f"{entry.source}:{at}" if at else entry.source
        if entry.affects_line is None:
            return f"{loc}: entry {entry.id!r}: add the line `{line}` {why}"
        if _is_table_header(entry.source, entry.affects_line):
            return f'{loc}: entry {entry.id!r}: in its [issue.affects] table set `{dist} = "{affects[dist]}"` {why}'
        return f"{loc}: entry {entry.id!r}: replace that line by `{line}` {why}"
    return (f"entry {entry.id!r} from {entry.source}: set `{line}` (installed {where} no longer "
            "reproduces it)")


def _is_table_header(path: str, line: int) -> bool:
    try:
        text = Path(path).read_text(encoding="utf-8").splitlines()[line - 1]
    except (OSError, IndexError):
        return False
    return text.strip().startswith("[")
