"""The triage of one failing case: what it is, where it broke, what it matches, and how it reads.

A :class:`Triage` is filled by the engine that ran the case (model, backend, mode, harness status,
repro command, the diverging tensors, and where asked the localization and the graph-split
diagnosis) or, for a test outside the engines, from the test's parameters; :meth:`Triage.analyze`
matches it against the registry. It renders as the header printed on top of the failure
(:meth:`Triage.header`), one line for the Markdown summary (:meth:`Triage.line`) and JSON
(:meth:`Triage.to_dict`). No torch here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_xla_dynamo.core.stages import Where, class_names, where_of
from pytest_xla_dynamo.known_issues.registry import KnownIssue
from pytest_xla_dynamo.triage.matching import Failure, Match, declare_snippet, kind_of, match_failure, new_entry_snippet

TITLE = "xla-dynamo triage"
MESSAGE_LINES = 3  # lines of the exception message shown in the header
REFUSED = "refused"  # the classification of a case refused before it ran (Triage.refuse)


@dataclass
class Triage:
    """One failing case, triaged (see the module docstring)."""

    test: str
    nodeid: str = ""
    model: str = ""
    backend: str = ""
    mode: str = ""
    status: str = ""
    where: Where | None = None
    compile_part: str = ""
    exc_names: tuple[str, ...] = ()
    message: str = ""
    repro: str = ""
    known: str = ""  # the registry entry applied to this test at collection, if any
    known_action: str = ""  # what the registry did with it (xfail, regression, run, skip)
    diverging: tuple[str, ...] = ()
    divergence: list[str] = field(default_factory=list)  # the grouped divergence lines
    localization: list[str] = field(default_factory=list)
    graph_split: list[str] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)
    snippet: list[str] = field(default_factory=list)
    analyzed: bool = False
    # what the failure is, where the harness can tell it is not the backend's problem (eager's fast path,
    # an ill-conditioned gradient, a missing snapshot): shown as the verdict, and no new entry is proposed
    verdict: list[str] = field(default_factory=list)
    no_proposal: str = ""  # why no known-issue entry is proposed ("" = propose one when nothing matches)
    classification: str = ""  # a short name of the verdict (eager_fast_path, ill_conditioned, harness)
    # entries (ids, or id prefixes) a diagnosis disproved: not offered as matches (the causal check found no sign
    # flip that explains the failure: local:activation-sign-flip-grads is not its cause), with the reason
    ruled_out: dict[str, str] = field(default_factory=dict)
    op: str = ""  # an op case's OpInfo id (the op suite)
    repro_file: str = ""  # its standalone reproducer (--xla-write-repro), named in a proposed entry
    evidence: tuple[str, ...] = ()  # what the case was seen to run (CPU fallbacks): an entry's mechanism present

    @classmethod
    def from_exception(cls, exc: BaseException, *, test: str, nodeid: str = "", **fields: Any) -> Triage:
        """A triage of ``exc``: its classes, message, and the stage written on it."""
        from pytest_xla_dynamo.core.stages import compile_part

        message = str(exc)
        diverging = tuple(getattr(exc, "diverging", None) or ())
        return cls(test=test, nodeid=nodeid, where=where_of(exc), compile_part=compile_part(exc),
                   exc_names=tuple(class_names(exc)), message=message, diverging=diverging, **fields)

    def refuse(self, why: str) -> None:
        """A case the harness refused before it ran (its model draws random numbers eager and XLA draw differently):
        the test's to fix, so no registry entry is matched and none is proposed."""
        self.verdict, self.classification = [f"refused before it ran: {why}"], REFUSED
        self.no_proposal = "the case was refused before it ran (the test's to fix, not an upstream problem)"

    @property
    def exc_type(self) -> str:
        return self.failure().exc_type

    @property
    def kind(self) -> str:
        return kind_of(self.status) if self.status else ("wrong_result" if self.diverging else "")

    def failure(self) -> Failure:
        return Failure(exc_names=self.exc_names, message=self.message, kind=self.kind,
                       stage=self.where.stage if self.where else "", backend=self.backend, mode=self.mode,
                       model=self.model, test=self.test, diverging=self.diverging, op=self.op,
                       repro_file=self.repro_file, evidence=self.evidence)

    def analyze(self, entries: Iterable[KnownIssue], versions: Mapping[str, str | None]) -> Triage:
        """Match against the registry's ``entries`` (once) and prepare the snippet to declare the
        failure: the best match's, else a new ``local:`` entry's."""
        if self.analyzed:
            return self
        failure = self.failure()
        self.matches = [m for m in match_failure(entries, failure)
                        if not any(m.entry.id.startswith(prefix) for prefix in self.ruled_out)
                        and self.classification != REFUSED]  # a refused case ran nothing an entry could explain
        if self.known and self.known_action in ("xfail", "run"):
            self.snippet = []  # declared already: the registry applied it
        elif self.matches:
            self.snippet = declare_snippet(self.matches[0], failure)
        elif self.no_proposal:
            self.snippet = []  # not an upstream problem: nothing to declare
        else:
            self.snippet = new_entry_snippet(failure, dict(versions))
        self.analyzed = True
        return self

    # --- rendering ------------------------------------------------------------------------------------------

    def stage_text(self) -> str:
        if self.where is None:
            return f"not in a case step ({self.compile_part})" if self.compile_part else "not in a case step"
        return self.where.describe(self.compile_part)

    def error_lines(self) -> list[str]:
        lines = [line for line in self.message.strip().splitlines() if line.strip()]
        short = self.exc_type.rsplit(".", 1)[-1]
        head = [f"{short}: {lines[0] if lines else ''}".rstrip(": ")]
        if self.status == "fail_accuracy":
            return head  # the divergence lines say the rest
        rest = lines[1:MESSAGE_LINES]
        more = len(lines) - MESSAGE_LINES
        return head + [f"  {line[:200]}" for line in rest] + ([f"  ... ({more} more lines below)"] if more > 0 else [])

    def known_lines(self) -> list[str]:
        lines: list[str] = []
        if self.known:
            what = {"xfail": "strict xfail", "run": "ignored (--xla-known-issues=run)",
                    "regression": "a regression test (recorded as fixed)"}.get(self.known_action, self.known_action)
            lines.append(f"registry: {self.known} applies to this test ({what})")
        # a verdict that is not the backend's (amplification of earlier rounding) explains what a partial match leaves
        rest = f"explained by the verdict: {self.classification.replace('_', ' ')}" \
            if self.verdict and self.no_proposal and self.classification else ""
        lines += [m.line(rest) for m in self.matches[:2]]
        lines += [f"not {prefix}*: {why}" for prefix, why in self.ruled_out.items()]
        if not self.matches and self.no_proposal:
            lines.append(f"no known-issue entry proposed: {self.no_proposal}")
        elif not self.matches and not self.known:
            lines.append("no entry of the registry matches (built-in and downstream)")
        return lines

    def header(self) -> list[str]:
        """The lines printed on top of the failure."""
        case = " / ".join(p for p in (self.model, self.backend, self.mode) if p)
        out = [f"{TITLE}: {case or self.test}" + (f" ({self.status})" if self.status else "")]
        out.append(f"  stage:     {self.stage_text()}")
        error = self.error_lines()
        out.append(f"  error:     {error[0]}")
        out += [f"             {line}" for line in error[1:]]
        for label, block in (("verdict:", self.verdict), ("diverged:", self.divergence),
                             ("module:", self.localization), ("graphs:", self.graph_split)):
            out += [f"  {label if i == 0 else '':<10} {line}" for i, line in enumerate(block)]
        for i, line in enumerate(self.known_lines()):
            for j, part in enumerate(line.splitlines()):
                out.append(f"  {'known:' if i == 0 and j == 0 else '':<10} {part}")
        if self.snippet:
            out.append(f"  {'':<10} {self.snippet[0]}")
            out += [f"  {'':<12} {line}" for line in self.snippet[1:]]
        if self.repro:
            out.append(f"  reproduce: {self.repro}")
        return out

    def line(self) -> str:
        """One line: stage, the best match (or none), the diverging module."""
        parts = [f"{self.where.stage if self.where else 'outside a step'}"]
        if self.verdict:
            parts.append(self.verdict[0])
        if self.matches:
            best = self.matches[0]
            parts.append(f"matches {best.entry.id}" + ("" if best.full else " in part"))
        elif self.known:
            parts.append(f"registry {self.known}")
        elif self.no_proposal:
            parts.append("no known issue proposed")
        else:
            parts.append("no known issue matches")
        if self.localization:
            parts.append(self.localization[0])
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "model": self.model, "backend": self.backend, "mode": self.mode,
                "status": self.status, "where": self.where.to_dict() if self.where else None,
                "compile": self.compile_part, "exception": self.exc_type,
                "first_line": self.error_lines()[0], "known": self.known, "known_action": self.known_action,
                "matches": [m.to_dict() for m in self.matches], "snippet": self.snippet,
                "diverging": list(self.diverging), "localization": self.localization,
                "graph_split": self.graph_split, "repro": self.repro, "line": self.line(),
                "verdict": self.verdict, "classification": self.classification, "no_proposal": self.no_proposal}
