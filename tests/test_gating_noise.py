"""The noise-aware speed gate (issue 31): the rule (pure), the noise read from records and baselines, how the
gate shows NOISY; and one real session (tiny model on XLA:CPU, pytester subprocess) with calibrated runs,
the noise in the JSON record, and a stored baseline that makes one case SLOWER at the asked ratio, one
NOISY and one (no noise figure: an old baseline) SLOWER by the plain ratio."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sample_data import TINY_CONFTEST, benchmark_script, timing_figures, timing_record
from sample_data import gating_record as rec

from pytest_xla_dynamo.gating import labels as lb
from pytest_xla_dynamo.gating import rules as r
from pytest_xla_dynamo.gating.noise import baseline_noise, between_noise, noise_note, record_noise
from pytest_xla_dynamo.gating.render import headline, render_markdown, terminal_lines
from pytest_xla_dynamo.gating.run import (
    TimingBaseline,
    load_timing_baseline,
    timing_from_records,
)
from pytest_xla_dynamo.records import UNRELIABLE
from pytest_xla_dynamo.timing import calibrate, noise
from pytest_xla_dynamo.timing.comparable import MeasuredWith, baseline_mismatch
from pytest_xla_dynamo.timing.settings import TimingSettings

# --- the rule ------------------------------------------------------------------------------------------


def test_without_either_noise_the_plain_ratio_as_before() -> None:
    for kw in ({}, {"baseline_noise": 0.01}, {"noise": 0.01}):
        slower = r.speedup_rule(1.0, 0.89, 0.9, **kw)  # type: ignore[arg-type]
        assert slower is not None and slower.label == lb.SLOWER and "noise" not in slower.detail
        assert r.speedup_rule(1.0, 0.9, 0.9, **kw) is None  # type: ignore[arg-type]
        # a huge noise on one side only changes nothing either
    assert r.speedup_rule(1.0, 0.5, 0.9, noise=0.9).label == lb.SLOWER  # type: ignore[union-attr]


def test_a_stable_case_gates_at_the_asked_ratio() -> None:
    """Noise 1% on each side: 2 x 1.4% = 2.8% fits in the 10% asked; a 10% drop is caught, 9% is not."""
    caught = r.speedup_rule(1.0, 0.899, 0.9, baseline_noise=0.01, noise=0.01)
    assert caught is not None and caught.label == lb.SLOWER
    assert caught.detail == ("speedup 0.90x < 0.9 x baseline 1.00x = 0.90x (noise ±1.4% (this run ±1.0%, "
                             "baseline ±1.0%))")
    assert r.speedup_rule(1.0, 0.91, 0.9, baseline_noise=0.01, noise=0.01) is None
    assert r.speedup_rule(1.0, 1.5, 0.9, baseline_noise=0.01, noise=0.01) is None


def test_the_boundary_of_stable() -> None:
    """2 x combined == 1 - ratio is still gated at the ratio; a hair more is NOISY."""
    edge = 0.05 / math.sqrt(2)  # combined exactly 5%
    assert r.noise_tolerance(edge, edge) == pytest.approx(0.1)
    assert r.speedup_rule(1.0, 0.95, 0.9, baseline_noise=edge * 0.999, noise=edge * 0.999) is None
    noisy = r.speedup_rule(1.0, 0.95, 0.9, baseline_noise=edge * 1.01, noise=edge * 1.01)
    assert noisy is not None and noisy.label == lb.NOISY
    assert r.noise_tolerance(None, 0.1) is None and r.noise_tolerance(0.1, None) is None


def test_a_noisy_case_says_so_instead_of_passing_or_failing() -> None:
    """Noise 6% + 4%: 2 x 7.2% = 14.4% > 10%: a 12% drop cannot be told from chance."""
    found = r.speedup_rule(1.0, 0.88, 0.9, baseline_noise=0.04, noise=0.06)
    assert found is not None and found.label == lb.NOISY
    assert found.detail.startswith("cannot gate at 10%: noise ±7.2% (this run ±6.0%, baseline ±4.0%), "
                                   "2 x noise = 14.4%; speedup 0.88x against baseline 1.00x")
    assert "(the floor at this noise: 0.86x)" in found.detail
    # unchanged: NOISY too (not a silent pass)
    assert r.speedup_rule(1.0, 1.0, 0.9, baseline_noise=0.04, noise=0.06).label == lb.NOISY  # type: ignore[union-attr]
    assert r.speedup_rule(1.0, 1.3, 0.9, baseline_noise=0.04, noise=0.06).label == lb.NOISY  # type: ignore[union-attr]


def test_a_noisy_case_is_still_slower_beyond_its_noise() -> None:
    found = r.speedup_rule(2.0, 1.5, 0.9, baseline_noise=0.04, noise=0.06)
    assert found is not None and found.label == lb.SLOWER
    assert found.detail == ("speedup 1.50x < baseline 2.00x x (1 - 2 x 7.2%) = 1.71x: slower beyond its noise (too "
                            "noisy to gate at 10%: noise ±7.2% (this run ±6.0%, baseline ±4.0%))")


def test_noise_beyond_the_whole_speedup_gates_nothing() -> None:
    found = r.speedup_rule(2.0, 0.01, 0.9, baseline_noise=0.5, noise=0.5)
    assert found is not None and found.label == lb.NOISY and "the floor at this noise: 0.00x" in found.detail


def test_other_ratios_name_their_drop() -> None:
    assert "cannot gate at 5%" in r.speedup_rule(1.0, 1.0, 0.95, baseline_noise=0.03, noise=0.03).detail  # type: ignore[union-attr]
    assert r.speedup_rule(1.0, 0.94, 0.95, baseline_noise=0.01, noise=0.01).label == lb.SLOWER  # type: ignore[union-attr]
    assert r.speedup_rule(1.0, 0.75, 0.7, baseline_noise=0.06, noise=0.06) is None  # 17% tolerance fits in 30%
    assert "cannot gate at ratio 1" in r.speedup_rule(1.0, 1.0, 1.0, baseline_noise=0.01, noise=0.01).detail  # type: ignore[union-attr]


def test_an_unreliable_timing_stays_unreliable_whatever_its_noise() -> None:
    found = r.speedup_rule(1.0, 0.5, 0.9, "load 9 on 2 cores", baseline_noise=0.01, noise=0.01)
    assert found is not None and found.label == lb.UNRELIABLE


def test_noisy_is_a_note_below_slower_and_never_fails() -> None:
    assert lb.NOISY not in lb.FAILING
    assert lb.SEVERITY.index(lb.SLOWER) < lb.SEVERITY.index(lb.NOISY) < lb.SEVERITY.index(lb.PASS)


# --- the noise of records and baselines ----------------------------------------------------------------


def _between(name: str, speedup: float, noise_: float, processes: list[float] | None, backend: str = "trace_once",
             mode: str = "train", **kw: Any) -> Any:
    """:func:`_timing` of a baseline measured in ``len(processes)`` processes with those speedups."""
    record = _timing(name, speedup, noise_, backend, mode, **kw)
    assert record.timing is not None and record.timing.stats is not None
    record.timing.stats = replace(record.timing.stats, process_speedups=processes,
                                  timing_processes=len(processes or []) or None)
    return record


def _timing(name: str, speedup: float, noise_: Any = None, backend: str = "trace_once", mode: str = "train",
            **kw: Any) -> Any:
    """A measured timing record whose statistics carry the speedup noise ``noise_`` (None: none)."""
    figures = timing_figures()
    assert figures.stats is not None
    figures.stats = replace(figures.stats, speedup_noise=noise_)
    return timing_record(name, backend, mode, speedup, timing=figures, **kw)


def test_record_noise_reads_a_finite_number_only() -> None:
    assert record_noise(_timing("a", 1.0, 0.03)) == 0.03
    for bad in (None, "0.03", True, math.nan, math.inf, -0.1):
        assert record_noise(_timing("a", 1.0, bad)) is None


def test_baseline_noise_follows_the_baseline_speedups(tmp_path: Path) -> None:
    records = [_timing("a", 1.0, 0.02), _timing("b", 1.0), _timing("c", 1.0, 0.05, status=UNRELIABLE),
               _timing("d", 1.0, 0.02), _timing("d", 1.1),  # the last record of a case wins, as its speedup
               rec("parity", "e", status="pass")]
    assert baseline_noise(records) == {("a", "trace_once", "train"): 0.02}
    path = tmp_path / "base.jsonl"
    path.write_text("".join(json.dumps(x.to_json()) + "\n" for x in records))
    timing = load_timing_baseline(path)  # the gate's one read of the file
    assert (timing.noise, timing.between) == ({("a", "trace_once", "train"): 0.02}, {})
    assert timing.speedups == {("a", "trace_once", "train"): 1.0, ("b", "trace_once", "train"): 1.0,
                               ("d", "trace_once", "train"): 1.1} and timing.measured_with.placements == {"once"}


def test_a_baseline_of_several_processes_says_how_far_one_strays(tmp_path: Path) -> None:
    """process_speedups 1.0, 1.1, 0.9: MAD 0.1, x 1.4826 x c_3 1.495 / median 1.0 = 22.2% for one process."""
    records = [_between("a", 1.0, 0.05, [1.0, 1.1, 0.9]), _between("b", 1.0, 0.05, [1.0, 1.1]),
               _between("c", 1.0, 0.05, None), _between("d", 1.0, 0.05, [1.0, 1.5, 0.5], status=UNRELIABLE)]
    a = ("a", "trace_once", "train")
    assert between_noise(records) == {a: pytest.approx(0.1 * 1.4826 * 1.495, abs=1e-5)}
    assert noise.value_noise([1.0, 1.1, 0.9]) == pytest.approx(0.2216, abs=1e-4)
    assert noise.median_noise([1.0, 1.1, 0.9]) == pytest.approx(1.2533 * 0.2216 / math.sqrt(3), abs=1e-4)
    path = tmp_path / "base.jsonl"
    path.write_text("".join(json.dumps(x.to_json()) + "\n" for x in records))
    assert load_timing_baseline(path).between == {a: pytest.approx(0.22165, abs=1e-5)}
    assert noise_note({a: 1.0}, {a: 0.05}, {a: 0.2}) == (
        " (noise-aware: all 1 baseline cases carry their noise; 1 with the spread between its processes)")


def _baseline_of(tmp_path: Path, **runs: list[Any]) -> TimingBaseline:
    """A stored baseline of timing records whose ``TimingRuns`` take, record i, the i-th value of each of ``runs``
    (placements=[...], timing_cpus=[...]), beside a parity record."""
    records = []
    for i, values in enumerate(zip(*runs.values(), strict=True)):
        record = _timing(f"m{i}", 1.0, 0.02)
        assert record.timing is not None and record.timing.runs is not None
        record.timing.runs = replace(record.timing.runs, **dict(zip(runs, values, strict=True)))
        records.append(record)
    path = tmp_path / "base.jsonl"
    path.write_text("".join(json.dumps(x.to_json()) + "\n" for x in [*records, rec("parity", "p")]))
    return load_timing_baseline(path)


def _placed(recorded: frozenset[str], placements: str) -> str:
    """Why a baseline measured with ``recorded`` placements cannot gate a run with ``placements`` (the one check)."""
    return baseline_mismatch(Path("b.jsonl"), MeasuredWith(placements=recorded), TimingSettings(placements=placements))


def _pinned(recorded: frozenset[tuple[int, ...]], cpus: tuple[int, ...]) -> str:
    """Why a baseline pinned as ``recorded`` cannot gate a run pinned to ``cpus`` (the one check)."""
    recorded_with = MeasuredWith(frozenset({"once"}), recorded)
    return baseline_mismatch(Path("b.jsonl"), recorded_with, TimingSettings(timing_cpus=cpus))


def test_a_baseline_measured_with_fresh_or_huge_pages_gates_only_a_run_measured_so(tmp_path: Path) -> None:
    """xla_placements=fresh and huge each put the speedups on a scale of their own: the gate refuses a mix either
    way, names both settings and why; once/run/step mix (one scale), and a baseline that does not say (an old one)
    was measured as once."""
    def baseline(*placements: str | None) -> frozenset[str]:
        return _baseline_of(tmp_path, placements=list(placements)).measured_with.placements

    fresh = baseline("fresh", "fresh")
    assert fresh == {"fresh"} and _placed(fresh, "fresh") == ""
    assert _placed(fresh, "once") == (
        "b.jsonl was measured with xla_placements=fresh, this run with xla_placements=once: with 'fresh' the "
        "baseline side pays page faults at every step, so the speedups are not comparable; valid: run with the "
        "baseline's setting, or record a baseline with this one")
    mixed = baseline("once", "step")
    assert _placed(mixed, "run") == ""
    assert "xla_placements=once,step, this run with xla_placements=fresh" in _placed(mixed, "fresh")
    huge = baseline("huge")
    assert _placed(huge, "huge") == ""
    assert _placed(huge, "once") == (
        "b.jsonl was measured with xla_placements=huge, this run with xla_placements=once: with 'huge' the CPU "
        "side's large buffers are on huge pages, so the speedups are not comparable; valid: run with the baseline's "
        "setting, or record a baseline with this one")
    assert ("with 'fresh' the baseline side pays page faults at every step; with 'huge' the CPU side's large buffers "
            "are on huge pages, so") in _placed(huge, "fresh")
    old = baseline(None)  # a report from before the option: measured as once
    assert old == {"once"} and _placed(old, "step") == ""
    assert "xla_placements=once, this run with xla_placements=huge" in _placed(old, "huge")


def test_a_baseline_pinned_to_cpus_gates_only_a_run_pinned_so(tmp_path: Path) -> None:
    """xla_timing_cpus: a baseline whose runs were not pinned (an old one too) cannot gate a pinned run, and the
    reverse; the message names both and the setting to pass; pinned to other CPUs, or a baseline that mixes, gates."""
    def baseline(*cpus: list[int] | None) -> frozenset[tuple[int, ...]]:
        return _baseline_of(tmp_path, timing_cpus=list(cpus)).measured_with.pinned

    old, pinned = baseline(None, None), baseline([0], [0])
    assert old == {()} and pinned == {(0,)}
    assert _pinned(old, ()) == "" and _pinned(pinned, (1,)) == ""
    assert _pinned(old, (0,)) == (
        "b.jsonl was measured with its timed runs not pinned, this run's are pinned to CPU 0 (xla_timing_cpus): the "
        "XLA side's speed differs between the two, so the speedups are not comparable; valid: run with the "
        "baseline's setting (no xla_timing_cpus), or record a baseline with this one")
    assert _pinned(pinned, ()).startswith(
        "b.jsonl was measured with its timed runs pinned to CPU 0, this run's are not pinned")
    assert "(xla_timing_cpus=0)" in _pinned(pinned, ())
    assert _pinned(baseline([0], None), (0,)) == ""


def test_the_gate_asks_one_question_of_a_baseline(tmp_path: Path) -> None:
    """baseline_mismatch names the first setting whose scale differs; a baseline without timing records (parity
    alone) was measured with nothing, and refuses nothing."""
    both = _baseline_of(tmp_path, placements=["fresh"], timing_cpus=[[0]]).measured_with
    assert both == MeasuredWith(frozenset({"fresh"}), frozenset({(0,)}))
    assert "xla_placements=fresh, this run with xla_placements=once" in baseline_mismatch(
        Path("b.jsonl"), both, TimingSettings())
    assert "pinned to CPU 0, this run's are not pinned" in baseline_mismatch(
        Path("b.jsonl"), both, TimingSettings(placements="fresh"))
    assert baseline_mismatch(Path("b.jsonl"), both, TimingSettings(placements="fresh", timing_cpus=(1,))) == ""
    assert _baseline_of(tmp_path).measured_with == MeasuredWith()
    assert baseline_mismatch(Path("b.jsonl"), MeasuredWith(), TimingSettings(placements="huge", timing_cpus=(0,))) == ""


def test_a_one_process_run_takes_the_baselines_between_process_spread_as_its_noise() -> None:
    assert r.run_noise(0.01, 0.06) == 0.06 and r.run_noise(0.01, 0.06, processes=4) == 0.03
    assert r.run_noise(0.08, 0.06) == 0.08 and r.run_noise(None, 0.06) is None and r.run_noise(0.01, None) == 0.01
    a = ("a", "trace_once", "train")
    runs = timing_from_records([_timing("a", 0.95, 0.01)])
    assert runs[a].processes == 1
    # its own runs say ±1%, steady: a 5% drop passes at 0.9; the baseline's processes stray 6% each: NOISY
    plain = r.compare(None, {}, timing=runs, baseline={a: 1.0}, min_speedup_ratio=0.9, baseline_noise={a: 0.01})
    assert plain.verdicts[0].label == lb.PASS
    gated = r.compare(None, {}, timing=runs, baseline={a: 1.0}, min_speedup_ratio=0.9, baseline_noise={a: 0.01},
                      between_noise={a: 0.06})
    (finding,) = gated.verdicts[0].findings
    assert finding.label == lb.NOISY
    assert "(this run ±6.0% from the spread between the baseline's processes, baseline ±1.0%)" in finding.detail


def test_timing_cases_carry_their_noise() -> None:
    cases = timing_from_records([_timing("a", 1.0, 0.02), _timing("b", 2.0)])
    assert cases[("a", "trace_once", "train")].noise == 0.02 and cases[("b", "trace_once", "train")].noise is None


def test_the_header_says_how_many_cases_are_gated_with_their_noise() -> None:
    a, b = ("a", "x", "train"), ("b", "x", "train")
    assert noise_note({a: 1.0, b: 1.0}, {a: 0.01, b: 0.02}) == " (noise-aware: all 2 baseline cases carry their noise)"
    assert noise_note({a: 1.0, b: 1.0}, {}) == " (the baseline records no noise: plain ratio, as before)"
    assert "noise-aware for 1 of 2 baseline cases" in noise_note({a: 1.0, b: 1.0}, {a: 0.01})
    assert noise_note({}, {}) == ""


# --- what the gate shows -------------------------------------------------------------------------------


def _gate() -> r.GateResult:
    stored = {("stable", "trace_once", "train"): 1.0, ("noisy", "trace_once", "train"): 1.0,
              ("old", "trace_once", "train"): 1.0}
    stored_noise = {("stable", "trace_once", "train"): 0.01, ("noisy", "trace_once", "train"): 0.08}
    run = [_timing("stable", 0.85, 0.01), _timing("noisy", 0.95, 0.02), _timing("old", 0.95, 0.01)]
    return r.compare(None, {}, timing=timing_from_records(run), baseline=stored, min_speedup_ratio=0.9,
                     baseline_noise=stored_noise)


def test_compare_gates_each_case_by_its_noise() -> None:
    result = _gate()
    labels = {v.key[0]: v.label for v in result.verdicts}
    assert labels == {"stable": lb.SLOWER, "noisy": lb.NOISY, "old": lb.PASS}
    assert result.failed() and result.counts()[lb.NOISY] == 1


def test_noisy_in_the_headline_terminal_and_markdown() -> None:
    result = _gate()
    ok, text = headline(result, failed_tests=0, strict_improved=False)
    assert not ok and text == "FAILED: 1 regression"
    lines = [t for t, _ in terminal_lines(result, updating=False, strict_improved=False)]
    assert lines[0] == "cases: 1 SLOWER, 1 NOISY, 1 PASS"
    noisy = next(t for t in lines if t.startswith("NOISY"))
    assert "noisy · trace_once · train: cannot gate at 10%: noise ±8.2%" in noisy and "reported, not failing" in noisy
    md = render_markdown(result, {})
    assert "### Speed gate: too noisy to gate (1)" in md
    assert "- **noisy · trace_once · train**: cannot gate at 10%: noise ±8.2%" in md
    assert "| noisy | trace_once | train |" in md and md.count("| NOISY |") == 1
    # without the SLOWER case the verdict passes and says how many were noisy
    calm = r.GateResult([v for v in result.verdicts if v.label != lb.SLOWER])
    assert headline(calm, failed_tests=0, strict_improved=False) == (True, "PASSED: 1 case as expected, 1 noisy")


# --- a real session ------------------------------------------------------------------------------------

CONFTEST = TINY_CONFTEST + '''

def pytest_configure(config):
    # the gate's decisions are under test, not the machine (shared, loaded): no record is made unreliable
    import importlib

    importlib.import_module("pytest_xla_dynamo.timing.interference").reasons = lambda *a, **k: []
'''
ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_timing.py"
MIN_RUN_TIME = 0.05


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_XLA_THREADS",
                "PYTEST_XLA_BASELINE_BACKEND", "PJRT_NPROC", "PYTEST_XLA_MIN_RUN_TIME"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.path.joinpath("test_timing.py").write_text(SUITE.read_text())
    return pytester


pytest_plugins = ["pytester"]


def test_calibrated_runs_noise_in_the_record_and_the_noise_aware_gate(suite: pytest.Pytester) -> None:
    stored = [
        # stable: a negligible noise, a speedup no run reaches: SLOWER
        _timing("tiny", 1000.0, 0.001, "trace_once", "train"),
        # noisy: 60% noise, nothing can be told at 10%: NOISY, however low this run's figure
        _timing("tiny", 1000.0, 0.6, "trace_once", "infer"),
        # an old baseline, no noise field: the plain ratio, SLOWER
        timing_record("tiny", "trace_everytime", "train", 1000.0),
        # steady by its own runs, but its processes strayed (a 155% spread for one process): NOISY
        _between("tiny", 1000.0, 0.001, [1000.0, 3000.0, 300.0], "trace_everytime", "infer"),
    ]
    suite.path.joinpath("baseline.jsonl").write_text("".join(json.dumps(s.to_json()) + "\n" for s in stored))
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "--xla-models=tiny", "-W",
        "ignore::pytest.PytestUnknownMarkWarning", "--xla-backend=trace_once,trace_everytime", "--xla-repeat=5",
        "-o", f"xla_min_run_time={MIN_RUN_TIME}", "--xla-min-speedup-ratio=0.9", "--xla-timing-baseline=baseline.jsonl",
        "-o", "xla_placements=step", "--xla-report=json", "--xla-report-dir=rep", "--xla-summary=summary.md",
        timeout=900)
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert result.ret == lb.GATE_FAILED_EXIT, out[-3000:]
    assert ("speedup >= 0.9 x baseline.jsonl (noise-aware for 3 of 4 baseline cases; 1 with the spread between its "
            "processes; the others carry no noise") in out

    records = {(x["backend"], x["mode"]): x for x in
               (json.loads(line) for line in (suite.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines())
               if x["suite"] == "timing"}
    assert len(records) == 4
    for record in records.values():
        extra = record["extra"]
        # calibration: requested and calibrated iterations, the same count for both sides' per-iteration figures
        assert record["iterations_per_run"] == 1 == extra["iterations_per_run"] == extra["requested_iterations_per_run"]
        assert extra["min_run_time"] == MIN_RUN_TIME
        step = extra["calibration_step_ms"] / 1000
        calibrated = extra["calibrated_iterations_per_run"]
        # the recorded step is rounded to 0.1 us: the count lies between those of the step's two bounds
        low, high = (calibrate.calibrated_iterations(1, MIN_RUN_TIME, step + d) for d in (5e-8, -5e-8))
        assert low <= calibrated <= high, (low, calibrated, high)
        assert calibrated > 1  # a step of the tiny model is far below 50 ms
        assert "xla_min_run_time=0.05" in record["repro"]
        # the per-iteration figures are of the calibrated runs: a run lasts calibrated x its figure
        assert record["abs_latency"] * calibrated > 0.2 * MIN_RUN_TIME * 1000
        # the noise: from the five paired runs, as timing.noise computes it
        assert len(extra["run_speedups"]) == 5
        # (from the speedups the record keeps to 5 digits: its per-iteration ms, rounded to 0.1 us, are too
        # coarse for the MAD of the tiny model's steps)
        speedups = extra["run_speedups"]
        assert speedups == pytest.approx(
            [b / x for b, x in zip(extra["baseline_runs_ms"], extra["backend_runs_ms"], strict=True)], rel=0.05)
        assert extra["speedup_noise"] == pytest.approx(
            noise.speedup_noise(speedups, [1.0] * len(speedups)), rel=0.02, abs=1e-4)
        assert extra["speedup_noise_statistic"] == noise.STATISTIC
        # xla_placements=step: the eager baseline (CPU) drew a placement before each of its timed steps
        assert extra["placements"] == "step" and extra["placement_redraws"] == 5 * calibrated
        assert "xla_placements=step" in record["repro"]

    summary = (suite.path / "summary.md").read_text()
    assert "### Regressions (2)" in summary
    assert "### Speed gate: too noisy to gate (2)" in summary
    assert "- **tiny · trace_once · infer**: cannot gate at 10%: noise ±" in summary
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))[:3]: line.rsplit("|", 2)[-2].strip()
            for line in summary.splitlines() if line.startswith("| tiny ")}
    assert rows == {("tiny", "trace_once", "train"): lb.SLOWER, ("tiny", "trace_once", "infer"): lb.NOISY,
                    ("tiny", "trace_everytime", "train"): lb.SLOWER, ("tiny", "trace_everytime", "infer"): lb.NOISY}
    stable = next(line for line in summary.splitlines() if line.startswith("- **tiny · trace_once · train**"))
    old = next(line for line in summary.splitlines() if line.startswith("- **tiny · trace_everytime · train**"))
    assert "noise ±" in stable and "baseline ±0.1%" in stable
    assert "noise" not in old and "< 0.9 x baseline 1000.00x = 900.00x" in old
    strayed = next(line for line in summary.splitlines() if line.startswith("- **tiny · trace_everytime · infer**"))
    assert "this run ±155.2% from the spread between the baseline's processes, baseline ±0.1%" in strayed
    assert "cases: 2 SLOWER, 2 NOISY" in out
    assert "NOISY           tiny · trace_once · infer: cannot gate at 10%" in out


# --- the benchmark's pieces (pure) -----------------------------------------------------------------------


def test_timing_gate_reads_the_verdicts_of_the_summary_table(tmp_path: Path) -> None:
    result = _gate()
    summary = tmp_path / "summary.md"
    summary.write_text(render_markdown(result, {}))
    assert benchmark_script("timing_gate").verdicts(summary) == {
        ("noisy", "trace_once", "train"): lb.NOISY, ("old", "trace_once", "train"): lb.PASS,
        ("stable", "trace_once", "train"): lb.SLOWER}
    assert benchmark_script("timing_gate").verdicts(tmp_path / "none.md") == {}


@pytest.mark.parametrize(("value", "fraction"), [("", 0.0), ("0", 0.0), ("0.10", 0.10), (" 0.5 ", 0.5)])
def test_slowdown_fraction(value: str, fraction: float, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = benchmark_script("slowdown_plugin")
    monkeypatch.setenv(plugin.ENV, value)
    assert plugin._fraction() == fraction


@pytest.mark.parametrize("value", ["1", "-0.1", "ten", "1.5"])
def test_slowdown_bad_fraction_is_a_usage_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = benchmark_script("slowdown_plugin")
    monkeypatch.setenv(plugin.ENV, value)
    with pytest.raises(pytest.UsageError) as info:
        plugin._fraction()
    assert str(info.value) == f"XLA_GATE_SLOWDOWN: invalid value {value!r}; valid: a number 0 <= F < 1"


def test_timing_gate_warns_where_a_run_was_not_measured_as_asked() -> None:
    """A slowed run that counts no injected matmuls, or a record not combined from --run-processes processes."""
    check = benchmark_script("timing_gate").not_as_asked
    five = argparse.Namespace(run_processes=5, ab=False)
    combined = {"extra": {"timing_processes": 5, "injected_matmuls": 120}}
    assert check(five, combined, slowed=True) == "" and check(five, None, slowed=True) == ""
    assert check(argparse.Namespace(run_processes=1, ab=False), {"extra": {}}, slowed=False) == ""
    assert check(five, {"extra": {"injected_matmuls": 0}}, slowed=True) == (
        "  WARNING: no injected matmuls recorded; timing_processes None, not 5")
    assert check(five, {"extra": {"timing_processes": 5}}, slowed=False) == ""
    # --ab: the base side must have its processes too
    ab = argparse.Namespace(run_processes=4, ab=True)
    paired = {"extra": {"timing_processes": 4, "base_process_speedups": [0.2] * 4}}
    assert check(ab, paired, slowed=False) == ""
    assert check(ab, {"extra": {"timing_processes": 4, "base_process_speedups": [0.2]}}, slowed=False) == (
        "  WARNING: 1 base processes, not 4")


def test_timing_gate_ab_reads_the_base_side_of_each_record() -> None:
    """--ab: a record's base speedup is its baseline, the pairs' noise its noise, and the ratio column is the median
    of the pairs' ratios (the command has no stored baseline and measures the base with nothing slowed)."""
    gate = benchmark_script("timing_gate")
    record = {"status": "pass", "extra": {"base_speedup": 0.2, "pair_noise": 0.01, "pair_ratio": 0.9}}
    assert gate.ab_base(record) == {"speedup": 0.2, "status": "pass", "extra": {"speedup_noise": 0.01}}
    args = argparse.Namespace(ab=True, models="m", modes="train", backends="trace_once", repeat=5, min_run_time="0.2",
                              iterations_per_run=1, run_processes=4, ratio=0.95)
    cmd = gate.pytest_cmd(args, Path("out"), [], gate=Path("baseline.jsonl"))
    assert "--xla-timing-processes=4" in cmd and "--xla-min-speedup-ratio=0.95" in cmd
    assert f"--xla-timing-base-python=env XLA_GATE_SLOWDOWN=0 {sys.executable}" in cmd
    assert not any(arg.startswith("--xla-timing-baseline") for arg in cmd)


def test_slowdown_parent_sums_its_timing_childrens_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each child appends its count to the parent's file; the parent sums and empties it per test."""
    plugin = benchmark_script("slowdown_plugin")
    counts = tmp_path / "counts.txt"
    counts.write_text("6957\n6442\n")
    monkeypatch.setitem(plugin._state, "counts", str(counts))
    assert plugin._children_count() == 13399
    assert counts.read_text() == "" and plugin._children_count() == 0
    monkeypatch.delitem(plugin._state, "counts")
    assert plugin._children_count() == 0  # a child, or one process: nothing to sum
