"""The speed gate against an injected regression: K gate runs unmodified and K with the backend slowed.

    PJRT_DEVICE=CPU python benchmarks/timing_gate.py [--models resnet18,BERT_pytorch] [--modes train]
        [--backends trace_once] [--runs 2] [--slowdown 0.10] [--ratio 0.9] [--repeat 5] [--min-run-time 0.2]
        [--baseline-processes N] [--run-processes M] [--ab] [--ignore-interference] [--out DIR]
        [-- extra pytest args]

First one pytest subprocess records the timing baseline (``suites/test_timing.py --xla-report=json``,
unmodified). Then 2K gate runs against it (``--xla-timing-baseline``, ``--xla-min-speedup-ratio``), alternating
unmodified and *slowed* (``benchmarks/slowdown_plugin.py`` with ``XLA_GATE_SLOWDOWN=F``: the backend's time per
iteration x 1 / (1 - F), so its speedup x (1 - F); the baseline is never slowed), so that drift of the machine
falls on both alike. Printed per run: exit status, load average before and after, and per case the baseline's
speedup and noise, this run's, their ratio, the iterations per run (requested -> calibrated) and the gate's
verdict as its Markdown summary gives it; at the end the counts of SLOWER and NOISY per condition (SLOWER in
an unmodified run is a false alarm, a slowed case that is not SLOWER a miss). Every run loads the plugin (with
F = 0 in the baseline and unmodified runs), so all processes run the same code. A record flagged ``unreliable``
(other load) is never gated, and an unreliable baseline record is no baseline: on a loaded machine nothing may
be gated. ``--ignore-interference`` (test-only, ``XLA_GATE_IGNORE_INTERFERENCE=1``) turns the interference
rules off so that the verdicts can be shown there; its figures say nothing about the false-alarm rate.
``--baseline-processes N`` records the baseline with ``--xla-timing-processes=N``: its cases then carry the
spread between processes, which the gate takes as a run's noise (divided by sqrt(M) for a run of M processes)
where it is the larger (docs/ci.md); ``--run-processes M`` measures each gate run in M processes (default 1).
A WARNING beside a case says its record was not measured as asked (not combined from M processes, or a
slowed record without injected matmuls). ``--ab``: the A/B gate instead, no baseline run; each gate run measures
the base build beside itself (``--xla-timing-base-python='env XLA_GATE_SLOWDOWN=0 <this python>'``, in M pairs of
processes, M = ``--run-processes`` >= 3), and the ratio column is the median of the pairs' ratios. Figures only,
nothing asserted; the exit status is 0 unless a subprocess gave no report. resnet18 and BERT_pytorch training,
trace once, K = 2: about 10 minutes on 2 quiet cores (``--ab`` with M = 4: 5.5 minutes per gate run).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_timing.py"
REPORT = "xla-dynamo.jsonl"
ENV = "XLA_GATE_SLOWDOWN"  # benchmarks/slowdown_plugin.py
Key = tuple[str, str, str]


def load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def pytest_cmd(args: argparse.Namespace, out: Path, rest: list[str], *, gate: Path | None) -> list[str]:
    """The pytest command of the baseline (``gate`` None) or of a gate run against ``gate``."""
    cmd = [sys.executable, "-m", "pytest", str(SUITE), f"--xla-models={args.models}", f"--xla-modes={args.modes}",
           f"--xla-backend={args.backends}", f"--xla-repeat={args.repeat}",
           "-o", f"xla_min_run_time={args.min_run_time}",
           f"--xla-iterations-per-run={args.iterations_per_run}", "--xla-report=json", f"--xla-report-dir={out}",
           "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    if args.ab:  # the base build: this interpreter with nothing slowed, its processes paired with the run's
        base = shlex.join(["env", f"{ENV}=0", sys.executable])
        cmd += [f"--xla-timing-processes={args.run_processes}", f"--xla-timing-base-python={base}",
                f"--xla-min-speedup-ratio={args.ratio}", f"--xla-summary={out / 'summary.md'}"]
        return [*cmd, "-p", "benchmarks.slowdown_plugin", *rest]
    if gate is None and args.baseline_processes > 1:
        cmd.append(f"--xla-timing-processes={args.baseline_processes}")
    if gate is not None and args.run_processes > 1:
        cmd.append(f"--xla-timing-processes={args.run_processes}")
    if gate is not None:
        cmd += [f"--xla-timing-baseline={gate}", f"--xla-min-speedup-ratio={args.ratio}",
                f"--xla-summary={out / 'summary.md'}"]
    return [*cmd, "-p", "benchmarks.slowdown_plugin", *rest]


def run(args: argparse.Namespace, label: str, out: Path, rest: list[str], *, gate: Path | None = None,
        slowed: bool = False) -> tuple[int, dict[Key, dict[str, Any]], dict[Key, str]]:
    """One pytest subprocess: (exit status, its timing records by case, the gate's verdict by case)."""
    env = dict(os.environ)
    env[ENV] = str(args.slowdown) if slowed else "0"
    env["XLA_GATE_IGNORE_INTERFERENCE"] = "1" if args.ignore_interference else "0"
    before, start = load(), time.perf_counter()
    proc = subprocess.run(pytest_cmd(args, out, rest, gate=gate), cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    tail = [line for line in proc.stdout.splitlines() if " passed" in line or " failed" in line][-1:]
    print(f"{label}: exit {proc.returncode}, {time.perf_counter() - start:.0f} s, load {before} -> {load()}; "
          f"{tail[0].strip('= ') if tail else ''}", flush=True)
    path = out / REPORT
    if not path.exists():
        print(proc.stdout[-3000:] + proc.stderr[-3000:])
        return proc.returncode, {}, {}
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    timing = {(r["name"], r["backend"], r["mode"]): r for r in records if r.get("suite") == "timing"}
    return proc.returncode, timing, verdicts(out / "summary.md")


def verdicts(summary: Path) -> dict[Key, str]:
    """The verdict column of the gate's Markdown summary (its table of all cases) by case."""
    if not summary.exists():
        return {}
    out: dict[Key, str] = {}
    for line in summary.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) >= 5 and cells[0] not in ("model", "---"):
            out[(cells[0], cells[1], cells[2])] = cells[-1]
    return out


def noise(record: dict[str, Any] | None) -> str:
    value = ((record or {}).get("extra") or {}).get("speedup_noise")
    return f"±{value:.1%}" if isinstance(value, (int, float)) else "±?"


def iterations(record: dict[str, Any]) -> str:
    extra = record.get("extra") or {}
    return f"{extra.get('requested_iterations_per_run', '?')}->{extra.get('calibrated_iterations_per_run', '?')}"


def ab_base(record: dict[str, Any]) -> dict[str, Any]:
    """An A/B record's base side as a baseline record: the base build's median speedup, and as its noise the
    pairs' (the ratio column is then the median of the pairs' ratios)."""
    extra = record.get("extra") or {}
    return {"speedup": extra.get("base_speedup"), "status": record.get("status"),
            "extra": {"speedup_noise": extra.get("pair_noise")}}


def not_as_asked(args: argparse.Namespace, record: dict[str, Any] | None, *, slowed: bool) -> str:
    """A warning where a gate run's record was not measured as asked ("" where it was): a slowed run whose record
    counts no injected matmuls, or a record not combined from ``--run-processes`` processes."""
    extra = (record or {}).get("extra") or {}
    problems = []
    if record is not None and slowed and not extra.get("injected_matmuls"):
        problems.append("no injected matmuls recorded")
    if record is not None and args.run_processes > 1 and extra.get("timing_processes") != args.run_processes:
        problems.append(f"timing_processes {extra.get('timing_processes')}, not {args.run_processes}")
    if record is not None and args.ab and len(extra.get("base_process_speedups") or ()) != args.run_processes:
        problems.append(f"{len(extra.get('base_process_speedups') or ())} base processes, not {args.run_processes}")
    return f"  WARNING: {'; '.join(problems)}" if problems else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,BERT_pytorch")
    parser.add_argument("--modes", default="train")
    parser.add_argument("--backends", default="trace_once")
    parser.add_argument("--runs", type=int, default=2, help="K: gate runs per condition (unmodified, slowed)")
    parser.add_argument("--slowdown", type=float, default=0.10, help="F: the slowed runs' speedup is (1 - F) x")
    parser.add_argument("--ratio", type=float, default=0.9, help="--xla-min-speedup-ratio")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--iterations-per-run", type=int, default=1)
    parser.add_argument("--min-run-time", default="0.2")
    parser.add_argument("--baseline-processes", type=int, default=1,
                        help="record the baseline with --xla-timing-processes=N")
    parser.add_argument("--run-processes", type=int, default=1,
                        help="each gate run with --xla-timing-processes=M (default 1: one process)")
    parser.add_argument("--ab", action="store_true",
                        help="the A/B gate: no stored baseline; every gate run measures the base (nothing slowed) "
                             "beside itself in --run-processes pairs (--xla-timing-base-python)")
    parser.add_argument("--out", type=Path, help="folder for the reports (default: a temporary one)")
    parser.add_argument("--ignore-interference", action="store_true",
                        help="test-only: no record is made unreliable (to show the verdicts on a loaded machine)")
    args, rest = parser.parse_known_args()
    rest = [a for a in rest if a != "--"]
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    print(f"cores: {os.cpu_count()}, load at start: {load()}; models {args.models}, modes {args.modes}, backends "
          f"{args.backends}, repeat {args.repeat}, iterations per run {args.iterations_per_run}, min run time "
          f"{args.min_run_time} s, gate ratio {args.ratio}, injected slowdown {args.slowdown:.0%} of the speedup, "
          f"K = {args.runs}, "
          + (f"A/B: {args.run_processes} pairs per run" if args.ab else
             f"baseline processes {args.baseline_processes}, run processes {args.run_processes}")
          + (", interference rules OFF (test-only)" if args.ignore_interference else ""),
          flush=True)
    with tempfile.TemporaryDirectory(prefix="xla-gate-") as name:
        folder = args.out or Path(name)
        baseline: dict[Key, dict[str, Any]] = {}
        if not args.ab:
            status, baseline, _ = run(args, "baseline", folder / "baseline", rest)
            if not baseline:
                return 1
        counts: dict[str, dict[str, int]] = {"unmodified": {}, "slowed": {}}
        failed = False
        for k in range(1, args.runs + 1):
            for condition in ("unmodified", "slowed"):
                label = f"{condition} {k}"
                status, timing, verdict = run(args, label, folder / label.replace(" ", "-"), rest,
                                              gate=folder / "baseline" / REPORT, slowed=condition == "slowed")
                if args.ab:  # each record carries its own base: the pairs' median ratio is what is gated
                    baseline = {key: ab_base(record) for key, record in timing.items()}
                failed = failed or not timing
                for key in sorted(set(baseline) | set(timing)):
                    base, now = baseline.get(key), timing.get(key)
                    b, x = (base or {}).get("speedup"), (now or {}).get("speedup")
                    if args.ab:  # the gated figure: the median of the pairs' ratios
                        pair_ratio = ((now or {}).get("extra") or {}).get("pair_ratio")
                        ratio = f"{pair_ratio:.3f}" if isinstance(pair_ratio, (int, float)) else "-"
                    else:
                        ratio = f"{x / b:.3f}" if b and x else "-"
                    label_ = verdict.get(key, "-")
                    if label_ == "PASS" and (base is None or base.get("status") == "unreliable"):
                        label_ = "not gated (no trusted baseline)"
                    bucket = counts[condition]
                    bucket[label_] = bucket.get(label_, 0) + 1
                    injected = ((now or {}).get("extra") or {}).get("injected_matmuls")
                    check = not_as_asked(args, now, slowed=condition == "slowed")
                    base_status = "" if (base or {}).get("status") != "unreliable" else " (unreliable: no baseline)"
                    print(f"    {' · '.join(key):<36} baseline {b or 0:.3f}x {noise(base):>7}{base_status}  this run "
                          f"{x or 0:.3f}x {noise(now):>7}  ratio {ratio:>6}  iterations "
                          f"{iterations(now) if now else '-':>7}  {now.get('status') if now else '-':<10} gate "
                          f"{label_}" + (f"  (+{injected} matmuls)" if injected else "") + check, flush=True)
                print(f"    exit status {status}")
    print()
    for condition, found in counts.items():
        total = sum(found.values())
        text = ", ".join(f"{n} {label}" for label, n in sorted(found.items()))
        print(f"{condition}: {total} case verdicts over {args.runs} runs: {text}")
    unmod, slowed = counts["unmodified"], counts["slowed"]
    print(f"false alarms (SLOWER unmodified): {unmod.get('SLOWER', 0)}; caught (SLOWER slowed): "
          f"{slowed.get('SLOWER', 0)} of {sum(slowed.values())}; noisy (cannot gate at {1 - args.ratio:.0%}): "
          f"{unmod.get('NOISY', 0)} unmodified, {slowed.get('NOISY', 0)} slowed. Load now {load()}.")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
