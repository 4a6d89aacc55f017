"""The gate's rules and the comparison of a run with the expected file: pure functions returning findings.

Each rule compares one figure of one case and returns a :class:`Finding` (or ``None``: nothing to
say), labelled as in pytorch's ``check_accuracy.py``; :func:`compare` applies every rule to every
case and gives a :class:`GateResult`, whose :meth:`GateResult.failed` is the gate's verdict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from pytest_xla_dynamo.gating.expected import CaseRow
from pytest_xla_dynamo.gating.labels import (
    FAIL_BUT_FLAKY,
    FAILING,
    IMPROVED,
    MISSING,
    NOISY,
    PASS,
    PASS_BUT_FLAKY,
    REGRESSION,
    SEVERITY,
    SLOWER,
    UNRELIABLE,
    XFAIL,
    Key,
)
from pytest_xla_dynamo.gating.run import RunCase, TimingCase
from pytest_xla_dynamo.records import NOT_CAPTURED, PASSING


@dataclass(frozen=True)
class Finding:
    """What one rule found for one case."""

    label: str
    what: str  # "status", a graph field, "speedup" or "case"
    detail: str
    expected: str = ""
    actual: str = ""
    repro: str = ""


def is_pass(status: str) -> bool:
    """A passing status; :data:`NOT_CAPTURED` is not one (the backend's compiled path was never run)."""
    return status in PASSING


def status_rule(expected: str, actual: str, flaky: bool = False) -> Finding | None:
    """Expected vs. run status (``check_accuracy.py``): equal -> PASS or XFAIL; pass -> fail ->
    REGRESSION; fail -> pass -> IMPROVED; a change of a flaky case -> PASS_BUT_FLAKY or
    FAIL_BUT_FLAKY (by the run's status) instead of flipping the gate. ``None`` if either is unknown."""
    if not expected or not actual:
        return None
    if is_pass(expected) == is_pass(actual):
        if is_pass(actual):
            return Finding(PASS, "status", f"status {actual}", expected, actual)
        detail = f"status {actual}" if actual == expected else f"status {expected} -> {actual} (still failing)"
        return Finding(XFAIL, "status", detail, expected, actual)
    change = f"status {expected} -> {actual}"
    if NOT_CAPTURED in (expected, actual):  # a pass that compiled nothing is not a pass of the backend
        change += " (dynamo captured nothing)" if actual == NOT_CAPTURED else " (dynamo captures it now)"
    if flaky:
        return Finding(PASS_BUT_FLAKY if is_pass(actual) else FAIL_BUT_FLAKY, "status", f"{change} (flaky)",
                       expected, actual)
    return Finding(IMPROVED if is_pass(actual) else REGRESSION, "status", change, expected, actual)


def graph_status_rule(expected: str, actual: str) -> Finding | None:
    """The graphs suite's outcome: pass -> fail (a changed signature, a steady-state compile) is a
    REGRESSION, fail -> pass IMPROVED, a failure as expected XFAIL; ``None`` if either is unknown or both pass."""
    if not expected or not actual or (is_pass(expected) and is_pass(actual)):
        return None
    if is_pass(expected) == is_pass(actual):
        return Finding(XFAIL, "graph_status", f"graph suite {actual}", expected, actual)
    label = IMPROVED if is_pass(actual) else REGRESSION
    return Finding(label, "graph_status", f"graph suite {expected} -> {actual}", expected, actual)


def count_rule(what: str, expected: int | None, actual: int | None) -> Finding | None:
    """A graph figure that must not grow: more than expected -> REGRESSION, fewer -> IMPROVED,
    equal or unknown -> ``None``."""
    if expected is None or actual is None or expected == actual:
        return None
    label = REGRESSION if actual > expected else IMPROVED
    noun = {"graph_breaks": "graph breaks", "unique_graphs": "unique graphs", "fallbacks": "fallbacks",
            "recompiles": "steady-state recompiles"}.get(what, what)
    return Finding(label, what, f"{noun} {expected} -> {actual}", str(expected), str(actual))


def graph_break_rule(expected: int | None, actual: int | None) -> Finding | None:
    """A new graph break is a REGRESSION; fewer breaks are IMPROVED."""
    return count_rule("graph_breaks", expected, actual)


def fallback_rule(expected: int | None, actual: int | None) -> Finding | None:
    """A new CPU fallback (``aten::*`` counter) is a REGRESSION; fewer are IMPROVED."""
    return count_rule("fallbacks", expected, actual)


def recompile_rule(expected: int | None, actual: int | None) -> Finding | None:
    """A steady-state recompile beyond the expected count is a REGRESSION."""
    return count_rule("recompiles", expected, actual)


def unique_graphs_rule(expected: int | None, actual: int | None) -> Finding | None:
    """More unique graphs than expected is a REGRESSION; fewer are IMPROVED."""
    return count_rule("unique_graphs", expected, actual)


GRAPH_RULES = {"graph_breaks": graph_break_rule, "unique_graphs": unique_graphs_rule,
               "fallbacks": fallback_rule, "recompiles": recompile_rule}


def coverage_rule(expected: CaseRow, actual: CaseRow) -> Finding | None:
    """A pass that covers less of the backend than its expected pass (CPU fallbacks, a partial capture that were
    not there) is a REGRESSION, one that covers more IMPROVED; ``None`` unless both pass with a coverage known."""
    if not (expected.coverage and actual.coverage and is_pass(expected.status) and is_pass(actual.status)):
        return None
    if expected.coverage == actual.coverage:
        return None
    had, has = set(expected.coverage.split("+")) - {"full"}, set(actual.coverage.split("+")) - {"full"}
    label = REGRESSION if has - had else IMPROVED
    detail = f"pass ({expected.coverage}) -> pass ({actual.coverage})"
    return Finding(label, "coverage", detail, expected.coverage, actual.coverage)


def missing_rule(in_file: bool, in_run: bool) -> Finding | None:
    """A case in the expected file but not in the run, or the other way round: MISSING (reported)."""
    if in_file and not in_run:
        return Finding(MISSING, "case", "in the expected file, not run in this session")
    if in_run and not in_file:
        return Finding(MISSING, "case", "run, but not in the expected file (add it with --xla-update-expected)")
    return None


NOISE_Z = 2.0
"""The noise-aware speed gate's margin, in combined standard errors: a case is gated at the asked ratio only
when NOISE_Z x sqrt(baseline noise^2 + run noise^2) <= 1 - ratio (at 0.9: a combined noise of 5% or less).
Two standard errors keep a chance drop below the floor to ~2% of an unchanged case's runs where the noise
is normal, and cover the MAD's own uncertainty at R = 5 (:mod:`pytest_xla_dynamo.timing.noise`)."""


def noise_tolerance(baseline_noise: float | None, noise: float | None) -> float | None:
    """How far the speedup may drop by chance (relative): NOISE_Z x the two noises combined; None when
    either side has no noise figure (the plain ratio then)."""
    if baseline_noise is None or noise is None:
        return None
    return NOISE_Z * math.hypot(baseline_noise, noise)


def run_noise(noise: float | None, between: float | None, processes: int = 1) -> float | None:
    """This run's noise as the gate takes it: its own (within its processes), or, when the baseline says how far one
    process strays from another (``between``, :func:`pytest_xla_dynamo.gating.noise.between_noise`), that over
    sqrt(the run's processes) where it is the larger: a run of one process carries the whole shift."""
    if noise is None or between is None:
        return noise
    return max(noise, between / math.sqrt(max(processes, 1)))


def noise_aware_speedup_rule(baseline: float, actual: float, ratio: float, baseline_noise: float,
                             noise: float, between: bool = False) -> Finding | None:
    """The speed gate with both noises known. A case whose tolerance (:func:`noise_tolerance`) fits in the
    asked drop (1 - ``ratio``) is gated at ``ratio`` x baseline, as the plain rule. A noisier one cannot tell
    that drop from chance: below baseline x (1 - tolerance) it is still SLOWER (slower beyond its noise),
    else NOISY, a note that fails nothing and says the noise. ``between``: the run's noise is the spread between
    the baseline's processes (:func:`run_noise`), and the text says so."""
    combined = math.hypot(baseline_noise, noise)
    tolerance = NOISE_Z * combined
    asked = 1.0 - ratio
    run_text = f"this run ±{noise:.1%}" + (" from the spread between the baseline's processes" if between else "")
    noise_text = f"noise ±{combined:.1%} ({run_text}, baseline ±{baseline_noise:.1%})"
    figures = f"{baseline:.3g}", f"{actual:.3g}"
    if tolerance <= asked:
        floor = ratio * baseline
        if actual < floor:
            return Finding(SLOWER, "speedup", f"speedup {actual:.2f}x < {ratio:g} x baseline {baseline:.2f}x = "
                           f"{floor:.2f}x ({noise_text})", *figures)
        return None
    change = f"{asked:.0%}" if asked > 0 else f"ratio {ratio:g}"
    floor = baseline * max(0.0, 1.0 - tolerance)
    if actual < floor:
        return Finding(SLOWER, "speedup", f"speedup {actual:.2f}x < baseline {baseline:.2f}x x (1 - {NOISE_Z:g} x "
                       f"{combined:.1%}) = {floor:.2f}x: slower beyond its noise (too noisy to gate at {change}: "
                       f"{noise_text})", *figures)
    return Finding(NOISY, "speedup", f"cannot gate at {change}: {noise_text}, {NOISE_Z:g} x noise = {tolerance:.1%}; "
                   f"speedup {actual:.2f}x against baseline {baseline:.2f}x (the floor at this noise: {floor:.2f}x)",
                   *figures)


def speedup_rule(baseline: float | None, actual: float | None, ratio: float, unreliable: str = "", *,
                 baseline_noise: float | None = None, noise: float | None = None,
                 between: bool = False) -> Finding | None:
    """The speedup gate: a speedup below ``ratio`` x the baseline speedup is SLOWER (a regression). An
    ``unreliable`` figure (the reason given) is never compared: UNRELIABLE, a note that fails nothing. With
    the noise of both the baseline and this run (:mod:`pytest_xla_dynamo.timing.noise`) the rule is
    :func:`noise_aware_speedup_rule`; without either (a baseline written before the noise was recorded, a
    run of fewer than 3 timed runs) the plain ratio, as before."""
    if baseline is None or actual is None:
        return None
    if unreliable:
        return Finding(UNRELIABLE, "speedup", f"speed gate skipped: the timing is unreliable ({unreliable})",
                       f"{baseline:.3g}", f"{actual:.3g}")
    if baseline_noise is not None and noise is not None:
        return noise_aware_speedup_rule(baseline, actual, ratio, baseline_noise, noise, between)
    floor = ratio * baseline
    if actual < floor:
        return Finding(SLOWER, "speedup", f"speedup {actual:.2f}x < {ratio:g} x baseline {baseline:.2f}x "
                       f"= {floor:.2f}x", f"{baseline:.3g}", f"{actual:.3g}")
    return None


def pair_speedup_rule(pair_ratio: float, pair_noise: float | None, ratio: float, base: float | None,
                      actual: float, unreliable: str = "") -> Finding | None:
    """The A/B speed gate (``--xla-timing-base-python``): this build against the base build measured beside it, in
    pairs of processes; ``pair_ratio`` is the median of the pairs' speedup ratios (this / base), ``pair_noise`` its
    relative standard error (:func:`pytest_xla_dynamo.timing.across.pair`). As :func:`noise_aware_speedup_rule` with
    one noise: where NOISE_Z x the noise fits in the asked drop the case is gated at ``ratio`` (SLOWER below it),
    else SLOWER only below 1 - NOISE_Z x noise and NOISY otherwise; without a noise figure the plain ratio.
    ``unreliable``: never compared (UNRELIABLE)."""
    figures = f"{base:.3g}" if base is not None else "", f"{actual:.3g}"
    paired = f"speedup {actual:.2f}x vs the base build's {base or 0:.2f}x, paired ratio {pair_ratio:.3f}"
    if unreliable:
        return Finding(UNRELIABLE, "speedup", f"speed gate skipped: the timing is unreliable ({unreliable})", *figures)
    asked = 1.0 - ratio
    if pair_noise is None or NOISE_Z * pair_noise <= asked:
        noise_text = f" (noise ±{pair_noise:.1%} over the pairs)" if pair_noise is not None else ""
        if pair_ratio < ratio:
            return Finding(SLOWER, "speedup", f"{paired} < {ratio:g}{noise_text}", *figures)
        return None
    tolerance = NOISE_Z * pair_noise
    change = f"{asked:.0%}" if asked > 0 else f"ratio {ratio:g}"
    floor = max(0.0, 1.0 - tolerance)
    noise_text = f"noise ±{pair_noise:.1%} over the pairs, {NOISE_Z:g} x noise = {tolerance:.1%}"
    if pair_ratio < floor:
        return Finding(SLOWER, "speedup", f"{paired} < 1 - {NOISE_Z:g} x {pair_noise:.1%} = {floor:.3f}: slower beyond "
                       f"its noise (too noisy to gate at {change}: {noise_text})", *figures)
    return Finding(NOISY, "speedup", f"cannot gate at {change}: {noise_text}; {paired} (the floor at this noise: "
                   f"{floor:.3f})", *figures)


def overall_label(findings: Iterable[Finding]) -> str:
    """The most severe label of ``findings`` (PASS when there are none)."""
    labels = {f.label for f in findings}
    return next((label for label in SEVERITY if label in labels), PASS)


@dataclass
class CaseVerdict:
    """One case's findings, its overall label, and what they were computed from."""

    key: Key
    label: str
    findings: list[Finding]
    expected: CaseRow | None = None
    run: RunCase | None = None
    speedup: float | None = None

    def has(self, *labels: str) -> bool:
        return any(f.label in labels for f in self.findings)

    @property
    def flaky(self) -> bool:
        return bool(self.run and self.run.row.flaky) or bool(self.expected and self.expected.flaky)

    def repro(self, labels: Iterable[str]) -> str:
        """The repro command of the first finding with one of ``labels`` that has one."""
        wanted = set(labels)
        return next((f.repro for f in self.findings if f.label in wanted and f.repro), "")

    def details(self, labels: Iterable[str]) -> str:
        """The details of the findings with one of ``labels``, joined with ``; ``."""
        wanted = set(labels)
        return "; ".join(f.detail for f in self.findings if f.label in wanted)


@dataclass
class GateResult:
    """Every case's verdict; :meth:`failed` is the gate's."""

    verdicts: list[CaseVerdict]
    compared: bool = True  # an expected file was compared (not only the speedup gate)

    def with_label(self, *labels: str) -> list[CaseVerdict]:
        """Cases with a finding of one of ``labels`` (a case can be listed under several labels)."""
        return [v for v in self.verdicts if v.has(*labels)]

    def counts(self) -> Counter[str]:
        return Counter(v.label for v in self.verdicts)

    def failed(self, strict_improved: bool = False) -> bool:
        labels = FAILING | ({IMPROVED} if strict_improved else set())
        return any(v.has(*labels) for v in self.verdicts)


def compare_case(expected: CaseRow | None, run: RunCase | None, *, compare_rows: bool = True) -> list[Finding]:
    """Every row rule on one case (status, graph figures, missing), with the repro of its source."""
    findings: list[Finding] = []
    if compare_rows:
        missing = missing_rule(expected is not None, run is not None)
        if missing is not None:
            findings.append(missing)
    if expected is None or run is None or not compare_rows:
        return findings
    flaky = expected.flaky or run.row.flaky
    status = status_rule(expected.status, run.row.status, flaky)
    if status is None and expected.status and not run.row.status:  # the case ran (graphs, timing) but no parity
        status = Finding(MISSING, "status", f"status {expected.status} expected, not measured in this run (no parity "
                         "record: the parity test did not run, or its worker died)", expected.status, "")
    if status is not None:
        if flaky and status.label in (PASS, XFAIL) and run.row.flaky:
            status = replace(status, detail=f"{status.detail} (flaky vote: {', '.join(run.runs) or 'not unanimous'})")
        findings.append(replace(status, repro=run.status_repro))
    coverage = coverage_rule(expected, run.row)
    if coverage is not None:
        findings.append(replace(coverage, repro=run.status_repro))
    graph_status = graph_status_rule(expected.graph_status, run.row.graph_status)
    if graph_status is not None:
        regressed = graph_status.label == REGRESSION and run.graphs_message
        detail = f"{graph_status.detail}: {run.graphs_message}" if regressed else graph_status.detail
        findings.append(replace(graph_status, detail=detail, repro=run.graphs_repro or run.status_repro))
    for name, rule in GRAPH_RULES.items():
        found = rule(getattr(expected, name), getattr(run.row, name))
        if found is not None:
            findings.append(replace(found, repro=run.graphs_repro or run.status_repro))
    return findings


def compare(expected: Mapping[Key, CaseRow] | None, run: Mapping[Key, RunCase], *,
            timing: Mapping[Key, TimingCase] | None = None, baseline: Mapping[Key, float] | None = None,
            min_speedup_ratio: float | None = None, baseline_noise: Mapping[Key, float] | None = None,
            between_noise: Mapping[Key, float] | None = None) -> GateResult:
    """Apply every rule to every case of the expected file, the run and (with a ratio) the timing
    (``baseline_noise``: the stored baseline's speedup noise per case, for the noise-aware rule; ``between_noise``:
    the spread of one process's speedup per case, where the baseline was measured in several, :func:`run_noise`). A
    timing case measured in pairs with the base build (``--xla-timing-base-python``) is gated by
    :func:`pair_speedup_rule`, without a stored baseline."""
    compare_rows = expected is not None
    expected = expected or {}
    timing = timing or {}
    paired = any(tcase.pair_ratio is not None for tcase in timing.values())
    speed_gate = min_speedup_ratio is not None and (baseline is not None or paired)
    keys = set(run) | set(expected) | (set(timing) if speed_gate else set())
    verdicts = []
    for key in sorted(keys):
        findings = compare_case(expected.get(key), run.get(key), compare_rows=compare_rows)
        tcase = timing.get(key)
        if speed_gate and tcase is not None and tcase.pair_ratio is not None:
            assert min_speedup_ratio is not None
            found = pair_speedup_rule(tcase.pair_ratio, tcase.pair_noise, min_speedup_ratio, tcase.base_speedup,
                                      tcase.speedup, tcase.unreliable)
            if found is not None:
                findings.append(replace(found, repro=tcase.repro))
        elif speed_gate and tcase is not None and baseline is not None:
            assert min_speedup_ratio is not None
            noise = run_noise(tcase.noise, (between_noise or {}).get(key), tcase.processes)
            found = speedup_rule(baseline.get(key), tcase.speedup, min_speedup_ratio, tcase.unreliable,
                                 baseline_noise=(baseline_noise or {}).get(key), noise=noise,
                                 between=noise is not None and noise != tcase.noise)
            if found is not None:
                findings.append(replace(found, repro=tcase.repro))
        verdicts.append(CaseVerdict(key, overall_label(findings), findings, expected.get(key), run.get(key),
                                    tcase.speedup if tcase else None))
    return GateResult(verdicts, compared=compare_rows)
