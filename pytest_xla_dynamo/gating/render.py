"""Rendering the gate's result: the one-line headline, the Markdown summary and the terminal section.

Pure functions of a :class:`~pytest_xla_dynamo.gating.rules.GateResult` and the run's cases; the
plugin writes what they return.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_xla_dynamo.gating.expected import GRAPH_FIELDS
from pytest_xla_dynamo.gating.labels import (
    FAIL_BUT_FLAKY,
    FAILING,
    FLAKY_LABELS,
    GATE_FAILED_EXIT,
    IMPROVED,
    MISSING,
    NOISY,
    PASS,
    PASS_BUT_FLAKY,
    SEVERITY,
    UNRELIABLE,
    XFAIL,
    Key,
    case_name,
)
from pytest_xla_dynamo.gating.rules import GateResult
from pytest_xla_dynamo.gating.run import RunCase
from pytest_xla_dynamo.repro import with_prefix

#: A terminal line and its markup (keywords of ``TerminalReporter.write_line``: red, green, yellow, bold).
Line = tuple[str, dict[str, bool]]


def _fmt(value: object) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def headline(result: GateResult | None, *, failed_tests: int, strict_improved: bool) -> tuple[bool, str]:
    """``(ok, text)``: the session verdict as the gate sees it."""
    problems = []
    if result is not None:
        regressions = result.with_label(*FAILING)
        if regressions:
            problems.append(_plural(len(regressions), "regression"))
        if strict_improved and result.with_label(IMPROVED):
            problems.append(f"{len(result.with_label(IMPROVED))} improved (xla_strict_improved)")
    gate_failed = bool(problems)
    if failed_tests:
        problems.append(_plural(failed_tests, "failed test"))
    notes = []
    if result is not None:
        counts = result.counts()
        notes.append(f"{_plural(counts[PASS] + counts[XFAIL], 'case')} as expected")
        for label in (IMPROVED, PASS_BUT_FLAKY, FAIL_BUT_FLAKY, UNRELIABLE, NOISY, MISSING):
            if counts[label]:
                notes.append(f"{counts[label]} {label.lower().replace('_', ' ')}")
    if problems:  # when only tests failed, say what the gate found
        gate = "" if gate_failed or not notes else "; gate: " + ", ".join(notes)
        return False, "FAILED: " + ", ".join(problems) + gate
    return True, "PASSED" + (": " + ", ".join(notes) if notes else "")


def _markdown_sections(result: GateResult, repro_prefix: str) -> list[str]:
    """The Regressions, Improved, Missing and Flaky sections of the summary."""
    lines: list[str] = []
    regressions = result.with_label(*FAILING)
    if regressions:
        lines += [f"### Regressions ({len(regressions)})", ""]
        for v in regressions:
            why = ""
            if v.run is not None and v.run.message and any(f.what == "status" for f in v.findings
                                                           if f.label in FAILING):
                first = v.run.message.strip().splitlines()[0] if v.run.message.strip() else ""
                why = f" — {first[:200]}" if first else ""
            lines.append(f"- **{case_name(v.key)}**: {v.details(FAILING)}{why}")
            if v.run is not None and v.run.triage:
                lines.append(f"  - triage: {v.run.triage}")
            repro = with_prefix(v.repro(FAILING), repro_prefix)
            if repro:
                lines += ["", "  ```bash", f"  {repro}", "  ```"]
        lines.append("")
    improved = result.with_label(IMPROVED)
    if improved:
        lines += [f"### Improved ({len(improved)})", ""]
        lines += [f"- **{case_name(v.key)}**: {v.details([IMPROVED])}" for v in improved]
        lines += ["", "Update the expected file with `--xla-update-expected` if the change is intended.", ""]
    lines += _markdown_speed_notes(result)
    missing = result.with_label(MISSING)
    if missing:
        lines += [f"### Missing ({len(missing)})", ""]
        body = [f"- {case_name(v.key)}: {v.details([MISSING])}" for v in missing]
        if len(body) > 10:
            lines += ["<details><summary>cases in only one of the expected file and the run</summary>", ""]
            lines += [*body, "", "</details>"]
        else:
            lines += body
        lines.append("")
    flaky = [v for v in result.verdicts if v.has(*FLAKY_LABELS) or (v.run is not None and v.run.row.flaky)]
    if flaky:
        lines += [f"### Flaky ({len(flaky)})", ""]
        for v in flaky:
            runs = f" (runs: {', '.join(v.run.runs)})" if v.run is not None and v.run.runs else ""
            detail = "; ".join(f.detail for f in v.findings if f.what == "status") or "flaky"
            lines.append(f"- {case_name(v.key)}: {v.label}: {detail}{runs}")
        lines.append("")
    return lines


def _markdown_speed_notes(result: GateResult) -> list[str]:
    """The speed gate's notes: cases it could not gate (too noisy for the asked ratio; timing unreliable)."""
    lines: list[str] = []
    for label, title, why in (
            (NOISY, "Speed gate: too noisy to gate", "Their noise is too large to tell the asked change from chance "
             "(reported, not failing): measure them with more `--xla-repeat` or a longer `xla_min_run_time`, "
             "on a quieter machine, and record the baseline again (A/B: more pairs, `--xla-timing-processes`)."),
            (UNRELIABLE, "Speed gate: timing unreliable", "Disturbed by other load (reported, not failing).")):
        found = result.with_label(label)
        if found:
            lines += [f"### {title} ({len(found)})", "", why, ""]
            lines += [f"- **{case_name(v.key)}**: {v.details([label])}" for v in found]
            lines.append("")
    return lines


def _markdown_table(result: GateResult | None, run: Mapping[Key, RunCase]) -> list[str]:
    """The table of all cases (run or expected) with their figures and verdicts."""
    by_key = {v.key: v for v in (result.verdicts if result is not None else [])}
    keys = sorted(set(run) | set(by_key))
    if not keys:
        return []
    lines = ["### All cases", "",
             "| model | backend | mode | status | graph suite | breaks | graphs | fallbacks | recompiles | speedup"
             " | verdict |",
             "|---|---|---|---|---|--:|--:|--:|--:|--:|---|"]
    for key in keys:
        case = run.get(key)
        verdict = by_key.get(key)
        if case is None:  # not run: show what the expected file says, in parentheses
            exp = verdict.expected if verdict is not None else None
            cells = [*key] + [f"({_fmt(getattr(exp, f))})" if exp is not None else "–"
                              for f in ("status", "graph_status", *GRAPH_FIELDS)]
        else:
            cells = [*key, _fmt(case.row.status), _fmt(case.row.graph_status)] + [
                _fmt(getattr(case.row, f)) for f in GRAPH_FIELDS]
        cells.append(_fmt(verdict.speedup if verdict else None))
        cells.append(verdict.label if verdict is not None else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def render_markdown(result: GateResult | None, run: Mapping[Key, RunCase], *, failed_tests: int = 0,
                    strict_improved: bool = False, expected_path: Path | None = None,
                    shard_line: str = "", update_line: str = "", repro_prefix: str = "pytest",
                    gating: bool = True) -> str:
    """The Markdown summary (fit for ``$GITHUB_STEP_SUMMARY``): verdict, regressions with their
    repro commands, improved, missing, flaky, then a compact table of all cases.

    ``gating=False`` (``--xla-update-expected``): the verdict is the tests' alone and the sections
    list the changes written to the expected file."""
    ok, text = headline(result if gating else None, failed_tests=failed_tests, strict_improved=strict_improved)
    lines = [f"## {'✅' if ok else '❌'} xla-dynamo: {text}", ""]
    facts = []
    if expected_path is not None:
        facts.append(f"expected file `{expected_path}`")
    facts.append(f"{len(run)} cases run")
    if shard_line:
        facts.append(shard_line)
    lines += [" · ".join(facts), ""]
    if update_line:
        lines += [update_line, ""]
    if not gating and result is not None:
        lines += ["Not gating (`--xla-update-expected`): the sections below are the changes against the "
                  "previous expected file.", ""]
    if result is not None:
        lines += _markdown_sections(result, repro_prefix)
    lines += _markdown_table(result, run)
    return "\n".join(lines)


def terminal_lines(result: GateResult | None, *, updating: bool, strict_improved: bool,
                   repro_prefix: str = "pytest") -> list[Line]:
    """The gate's findings for the terminal section: counts, regressions with repro, improved, flaky,
    missing, then the verdict (``updating``: the changes written instead of a verdict)."""
    if result is None:
        return []
    lines: list[Line] = []
    if updating:
        changed = result.with_label(*FAILING, IMPROVED, *FLAKY_LABELS)
        lines.append(("changes against the previous expected file (written, not gating):" if changed else
                      "no changes against the previous expected file", {}))
    else:
        counts = result.counts()
        lines.append(("cases: " + ", ".join(f"{counts[label]} {label}" for label in SEVERITY if counts[label]), {}))
    for title, labels in (("REGRESSION", FAILING), ("IMPROVED", (IMPROVED,)), ("FLAKY", tuple(FLAKY_LABELS))):
        for v in result.with_label(*labels):
            label = next(f.label for f in v.findings if f.label in labels)
            lines.append((f"{label:<15} {case_name(v.key)}: {v.details(labels)}",
                          {"red": title == "REGRESSION", "green": title == "IMPROVED", "yellow": title == "FLAKY"}))
            repro = with_prefix(v.repro(labels), repro_prefix)
            if repro and title == "REGRESSION":
                lines.append((f"    reproduce: {repro}", {}))
    for label in (UNRELIABLE, NOISY):
        for v in result.with_label(label):
            lines.append((f"{label:<15} {case_name(v.key)}: {v.details([label])}; reported, not failing",
                          {"yellow": True}))
    missing = result.with_label(MISSING)
    if missing and not updating:
        shown = ", ".join(case_name(v.key) for v in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        noun = "case" if len(missing) == 1 else "cases"
        lines.append((f"MISSING         {len(missing)} {noun} ({shown}{more}); reported, not failing", {}))
    return lines


def verdict_line(result: GateResult | None, *, updating: bool, strict_improved: bool) -> Line | None:
    """The terminal's last gate line: the verdict (with the exit status when failing), or "not gating"."""
    if result is None:
        return None
    if updating:
        return "xla-dynamo gate: not gating (--xla-update-expected)", {}
    text = headline(result, failed_tests=0, strict_improved=strict_improved)[1]
    if result.failed(strict_improved):
        return f"xla-dynamo gate {text} (exit status {GATE_FAILED_EXIT})", {"red": True, "bold": True}
    return f"xla-dynamo gate {text}", {"green": True}
