"""Known-issue matching for failures nobody declared: which registry entry a failure looks like.

A :class:`Failure` is what a failing case showed: its exception's classes and message, the stage, the
kind (``error`` for a case that did not run, ``wrong_result`` for an accuracy failure), the backend and
mode, and for accuracy failures the diverging tensors. :func:`match_failure` compares it with every
entry of the registry, built-in and downstream: the exception class and the entry's ``match`` regex
must agree, and the entry's kind, backends and modes must admit it; its ``diverging`` globs say whether
it explains every diverging tensor. The entry's ``tests`` and ``models`` only say where it was seen, so
they do not exclude a downstream model. :func:`declare_snippet` and :func:`new_entry_snippet` give the
marker and the TOML a person pastes. No torch here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_xla_dynamo.known_issues.registry import KnownIssue

#: the harness status of a failing case -> the registry kind it corresponds to
STATUS_KINDS = {"fail_accuracy": "wrong_result", "eager_two_runs_differ": "wrong_result",
                "fail_graph": "graph_break", "cpu_fallback": "cpu_fallback"}


def kind_of(status: str) -> str:
    """The registry kind of a harness status (``error`` for anything that did not run)."""
    return STATUS_KINDS.get(status, "error")


@dataclass(frozen=True)
class Failure:
    """What a failing case showed, as the registry describes problems."""

    exc_names: tuple[str, ...]  # class names along the MRO, plain and dotted (stages.class_names)
    message: str
    kind: str = "error"  # "" when unknown (a test outside the engines): any kind may match
    stage: str = ""
    backend: str = ""
    mode: str = ""
    model: str = ""
    test: str = ""
    diverging: tuple[str, ...] = ()  # diverging tensor names, first divergence first
    op: str = ""  # an op case's OpInfo id (the op suite)
    repro_file: str = ""  # a standalone reproducer of the failure (--xla-write-repro)
    # what the case was seen to run: its CPU fallbacks (``aten::_embedding_bag``), module types and functional calls
    evidence: tuple[str, ...] = ()

    @property
    def exc_type(self) -> str:
        """The exception's dotted class name (``builtins.`` dropped)."""
        dotted = next((n for n in self.exc_names if "." in n), self.exc_names[0] if self.exc_names else "Exception")
        return dotted.removeprefix("builtins.")

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.message.splitlines() if line.strip()), "")


@dataclass(frozen=True)
class Match:
    """A registry entry a failure matches; ``unexplained``: diverging tensors its ``diverging`` globs
    do not cover (a partial match); ``affected``: whether the installed versions are recorded as affected."""

    entry: KnownIssue
    affected: bool = True
    unexplained: tuple[str, ...] = ()
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def full(self) -> bool:
        return not self.unexplained

    def line(self, rest: str = "") -> str:
        """``matches known issue <id>: <title> <link>``, with what is partial or fixed about it; ``rest``: what
        explains the tensors it leaves out (a verdict: amplification of earlier rounding), else they may be new."""
        entry = self.entry
        text = f"matches known issue {entry.id}: {entry.title}" + (f" {entry.url}" if entry.url else "")
        if self.unexplained:
            shown = ", ".join(self.unexplained[:4]) + (f", +{len(self.unexplained) - 4} more"
                                                       if len(self.unexplained) > 4 else "")
            text += (f"\n  only in part: it covers {', '.join(entry.diverging)}, not {shown} "
                     f"({rest or 'a new problem?'})")
        if not self.affected:
            text += (f"\n  recorded as not affecting the installed versions (affects = {dict(entry.affects)}): "
                     "back again?")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.entry.id, "title": self.entry.title, "url": self.entry.url, "full": self.full,
                "unexplained": list(self.unexplained), "affected": self.affected, "reasons": list(self.reasons)}


def _raises_ok(entry: KnownIssue, failure: Failure) -> bool:
    wanted = entry.raises.strip()
    if not wanted:
        return False
    names = set(failure.exc_names)
    return wanted in names or f"builtins.{wanted}" in names


#: ``diverging`` globs that name no mechanism (any model's gradients, loss or outputs fit them)
GENERIC_GLOBS = ("grad *", "param *", "buffer *", "loss", "output*", "*")
_ATEN = re.compile(r"aten::[\w.]+")


def entry_fallbacks(entry: KnownIssue) -> set[str]:
    """The ``aten::`` ops an entry names (its title, status and notes): the CPU fallbacks that are its mechanism."""
    return set(_ATEN.findall(" ".join((entry.title, entry.status, entry.notes))))


def _kind_ok(entry: KnownIssue, failure: Failure) -> bool:
    if not failure.kind or entry.kind == failure.kind:
        return True
    # a graph check's failure whose recorded fallbacks are the entry's: a CPU-fallback entry explains it
    return (failure.kind, entry.kind) == ("graph_break", "cpu_fallback") \
        and bool(entry_fallbacks(entry) & set(failure.evidence))


def mechanism_present(entry: KnownIssue, failure: Failure) -> bool:
    """Whether the entry's mechanism is in the case, where the message alone cannot say: an entry recorded for other
    models (``models``) explains a model it does not list only through a diverging tensor a specific glob names
    (``buffer *running_var``) or a CPU fallback it names that the case was seen to run. An error's entry (its message
    is its mechanism), an entry without ``models`` and a model it lists are as before."""
    if entry.kind == "error" or not entry.models or not failure.model or failure.model in entry.models:
        return True
    import fnmatch

    specific = [g for g in entry.diverging if g not in GENERIC_GLOBS]
    if any(fnmatch.fnmatchcase(t, g) for t in failure.diverging for g in specific):
        return True
    return bool(entry_fallbacks(entry) & set(failure.evidence))


def match_failure(entries: Iterable[KnownIssue], failure: Failure) -> list[Match]:
    """The entries ``failure`` matches, best first: full matches before partial ones, entries that
    affect the installed versions before fixed ones, then registry order."""
    found: list[tuple[tuple[int, int, int], Match]] = []
    for order, entry in enumerate(entries):
        if entry.kind == "crash" or not entry.match or not _kind_ok(entry, failure):
            continue  # crashes are judged by the isolation plugin; a match needs a message pattern
        if not _raises_ok(entry, failure):
            continue
        if not entry.matches(failure.message) or not mechanism_present(entry, failure):
            continue
        if not entry.admits(failure.backend, failure.mode):
            continue
        reasons = [f"{entry.raises} matching {entry.match!r}", f"kind {entry.kind}"]
        if entry.backends:
            reasons.append(f"backend {failure.backend}")
        unexplained = tuple(entry.unexplained(failure.diverging))
        affected = entry.affected()
        match = Match(entry, affected, unexplained, tuple(reasons))
        found.append(((0 if match.full else 1, 0 if affected else 1, order), match))
    kept = [(rank, m) for rank, m in found if not _shadowed(m, [other for _, other in found], failure.diverging)]
    return [m for _, m in sorted(kept, key=lambda pair: pair[0])]


def not_yet_explained(entries: Iterable[KnownIssue], failure: Failure) -> tuple[str, ...]:
    """The diverging tensors the registry does not explain yet: those the best match leaves out (all of them
    where no entry matches, or where the best one explains every one: then they are its to diagnose)."""
    matches = match_failure(entries, failure)
    if matches and matches[0].unexplained:
        return matches[0].unexplained
    return failure.diverging


def _explained(match: Match, diverging: Sequence[str]) -> set[str]:
    return set(diverging) - set(match.unexplained)


def _shadowed(match: Match, matches: Sequence[Match], diverging: Sequence[str]) -> bool:
    """An entry explains a failure only through the tensors that distinguish it: one whose globs cover no diverging
    tensor that a narrower matching entry (fewer globs) does not cover too adds nothing (a running_var-only
    failure is the running_var entry's, not also that of an entry for running_var plus a step-2 gradient)."""
    if not match.entry.diverging or not diverging:
        return False
    mine = _explained(match, diverging)
    return any(other is not match and other.entry.diverging
               and len(other.entry.diverging) < len(match.entry.diverging)
               and mine <= _explained(other, diverging) for other in matches)


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        if "'" not in value and "\n" not in value:
            return f"'{value}'"  # a literal string: regexes stay readable
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def _toml(fields: Sequence[tuple[str, Any]]) -> list[str]:
    return ["[[issue]]", *(f"{name} = {_toml_value(value)}" for name, value in fields if value not in ("", [], (), {}))]


def declare_snippet(match: Match, failure: Failure) -> list[str]:
    """How to declare that the failing test is ``match``'s issue: the marker (the registry's entry as
    it is) or, in a ``--xla-known-issues-file``, the entry with this test and model added."""
    e = match.entry
    lines = [f"declare it: @pytest.mark.xla_known_issue({e.id!r}) on {failure.test or 'the test'}, or in a "
             "--xla-known-issues-file:"]
    tests = sorted({*e.tests, failure.test} - {""})
    models = sorted({*e.models, failure.model} - {""}) if e.models else []
    lines += _toml([("id", e.id), ("title", e.title), ("url", e.url), ("kind", e.kind), ("affects", dict(e.affects)),
                    ("raises", e.raises), ("match", e.match), ("tests", tests), ("backends", list(e.backends)),
                    ("modes", list(e.modes)), ("models", models), ("diverging", list(e.diverging))])
    return lines


def _slug(*parts: str) -> str:
    text = "-".join(p for p in parts if p)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "new-problem"


_NUMBER = re.compile(r"(0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:e[+-]?\d+)?)")


# a file-system path of two or more parts (/home/me/x/snap.json, C:\\x\\y): machine-specific, never proposed
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\'\"():,]+){2,}[/\\]?")


def without_paths(text: str) -> str:
    """``text`` with file-system paths replaced by ``…`` (a proposal holds no machine paths)."""
    return _PATH.sub("…", text)


def message_pattern(first_line: str, limit: int = 80) -> str:
    """A regex for a message's first line: cut at ``limit``, escaped, numbers, addresses and file-system
    paths generalized (a path names one machine's folders, not the problem)."""
    out = []
    for chunk_index, chunk in enumerate(_PATH.split(first_line.strip()[:limit])):
        if chunk_index:
            out.append(r"\S+")
        parts = _NUMBER.split(chunk)
        for index, part in enumerate(parts):
            if index % 2 == 0:
                out.append(re.escape(part).replace("\\ ", " "))
            else:
                out.append(r"0x[0-9a-f]+" if part.startswith("0x") else r"[\d.e+-]+")
    return "".join(out)


def diverging_globs(tensors: Sequence[str], exact: int = 5) -> list[str]:
    """Globs for a new entry's ``diverging``: the names themselves when few, else one glob per group and
    attribute (``buffer *.running_var``)."""
    names = list(dict.fromkeys(tensors))
    if len(names) <= exact:
        return names
    return list(dict.fromkeys(f"{n.split(' ', 1)[0]} *.{n.rsplit('.', 1)[-1]}" if " " in n else n for n in names))


def new_entry_snippet(failure: Failure, versions: dict[str, str | None]) -> list[str]:
    """A ``local:`` entry for a failure no entry matches (a TOML for ``--xla-known-issues-file``)."""
    issue_id = "local:" + _slug(failure.model, failure.stage.replace(" ", "-"), failure.exc_type.rsplit(".", 1)[-1])
    affects = {dist: f">={v.split('+')[0]}" for dist, v in versions.items() if v and dist in ("torch", "torch_xla")}
    diverging = diverging_globs(failure.diverging)
    lines = ["a new entry for a --xla-known-issues-file (search upstream first; write a minimal reproducer):"]
    kind = failure.kind or ("wrong_result" if "AssertionError" in failure.exc_names else "error")
    title = without_paths(failure.first_line)[:100]
    if failure.diverging:
        title = (f"{failure.model or 'the model'} diverges from eager on {failure.backend or 'the backend'}"
                 f" (first: {failure.diverging[0]})")
    raises = "AssertionError" if failure.op else failure.exc_type  # an op failure is an AssertionError
    lines += _toml([("id", issue_id), ("title", title), ("kind", kind),
                    ("affects", affects), ("raises", raises), ("match", message_pattern(failure.first_line)),
                    ("tests", [failure.test] if failure.test else []),
                    ("backends", [failure.backend] if failure.backend else []),
                    ("modes", [failure.mode] if failure.mode else []),
                    ("models", [failure.model] if failure.model and not failure.op else []),
                    ("ops", [failure.op] if failure.op else []), ("diverging", diverging),
                    ("notes", f"standalone reproducer: {failure.repro_file}" if failure.repro_file else "")])
    return lines
