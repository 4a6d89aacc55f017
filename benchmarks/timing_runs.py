"""Run-to-run spread of the timing suite: the same suite run several times, each speedup's spread across runs.

    PJRT_DEVICE=CPU python benchmarks/timing_runs.py --runs 3 --out runs/small-ipr1 [--first 2] \\
        [--xla-iterations-per-run=1 --xla-backend=trace_once,trace_everytime ... any pytest args]

Runs ``pytest suites/test_timing.py`` ``--runs`` times, one subprocess each, with
``--xla-report=table,csv,json,png`` into ``<out>/run<i>/`` (every other argument goes to pytest), then
prints per case (model, backend, mode): the speedup of each run, their median, and the run-to-run spread
(max - min) / median (issue 14's goal: 5% or less on a quiet machine; how many cases meet it), with each run's status
(``unreliable`` runs are listed but left out of the median and spread), and the same per mode for the
geomean. Figures only; exit status 1 when a run produced no report.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_timing.py"
GOAL = 0.05


def spread(values: list[float]) -> float | None:
    """(max - min) / median of two or more values (None otherwise)."""
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / statistics.median(values)


def read(path: Path) -> list[dict[str, Any]]:
    return [r for r in (json.loads(line) for line in path.read_text().splitlines() if line.strip())
            if r.get("suite") == "timing"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs' reports (run1, run2, ...)")
    parser.add_argument("--first", type=int, default=1,
                        help="first run to measure; earlier runs are read from <out>/run<i> (a long series split "
                             "over several sittings, each on a quiet machine)")
    args, rest = parser.parse_known_args()
    rest = [a for a in rest if a != "--"]
    speedups: dict[tuple[str, str, str], list[tuple[float | None, str]]] = defaultdict(list)
    missing = False
    for i in range(1, args.runs + 1):
        out = args.out / f"run{i}"
        path = out / "xla-dynamo.jsonl"
        if i < args.first:
            if not path.exists():
                print(f"run {i}: no {path} (measure it, or start at --first {i})", flush=True)
                missing = True
                continue
            print(f"run {i}: read from {path}", flush=True)
            for r in read(path):
                speedups[(r["name"], r["backend"], r["mode"])].append((r.get("speedup"), r.get("status", "")))
            continue
        cmd = [sys.executable, "-m", "pytest", str(SUITE), "-p", "no:xdist", "-p", "no:cacheprovider",
               "--xla-report=table,csv,json,png", f"--xla-report-dir={out}", *rest]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        (args.out / f"run{i}.log").write_text(proc.stdout + proc.stderr)
        print(f"run {i}: exit {proc.returncode}, {time.perf_counter() - start:.0f} s, log {args.out}/run{i}.log",
              flush=True)
        if not path.exists():
            missing = True
            continue
        for r in read(path):
            speedups[(r["name"], r["backend"], r["mode"])].append((r.get("speedup"), r.get("status", "")))
    print("\n| model | backend | mode | speedup per run | median | spread (max - min) / median |")
    print("|---|---|---|---|---|---|")
    geo: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    worst, within, measured = 0.0, 0, 0
    for (model, backend, mode), runs in sorted(speedups.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        good = [s for s, status in runs if s is not None and status != "unreliable"]
        for i, (s, status) in enumerate(runs):
            if s is not None and status != "unreliable":
                geo[(mode, backend, i)].append(s)
        shown = ", ".join(f"{s:.3g}x" + ("" if status == "pass" else f" ({status})") if s is not None else status
                          for s, status in runs)
        sp = spread(good)
        worst = max(worst, sp or 0.0)
        if sp is not None:
            measured += 1
            within += sp <= GOAL
        print(f"| {model} | {backend} | {mode} | {shown} | "
              f"{(f'{statistics.median(good):.3g}x' if good else '-')} | {(f'{sp:.1%}' if sp is not None else '-')} |")
    by_mode: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (mode, backend, _), values in geo.items():
        if values:
            by_mode[(mode, backend)].append(math.exp(sum(math.log(v) for v in values) / len(values)))
    for (mode, backend), values in sorted(by_mode.items()):
        sp = spread(values)
        print(f"| geomean | {backend} | {mode} | {', '.join(f'{v:.3g}x' for v in values)} | "
              f"{statistics.median(values):.3g}x | {(f'{sp:.1%}' if sp is not None else '-')} |")
    print(f"\n{within} of {measured} cases within {GOAL:.0%} run to run; "
          f"largest per-case spread: {worst:.1%} (goal: {GOAL:.0%} or less on a quiet machine)")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
