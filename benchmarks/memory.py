"""Memory of a session over a model list: RSS after each model, each model's peak, the session's peak.

    PJRT_DEVICE=CPU python benchmarks/memory.py --models resnet18,alexnet,... [--suites graphs,parity,timing]
        [--backends trace_once] [--single] [--out FILE.jsonl] [pytest args, e.g. --xla-zoo=torchvision]

Runs the suites once, in one pytest process (or its xdist workers, with ``-n 2`` among the pytest args), with
``benchmarks/memory_probe.py`` recording after each test the process's RSS and its peak since the model's first
test began. Prints per model: its tests, the RSS after its last test, its own peak; then the RSS after the first
and after the last model, the largest process's peak (its VmHWM, what GNU time reports) and the peak of all the
session's processes together (pytest, its workers and their children: their RSS summed every 0.5 s by
``pytest_xla_dynamo.timing.memory.TreeSampler``), with each process's own peak. With ``--single``,
each model's largest test (the one that set its peak) runs again alone in a fresh process, and the table
adds that single-case peak and the ratio of the model's peak in the session to it. Figures only: nothing
is asserted.
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

from tabulate import tabulate

from pytest_xla_dynamo.timing.memory import TreeSampler

REPO = Path(__file__).resolve().parents[1]
SUITES = {"graphs": "suites/test_graphs.py", "parity": "suites/test_inference_parity.py "
          "suites/test_training_parity.py", "timing": "suites/test_timing.py"}
GB = 1e6  # kB per GB (10**9 bytes), as the report's columns


def _pytest(args: list[str], probe: Path) -> tuple[int, float, dict[str, Any] | None]:
    """Run pytest with the probe; (exit status, wall seconds, the summed peak of its processes: TreeSampler's)."""
    env = dict(os.environ, XLA_MEMORY_PROBE=str(probe), PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "benchmarks"), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args, "-p", "memory_probe", "-p", "no:cacheprovider",
                             "-q", "-p", "no:randomly"], cwd=REPO, env=env)
    sampler = TreeSampler(root=proc.pid, root_label="pytest")
    sampler.start()
    status = proc.wait()
    return status, time.perf_counter() - start, sampler.stop()


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="comma-separated model names, run in this order")
    parser.add_argument("--suites", default="graphs,parity,timing", help=f"of {', '.join(SUITES)}")
    parser.add_argument("--backends", default="trace_once")
    parser.add_argument("--single", action="store_true", help="also run each model's largest test alone")
    parser.add_argument("--out", help="keep the probe's JSON lines here")
    args, rest = parser.parse_known_args(argv)
    unknown = [s for s in args.suites.split(",") if s not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; valid: {', '.join(SUITES)}")
    files = [f for s in args.suites.split(",") for f in SUITES[s].split()]
    models = [m for m in args.models.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="xla-memory-") as tmp:
        probe = Path(args.out) if args.out else Path(tmp) / "probe.jsonl"
        probe.unlink(missing_ok=True)
        common = [f"--xla-backend={args.backends}", *rest]
        status, wall, summed = _pytest([*files, f"--xla-models={','.join(models)}", *common], probe)
        every = _lines(probe)
        peak = max((d.get("session_peak_kb", d["hwm_kb"]) for d in every), default=0)
        lines = [d for d in every if d.get("model")]
        rows = []
        after: dict[str, float] = {}
        for model in models:
            mine = [d for d in lines if d["model"] == model]
            if not mine:
                rows.append([model, 0, "", "", "", ""])
                continue
            top = max(mine, key=lambda d: d["hwm_kb"])
            after[model] = mine[-1]["rss_kb"] / GB
            row: list[Any] = [model, len(mine), f"{after[model]:.2f}", f"{top['hwm_kb'] / GB:.2f}"]
            if args.single:
                alone = Path(tmp) / f"single-{model}.jsonl"
                _pytest([top["nodeid"], "-p", "no:xdist", *common], alone)
                single = max((d["hwm_kb"] for d in _lines(alone) if d.get("model")), default=0)
                row += [f"{single / GB:.2f}", f"{top['hwm_kb'] / single:.2f}x" if single else "",
                        top["nodeid"].split("::")[-1]]
            rows.append(row)
    headers = ["model", "tests", "RSS after (GB)", "model peak (GB)"]
    if args.single:
        headers += ["single-case peak (GB)", "ratio", "largest test"]
    print(tabulate(rows, headers=headers, tablefmt="github"))
    if after:
        first, last = next(iter(after.items())), list(after.items())[-1]
        print(f"RSS after the first model ({first[0]}): {first[1]:.2f} GB; after the last ({last[0]}): "
              f"{last[1]:.2f} GB; difference {last[1] - first[1]:+.2f} GB")
    print(f"largest process's peak RSS: {peak / GB:.2f} GB; wall {wall:.0f} s; pytest exit status {status}")
    print(summed_line(summed))
    return status


def summed_line(summed: dict[str, Any] | None) -> str:
    """The peak of all the session's processes together, and each process's own peak (VmHWM, as last read)."""
    if summed is None:
        return "all processes together: not sampled (no /proc)"
    own = ", ".join(f"{name} {kb / GB:.2f}" for name, kb in sorted(summed["processes_peak_rss_kb"].items(),
                                                                    key=lambda item: -item[1]))
    return (f"all processes together: peak {summed['summed_peak_rss_kb'] / GB:.2f} GB (RSS summed every "
            f"{summed['sample_interval_s']} s, {len(summed['at_peak_rss_kb'])} processes at that moment); each "
            f"process's own peak (GB): {own}")


if __name__ == "__main__":
    sys.exit(main())
