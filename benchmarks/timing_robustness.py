"""Timing robustness: the same timing cases quiet and with busy processes competing, side by side.

    PJRT_DEVICE=CPU python benchmarks/timing_robustness.py [--models BERT_pytorch,timm_vision_transformer]
        [--modes train] [--backends trace_once] [--repeat 5] [--iterations-per-run 1] [--threads auto]
        [--busy 1] [--pairs 1] [-- extra pytest args]

One pytest subprocess per condition runs ``suites/test_timing.py`` with a JSON report: first *quiet*
(nothing started), then *busy* (``--busy`` processes running ``while True: pass``, started before the
subprocess and ended after it; ``--pairs`` repeats the two). Printed per case (model, backend, mode):
the quiet speedup, the busy speedup, busy / quiet, both statuses, and the verdict against issue 14's goal:

* ``ok``: the busy figure is within 15% of the quiet one, or it is flagged (status ``unreliable``);
* ``drift``: off by 15-30% and not flagged (short of the goal);
* ``MISSED``: off by more than 30% and not flagged (the failure the issue forbids).

A quiet figure that is itself ``unreliable`` is no reference: its cases are marked ``(quiet unreliable)``.
Figures only, nothing asserted; the exit status is 0 unless a subprocess failed to produce a report. Two
models x one backend x train run in a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "test_timing.py"
BUSY = "while True: pass"
WITHIN = 0.15  # the goal: within 15% of quiet, or flagged
NEVER = 0.30  # and never off by more than 30% unflagged
UNRELIABLE = "unreliable"


def load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def pytest_cmd(args: argparse.Namespace, report_dir: Path, rest: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", str(SUITE), f"--xla-models={args.models}", f"--xla-modes={args.modes}",
            f"--xla-backend={args.backends}", f"--xla-repeat={args.repeat}",
            f"--xla-iterations-per-run={args.iterations_per_run}", "-o", f"xla_threads={args.threads}",
            "--xla-report=json", f"--xla-report-dir={report_dir}", "-p", "no:xdist", "-p", "no:cacheprovider",
            "-q", "-W", "ignore::pytest.PytestUnknownMarkWarning", *rest]


def run_condition(args: argparse.Namespace, condition: str, tmp: Path, rest: list[str]) -> list[dict[str, Any]]:
    """One pytest subprocess under ``condition`` ("quiet" or "busy"); its timing records."""
    report_dir = tmp / condition
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy if condition == "busy" else 0)]
    start = time.perf_counter()
    try:
        before = load()
        proc = subprocess.run(pytest_cmd(args, report_dir, rest), cwd=ROOT, capture_output=True, text=True,
                              check=False)
        after = load()
    finally:
        for p in busy:
            p.kill()
            p.wait()
    wall = time.perf_counter() - start
    tail = [line for line in proc.stdout.splitlines() if " passed" in line or " failed" in line][-1:]
    print(f"{condition}: {len(busy)} busy process(es), exit {proc.returncode}, {wall:.0f} s, load {before} -> "
          f"{after}; {tail[0].strip('= ') if tail else ''}", flush=True)
    path = report_dir / "xla-dynamo.jsonl"
    if not path.exists():
        print(proc.stdout[-3000:] + proc.stderr[-3000:])
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("suite") == "timing"]


def verdict(quiet: dict[str, Any], busy: dict[str, Any]) -> tuple[float | None, str]:
    """(busy / quiet speedup, the verdict: ok, drift or MISSED)."""
    if quiet.get("speedup") is None or busy.get("speedup") is None:
        return None, "no figure"
    ratio = float(busy["speedup"]) / float(quiet["speedup"])
    off = abs(ratio - 1.0)
    flagged = busy.get("status") == UNRELIABLE
    if off <= WITHIN or flagged:
        text = "ok"
    elif off <= NEVER:
        text = "drift"
    else:
        text = "MISSED"
    if quiet.get("status") == UNRELIABLE:
        text += " (quiet unreliable)"
    return ratio, text


def why(record: dict[str, Any]) -> str:
    reasons = (record.get("extra") or {}).get("interference", {}).get("reasons") or []
    return "; ".join(reasons)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="BERT_pytorch,timm_vision_transformer")
    parser.add_argument("--modes", default="train")
    parser.add_argument("--backends", default="trace_once")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--iterations-per-run", type=int, default=1)
    parser.add_argument("--threads", default="auto", help="xla_threads for both conditions")
    parser.add_argument("--busy", type=int, default=1, help="busy-loop processes in the busy condition")
    parser.add_argument("--pairs", type=int, default=1, help="(quiet, busy) pairs to run")
    args, rest = parser.parse_known_args()
    rest = [a for a in rest if a != "--"]
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    print(f"cores: {os.cpu_count()}, load at start: {load()}; models {args.models}, modes {args.modes}, backends "
          f"{args.backends}, repeat {args.repeat}, iterations per run {args.iterations_per_run}, threads "
          f"{args.threads}, busy processes {args.busy}", flush=True)
    rows = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="xla-robust-") as name:
        for pair in range(args.pairs):
            tmp = Path(name) / f"pair{pair}"
            quiet = {(r["name"], r["backend"], r["mode"]): r for r in run_condition(args, "quiet", tmp, rest)}
            busy = {(r["name"], r["backend"], r["mode"]): r for r in run_condition(args, "busy", tmp, rest)}
            failed = failed or not quiet or not busy
            for key in sorted(set(quiet) & set(busy)):
                ratio, text = verdict(quiet[key], busy[key])
                rows.append((pair + 1, *key, quiet[key], busy[key], ratio, text))
    print(f"\n{'pair':>4} {'model':<24} {'backend':<16} {'mode':<5} {'quiet':>8} {'busy':>8} {'busy/quiet':>10} "
          f"{'quiet status':<12} {'busy status':<12} verdict")
    for pair, model, backend, mode, q, b, ratio, text in rows:
        def fig(r: dict[str, Any]) -> str:
            return f"{r['speedup']:.3f}x" if r.get("speedup") is not None else "-"

        print(f"{pair:>4} {model:<24} {backend:<16} {mode:<5} {fig(q):>8} {fig(b):>8} "
              f"{(f'{ratio:.2f}' if ratio is not None else '-'):>10} {q['status']:<12} {b['status']:<12} {text}")
        for label, r in (("quiet", q), ("busy", b)):
            if why(r):
                print(f"{'':>5}{label} flagged: {why(r)}")
    missed = sum(1 for row in rows if row[-1].startswith("MISSED"))
    drift = sum(1 for row in rows if row[-1].startswith("drift"))
    flagged = sum(1 for row in rows if row[5]["status"] == UNRELIABLE)
    print(f"\n{len(rows)} cases: {flagged} busy figure(s) flagged unreliable, {drift} drift (15-30% unflagged), "
          f"{missed} MISSED (> 30% unflagged). Goal: every busy figure within 15% of quiet or flagged; none off by "
          f"more than 30% unflagged: {'met' if not missed and not drift else 'NOT met'}.")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
