"""Wall time, XLA compile time and peak memory of the op suite over torch's OpInfo database, with its coverage.

    PJRT_DEVICE=CPU python benchmarks/ops_sweep.py [-n 2] [--ops all] [--report-dir DIR]
        [pytest args, e.g. --xla-expected=snapshots/expected_ops.csv --xla-write-repro=DIR]

Runs ``pytest suites/test_ops.py --xla-ops=OPS --xla-backend=trace_once,trace_everytime`` in a subprocess under
``/usr/bin/time -v`` where it exists (the session's largest process; the op servers are its children) with a
JSON report, then prints the wall time, the cases by status, the XLA compilations and their seconds (torch_xla's
``CompileTime`` summed over the cases' samples), the peak memory, the gate's verdict (with ``--xla-expected``) and
pytest's outcome line. Figures only;
nothing is asserted. Exits with pytest's exit status.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pytest_xla_dynamo.report import read_json

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", default="2", help="pytest-xdist workers (0: none)")
    parser.add_argument("--ops", default="all", help="--xla-ops (default: all)")
    parser.add_argument("--report-dir", type=Path, help="keep the reports here (default: a temporary folder)")
    args, rest = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.report_dir or Path(scratch)
        cmd = [sys.executable, "-m", "pytest", "suites/test_ops.py", f"--xla-ops={args.ops}", "-q",
               "--xla-backend=trace_once,trace_everytime", "--xla-report=json", f"--xla-report-dir={folder}",
               "-p", "no:cacheprovider", *(["-n", args.n] if args.n != "0" else []), *rest]
        if Path("/usr/bin/time").exists():
            cmd = ["/usr/bin/time", "-v", *cmd]
        start = time.monotonic()
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ}, check=False)
        wall = time.monotonic() - start
        records = [r for r in read_json(folder / "xla-dynamo.jsonl") if r.suite == "ops"] \
            if (folder / "xla-dynamo.jsonl").exists() else []
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    outcome = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln and "=" not in ln[:1]), "")
    seconds = sum(float(r.unparsed_extra.get("compile_seconds") or 0.0) for r in records)
    print(f"wall time {wall:.0f} s ({wall / 60:.1f} min), -n {args.n}, {len({r.name for r in records})} ops, "
          f"{len(records)} cases")
    print(f"XLA compile time {seconds:.0f} s in {sum(r.compiles or 0 for r in records)} compilations")
    if peak:
        print(f"peak RSS of the largest process {int(peak.group(1)) / 1e6:.2f} GB (GNU time)")
    for status, count in Counter(r.status for r in records).most_common():
        print(f"  {status:<20} {count}")
    for line in done.stdout.splitlines():
        if line.startswith("xla-dynamo gate") or line.startswith("xla-dynamo: updated"):
            print(line)  # the gate's verdict, with --xla-expected
    print(f"pytest: {outcome.strip()} (exit {done.returncode})")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
