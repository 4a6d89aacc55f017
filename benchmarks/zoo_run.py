"""Wall time and XLA compilations of the parity suites over the zoo, against the number of cases.

    PJRT_DEVICE=CPU python benchmarks/zoo_run.py [-n 2] [--backends trace_once,trace_everytime] [--graphs]
        [--report-dir DIR] [pytest args, e.g. --xla-zoo=torchvision --xla-expected=... --xla-update-expected]

Runs ``pytest suites/test_training_parity.py suites/test_inference_parity.py`` (and ``suites/test_graphs.py``
with ``--graphs``, which reuses the parity cases' compiled models) in a subprocess with a JSON and CSV
report (kept in ``--report-dir``, else a temporary folder), then prints per case the status, XLA
compilations and their seconds (torch_xla's ``CompileTime``), and in total: the wall time, the number of
distinct (model, backend, mode) cases, the compilations and compile seconds the parity checks caused (the
goal: one compilation set per case, none in steady state), and the outcome line. Figures only; nothing is
asserted. Exits with pytest's exit status (a strict xfail that failed another way, or a gate regression,
fails the script as it fails pytest).
"""

from __future__ import annotations

import argparse
import codecs
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.report import read_json

REPO = Path(__file__).resolve().parents[1]


def compile_seconds(record: CaseRecord) -> float | None:
    """The seconds a parity record's XLA compilations took (None: not recorded)."""
    return record.parity.compile_seconds if record.parity is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", default="2", help="pytest-xdist workers (0: none)")
    parser.add_argument("--backends", default="trace_once,trace_everytime")
    parser.add_argument("--graphs", action="store_true", help="also run suites/test_graphs.py")
    parser.add_argument("--report-dir", type=Path, help="keep the reports here (default: a temporary folder)")
    args, rest = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(args.report_dir or scratch)
        suites = ["suites/test_training_parity.py", "suites/test_inference_parity.py"]
        suites += ["suites/test_graphs.py"] if args.graphs else []
        cmd = [sys.executable, "-m", "pytest", *suites,
               f"--xla-backend={args.backends}", "-n", args.n, "-q", "-p", "no:cacheprovider",
               "--xla-report=json,csv", f"--xla-report-dir={tmp}", *rest]
        print("running:", " ".join(cmd), flush=True)
        start = time.perf_counter()
        chunks: list[str] = []
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # a piped pytest buffers its output in 8 KB blocks otherwise
        with subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) as proc:
            assert proc.stdout is not None
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            # pytest's output as it comes, progress dots included (a line of them takes an hour of a broad run)
            while chunk := proc.stdout.read1(4096):  # type: ignore[attr-defined]
                text = decoder.decode(chunk)
                print(text, end="", flush=True)
                chunks.append(text)
        lines = "".join(chunks).splitlines()
        wall = time.perf_counter() - start
        tail = [line for line in lines if re.search(r"\d+ (passed|failed|xfailed|error)", line) and " in " in line][-1:]
        gate = [line for line in lines if line.startswith("xla-dynamo gate") or "REGRESSION" in line][:5]
        report = Path(tmp) / "xla-dynamo.jsonl"
        if not report.exists():
            print(f"no report {report}: pytest exited {proc.returncode} before writing it", flush=True)
            return 1
        records = [r for r in read_json(report) if r.suite == "parity"]
    cases = {r.key for r in records}
    compiles = sum(r.compiles or 0 for r in records)
    seconds = sum(compile_seconds(r) or 0.0 for r in records)
    statuses = Counter(r.status for r in records)
    per_case = [[*r.key, r.status, r.known_issue, r.compiles, compile_seconds(r)] for r in records]
    print()
    print(tabulate(per_case, headers=["model", "backend", "mode", "status", "known issue", "XLA compiles",
                                      "compile s"], tablefmt="github"))
    print()
    print(tabulate([
        ["wall time (s)", f"{wall:.0f}"],
        ["xdist workers", args.n],
        ["cases (model, backend, mode)", len(cases)],
        ["XLA compilations (parity checks)", compiles],
        ["XLA compile seconds (parity checks)", f"{seconds:.0f}"],
        ["compilations per case", f"{compiles / max(len(cases), 1):.1f}"],
        ["statuses", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))],
        ["pytest", (tail[0].strip("= ") if tail else "") + f" (exit {proc.returncode})"],
    ], tablefmt="github"))
    for line in gate:
        print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
