"""Wall time and XLA compilations of the parity suites over the zoo, against the number of cases.

    PJRT_DEVICE=CPU python benchmarks/zoo_run.py [-n 2] [--backends trace_once,trace_everytime] [pytest args]

Runs ``pytest suites/test_training_parity.py suites/test_inference_parity.py`` in a subprocess with a
JSON report, then prints: the wall time, the number of distinct (model, backend, mode) cases, the XLA
compilations the parity checks caused (``CompileTime`` samples, summed over the cases' records) and
compilations per case (the goal: one compilation set per case, none in steady state), and the outcome
line. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from pytest_xla_dynamo.report import read_json

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", default="2", help="pytest-xdist workers (0: none)")
    parser.add_argument("--backends", default="trace_once,trace_everytime")
    args, rest = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pytest", "suites/test_training_parity.py", "suites/test_inference_parity.py",
               f"--xla-backend={args.backends}", "-n", args.n, "-q", "-p", "no:cacheprovider",
               "--xla-report=json", f"--xla-report-dir={tmp}", *rest]
        print("running:", " ".join(cmd), flush=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - start
        lines = proc.stdout.splitlines()
        tail = [line for line in lines if line.startswith("=") and (" passed" in line or " failed" in line)][-1:]
        gate = [line for line in lines if line.startswith("xla-dynamo gate") or "REGRESSION" in line][:5]
        records = [r for r in read_json(Path(tmp) / "xla-dynamo.jsonl") if r.suite == "parity"]
    cases = {r.key for r in records}
    compiles = sum(r.compiles or 0 for r in records)
    statuses = Counter(r.status for r in records)
    per_case = [[*r.key, r.status, r.compiles] for r in records]
    print(tabulate(per_case, headers=["model", "backend", "mode", "status", "XLA compiles"], tablefmt="github"))
    print()
    print(tabulate([
        ["wall time (s)", f"{wall:.0f}"],
        ["xdist workers", args.n],
        ["cases (model, backend, mode)", len(cases)],
        ["XLA compilations (parity checks)", compiles],
        ["compilations per case", f"{compiles / max(len(cases), 1):.1f}"],
        ["statuses", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))],
        ["pytest", (tail[0].strip("= ") if tail else "") + f" (exit {proc.returncode})"],
    ], tablefmt="github"))
    for line in gate:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
