"""The A/B speed gate (``--xla-timing-base-python``, issue 31): the pairs' combination (pure), the pair rule and the
gate's use of it (pure), the option's checks; and one real session (a tiny model on XLA:CPU, a pytester subprocess)
in which each timing test is measured in three pairs of processes, the base's and this interpreter's alternating,
and gated on the median of the pairs' ratios without a stored baseline."""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from sample_data import TINY_CONFTEST, timing_figures, timing_record
from test_config import resolve_timing, usage_error
from test_timing_across import _process, _stats

from pytest_xla_dynamo.core import machine
from pytest_xla_dynamo.gating import labels as lb
from pytest_xla_dynamo.gating import rules as r
from pytest_xla_dynamo.gating.labels import GATE_FAILED_EXIT
from pytest_xla_dynamo.gating.run import TimingCase, timing_from_records
from pytest_xla_dynamo.records import UNRELIABLE, CaseRecord
from pytest_xla_dynamo.timing import across, noise
from pytest_xla_dynamo.timing.options import MIN_AB_PAIRS

pytest_plugins = ["pytester"]

# --- the pairs (pure) -------------------------------------------------------------------------------------------


def test_the_pair_ratio_is_the_median_of_candidate_over_base_per_pair() -> None:
    """The base drifts (pair 3 5% slower): the ratio per pair takes it out."""
    candidate = [_process(0.18), _process(0.19), _process(0.1615)]
    base = [_process(0.20), _process(0.20), _process(0.19)]
    record = across.pair(candidate, base, 3)
    stats = _stats(record)
    assert record.status == "pass" and record.speedup == 0.18  # this build's median, as without a base
    assert stats.base_process_speedups == [0.20, 0.20, 0.19] and stats.base_speedup == 0.20
    assert stats.pair_ratios == [0.9, 0.95, 0.85]
    assert stats.pair_ratio == 0.9
    between = noise.median_noise([0.9, 0.95, 0.85])
    assert between is not None and between > math.hypot(0.01, 0.01) / math.sqrt(3)  # the spread, not the floor
    assert stats.pair_noise == pytest.approx(between, abs=1e-5)
    assert stats.timing_processes == 3 and stats.process_speedups == [0.18, 0.19, 0.1615]


def test_the_pairs_noise_is_never_below_the_processes_own() -> None:
    """Pairs that agree exactly: the floor is hypot(the two processes' own noise) / sqrt(N)."""
    record = across.pair([_process(0.45, own_noise=0.03)] * 3, [_process(0.5, own_noise=0.04)] * 3, 3)
    assert _stats(record).pair_ratio == 0.9
    assert _stats(record).pair_noise == pytest.approx(0.05 / math.sqrt(3), abs=1e-5)


def test_a_disturbed_pair_is_left_out_and_a_disturbed_majority_is_unreliable() -> None:
    load = ("load 5.0 on 2 cores",)
    candidate = [_process(0.10, reasons=load), _process(0.19), _process(0.18)]
    base = [_process(0.20), _process(0.20), _process(0.20)]
    record = across.pair(candidate, base, 3)
    assert record.status == "pass" and _stats(record).pair_ratio == pytest.approx(0.925)
    assert _stats(record).pair_ratios == [0.5, 0.95, 0.9]  # every measured pair is listed
    base = [_process(0.20), _process(0.20, reasons=load), _process(0.20)]
    record = across.pair(candidate, base, 3)
    assert record.status == UNRELIABLE and _stats(record).pair_ratio == 0.9  # the median over all three
    assert record.message.startswith("timing unreliable: 1 of 3 pairs measured undisturbed on both sides")


def test_an_unreliable_base_makes_the_record_unreliable_and_says_whose() -> None:
    load = ("load 5.0 on 2 cores",)
    base = [_process(0.20, reasons=load), _process(0.20, reasons=load), _process(0.20)]
    record = across.pair([_process(0.19)] * 3, base, 3)
    assert record.status == UNRELIABLE
    assert "the base build's timing unreliable: 1 of 3 processes measured undisturbed" in record.message


def test_builds_pinned_differently_make_the_record_unreliable_and_say_so() -> None:
    """A base build older than xla_timing_cpus pins nothing: not comparable with pinned speedups."""
    def pinned(record: CaseRecord, cpus: list[int] | None) -> CaseRecord:
        assert record.timing is not None and record.timing.runs is not None
        return replace(record, timing=replace(record.timing, runs=replace(record.timing.runs, timing_cpus=cpus)))

    candidate = [pinned(_process(0.19), [0])] * 3
    record = across.pair(candidate, [pinned(_process(0.20), None)] * 3, 3)
    assert record.status == UNRELIABLE and _stats(record).pair_ratio == 0.95  # figured, not trusted
    assert record.message == (
        "timing unreliable: the base build's timed runs ran on CPUs none (not pinned), this build's on 0 "
        "(xla_timing_cpus): not comparable (a base build older than the option ignores PYTEST_XLA_TIMING_CPUS and "
        "the ini key, and refuses the command-line option)")
    assert across.pair(candidate, [pinned(_process(0.20), [0])] * 3, 3).status == "pass"


def test_without_measured_pairs_the_record_is_this_builds() -> None:
    unmeasured = timing_record("m", "trace_once", "train", None, status="not_measured")
    assert across.pair([unmeasured] * 3, [_process(0.2)] * 3, 3) is unmeasured


# --- the rule and the gate (pure) -------------------------------------------------------------------------------


def test_a_quiet_pair_ratio_gates_at_the_asked_ratio() -> None:
    """Noise 2%: 2 x 2% fits in the 5% asked; below 0.95 is SLOWER, at or above it nothing."""
    slower = r.pair_speedup_rule(0.90, 0.02, 0.95, 0.2, 0.18)
    assert slower is not None and slower.label == lb.SLOWER
    assert slower.detail == ("speedup 0.18x vs the base build's 0.20x, paired ratio 0.900 < 0.95 (noise ±2.0% over "
                             "the pairs)")
    assert (slower.expected, slower.actual) == ("0.2", "0.18")
    assert r.pair_speedup_rule(0.95, 0.02, 0.95, 0.2, 0.19) is None
    assert r.pair_speedup_rule(1.30, 0.02, 0.95, 0.2, 0.26) is None


def test_a_noisy_pair_ratio_says_it_cannot_gate_unless_far_below() -> None:
    """Noise 4%: 2 x 4% = 8% > 5%: 0.93 is NOISY (the floor 0.92), 0.91 SLOWER beyond its noise."""
    noisy = r.pair_speedup_rule(0.93, 0.04, 0.95, 0.2, 0.186)
    assert noisy is not None and noisy.label == lb.NOISY
    assert noisy.detail == ("cannot gate at 5%: noise ±4.0% over the pairs, 2 x noise = 8.0%; speedup 0.19x vs the "
                            "base build's 0.20x, paired ratio 0.930 (the floor at this noise: 0.920)")
    beyond = r.pair_speedup_rule(0.91, 0.04, 0.95, 0.2, 0.182)
    assert beyond is not None and beyond.label == lb.SLOWER and "slower beyond its noise" in beyond.detail


def test_without_a_noise_figure_the_plain_ratio_and_unreliable_is_never_gated() -> None:
    plain = r.pair_speedup_rule(0.94, None, 0.95, 0.2, 0.188)
    assert plain is not None and plain.label == lb.SLOWER and "noise" not in plain.detail
    skipped = r.pair_speedup_rule(0.5, 0.01, 0.95, 0.2, 0.1, "load 5.0 on 2 cores")
    assert skipped is not None and skipped.label == lb.UNRELIABLE and "load 5.0" in skipped.detail


def test_the_gate_uses_the_pairs_without_a_stored_baseline() -> None:
    key = ("m", "trace_once", "train")
    timing = {key: TimingCase(key, 0.18, "pytest x", pair_ratio=0.9, pair_noise=0.01, base_speedup=0.2)}
    result = r.compare(None, {}, timing=timing, min_speedup_ratio=0.95)
    assert [v.label for v in result.verdicts] == [lb.SLOWER] and result.failed()
    assert result.verdicts[0].findings[0].repro == "pytest x"
    # a case without pairs and no stored baseline is not gated; without a ratio nothing is
    other = ("n", "trace_once", "train")
    result = r.compare(None, {}, timing={**timing, other: TimingCase(other, 0.5)}, min_speedup_ratio=0.95)
    assert {v.key: v.label for v in result.verdicts} == {key: lb.SLOWER, other: lb.PASS}
    assert r.compare(None, {}, timing=timing).verdicts == []


def test_timing_from_records_carries_the_pair_figures() -> None:
    figures = timing_figures()
    assert figures.stats is not None
    stats = replace(figures.stats, pair_ratio=0.9, pair_noise=0.02, base_speedup=0.2, timing_processes=3)
    record = timing_record("m", "trace_once", "train", 0.18, timing=replace(figures, stats=stats))
    case = timing_from_records([record])[("m", "trace_once", "train")]
    assert (case.pair_ratio, case.pair_noise, case.base_speedup, case.processes) == (0.9, 0.02, 0.2, 3)


# --- the option ------------------------------------------------------------------------------------------------


def test_the_base_python_is_split_as_a_shell_would_and_must_exist() -> None:
    xcfg = resolve_timing(cli={"xla_timing_base_python": f"env 'A=1 2' {sys.executable}", "xla_timing_processes": "3",
                               "xla_min_speedup_ratio": "0.95"})
    assert xcfg.timing_base_python == ("env", "A=1 2", sys.executable)
    assert usage_error(cli={"xla_timing_base_python": "/no/such/python", "xla_timing_processes": "3"}) == (
        "--xla-timing-base-python: invalid value '/no/such/python' ('/no/such/python' not found); valid: a Python "
        "interpreter (a path, or a program on PATH), with any arguments")
    assert "No closing quotation" in usage_error(cli={"xla_timing_base_python": "env 'A", "xla_timing_processes": "3"})


def test_the_base_python_needs_pairs_and_excludes_a_stored_baseline(tmp_path: Path) -> None:
    assert usage_error(cli={"xla_timing_base_python": sys.executable}) == (
        f"--xla-timing-base-python needs --xla-timing-processes >= {MIN_AB_PAIRS} (the pairs of base and candidate "
        "processes; their spread is the gate's noise), not 1")
    baseline = tmp_path / "b.jsonl"
    baseline.write_text("")
    assert usage_error(cli={"xla_timing_base_python": sys.executable, "xla_timing_processes": "3",
                            "xla_timing_baseline": str(baseline)}).startswith(
        "--xla-timing-base-python and --xla-timing-baseline: give one")
    assert usage_error(cli={"xla_min_speedup_ratio": "0.9"}) == (
        "--xla-min-speedup-ratio needs --xla-timing-baseline=FILE (a stored baseline) or "
        "--xla-timing-base-python=COMMAND (the base build measured beside this one)")


# --- a real session ----------------------------------------------------------------------------------------------

ORDER = '''

def pytest_runtest_call(item):
    import os

    from pytest_xla_dynamo.session import get_session

    child = get_session(item.config).child_output is not None
    side = os.environ.get("AB_SIDE", "candidate") if child else "parent"
    with open(os.path.join(str(item.config.rootpath), "order.txt"), "a") as fh:
        fh.write(f"{side} {os.getpid()}\\n")
'''


def test_each_timing_test_is_measured_in_pairs_with_the_base_build(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The base is this interpreter behind ``env AB_SIDE=base``: the processes alternate base-first, then
    candidate-first; the record carries both sides and the pairs; the gate judges the pair ratio (the header and the
    summary say so) with no stored baseline. ``xla_timing_cpus`` reaches the children: their runs were pinned."""
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PJRT_NPROC", "AB_SIDE"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(TINY_CONFTEST + ORDER)
    suite = Path(__file__).resolve().parents[1] / "suites" / "test_timing.py"
    pytester.path.joinpath("test_timing.py").write_text(suite.read_text())
    cpu = max(machine.usable_cpus()) if machine.can_pin() else None  # xla_timing_cpus passed on to the children
    pin = ["-o", f"xla_timing_cpus={cpu}"] if cpu is not None else []
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "--xla-models=tiny", "--xla-backend=trace_once",
        "--xla-modes=train", "--xla-repeat=3", "-o", "xla_min_run_time=0.05", "--xla-timing-processes=3",
        f"--xla-timing-base-python=env AB_SIDE=base {sys.executable}", "--xla-min-speedup-ratio=0.5", *pin,
        "--xla-report=json", "--xla-report-dir=rep", "--xla-summary=summary.md",
        "-W", "ignore::pytest.PytestUnknownMarkWarning", timeout=900)
    out = result.stdout.str()
    assert "xla-dynamo gate: speedup >= 0.5 x the base build's, measured beside it in 3 pairs of processes" in out
    record = json.loads((pytester.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines()[0])
    extra = record["extra"]
    assert len(extra["process_speedups"]) == len(extra["base_process_speedups"]) == len(extra["pair_ratios"]) == 3
    assert extra["pair_ratios"] == pytest.approx([c / b for c, b in zip(
        extra["process_speedups"], extra["base_process_speedups"], strict=True)], abs=1e-4)
    assert extra["pair_ratio"] == pytest.approx(statistics.median(extra["pair_ratios"]), abs=2e-5)
    assert extra["base_speedup"] == pytest.approx(statistics.median(extra["base_process_speedups"]), abs=1e-5)
    assert "'--xla-timing-base-python=env AB_SIDE=base " in record["repro"]
    if cpu is not None:  # the measuring child's runs were pinned: the affinity the OS reported inside them
        assert extra["timing_cpus"] == [cpu]
        assert f"xla_timing_cpus={cpu}" in record["repro"]
    # the parent's own call, and its children: base, candidate; candidate, base; base, candidate (fresh interpreters)
    sides = [line.split() for line in (pytester.path / "order.txt").read_text().splitlines()]
    assert [side for side, _ in sides if side != "parent"] == ["base", "candidate", "candidate", "base", "base",
                                                               "candidate"]
    assert len({pid for _, pid in sides}) == 7
    # the gate judged the pairs: a verdict in the summary's table, and a gate line in the terminal
    summary = (pytester.path / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| tiny | trace_once | train"))
    if record["status"] == UNRELIABLE:
        assert row.endswith("| UNRELIABLE |")
    else:
        ratio, pair_noise = extra["pair_ratio"], extra["pair_noise"]
        label = r.pair_speedup_rule(ratio, pair_noise, 0.5, extra["base_speedup"], record["speedup"])
        assert row.endswith(f"| {label.label if label else lb.PASS} |")
    assert result.ret == (GATE_FAILED_EXIT if row.endswith("| SLOWER |") else 0)
