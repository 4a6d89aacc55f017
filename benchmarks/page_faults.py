"""Does the machine page out the eager baseline's code while it sits idle? Major page faults and step times.

    PJRT_DEVICE=CPU python benchmarks/page_faults.py [--model resnet18] [--mode train] [--runs 5]
        [--min-run-time 0.2] [--idle 90] [--cycles 2] [--threads 1]

The question behind it (issue 31): CPU eager's median step moves ~20% between processes here, and 15-45% between
the runs of one case. A timing case warms eager up, then spends tens of seconds compiling the XLA side, then times
both. If the kernel reclaims the pages eager's code and data live in while they sit unused (this VM runs a DAMON
``pageout`` scheme on its physical memory: regions not accessed for ~60 s are paged out, 128 MB/s at most, and
with no swap only file pages can go, the shared libraries' code among them), the first timed runs fault them
back in from disk. This script measures it in one process: it warms eager up, times ``--runs`` runs (calibrated
to ``--min-run-time`` each, as the suite's), then idles ``--idle`` seconds and times again, ``--cycles`` times. Per
run: ms per step, the process's major and minor page faults (``getrusage``); per phase the machine's
``pgmajfault`` and ``workingset_refault_file`` (``/proc/vmstat``). Figures only. Run it alone.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def vmstat(*keys: str) -> dict[str, int]:
    """The named counters of ``/proc/vmstat`` (empty where it cannot be read)."""
    try:
        pairs = (line.split() for line in Path("/proc/vmstat").read_text().splitlines())
        return {k: int(v) for k, v in pairs if k in keys}
    except OSError:
        return {}


def damon_schemes() -> list[str]:
    """What the machine's DAMON daemons do (``action`` and the coldness that triggers it), if it says."""
    found = []
    for action in sorted(DAMON.glob("*/contexts/*/schemes/*/action")):
        scheme = action.parent
        try:
            state = (scheme.parents[3] / "state").read_text().strip()
            age = (scheme / "access_pattern/age/min").read_text().strip()
            accesses = (scheme / "access_pattern/nr_accesses/max").read_text().strip()
            quota = (scheme / "quotas/bytes").read_text().strip()
            ops = (scheme.parents[1] / "operations").read_text().strip()
            found.append(f"{action.read_text().strip()} on {ops} ({state}): regions with at most {accesses} "
                         f"accesses per aggregation for {age}+ aggregations, {int(quota) >> 20} MB per quota interval")
        except (OSError, ValueError):
            continue
    return found


def build(model: str, mode: str, threads: int) -> Any:
    """The zoo's model (small tier, seed 1337) and a step function of it on CPU eager."""
    import torch
    import torch_xla  # noqa: F401  (loaded in the timing suite's process too)

    from pytest_xla_dynamo import zoo

    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    spec = zoo.get_model(model)
    net = spec.build_model("small")
    inputs = spec.build_inputs("small", spec.batch("small"))
    train = mode == "train"
    net.train(train)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def step() -> None:
        if train:
            opt.zero_grad(set_to_none=True)
            spec.loss(net(*inputs)).backward()
            opt.step()
        else:
            with torch.no_grad():
                net(*inputs)

    return step


def timed(step: Any, iterations: int) -> tuple[float, int, int]:
    """ms per step of one run of ``iterations`` steps, and the process's major and minor faults during it."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall / iterations * 1000, after.ru_majflt - before.ru_majflt, after.ru_minflt - before.ru_minflt


def phase(name: str, step: Any, iterations: int, runs: int) -> list[float]:
    counters = vmstat("pgmajfault", "workingset_refault_file")
    figures = [timed(step, iterations) for _ in range(runs)]
    after = vmstat("pgmajfault", "workingset_refault_file")
    delta = {k: after[k] - counters[k] for k in after if k in counters}
    for i, (ms, major, minor) in enumerate(figures, 1):
        print(f"  {name:12} run {i}: {ms:9.2f} ms/step  major faults {major:6d}  minor {minor:7d}")
    print(f"  {name:12} machine: {delta}  load {os.getloadavg()[0]:.2f}")
    return [ms for ms, _, _ in figures]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--mode", default="train", choices=("train", "infer"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--min-run-time", type=float, default=0.2)
    parser.add_argument("--idle", type=float, default=90.0, help="seconds idle between phases")
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    print(f"DAMON: {'; '.join(damon_schemes()) or 'none seen'}")
    step = build(args.model, args.mode, args.threads)
    for _ in range(3):  # warm-up
        step()
    start = time.perf_counter()
    step()
    iterations = max(1, math.ceil(args.min_run_time / (time.perf_counter() - start)))
    print(f"{args.model} {args.mode}, CPU eager, {args.threads} thread(s), {iterations} steps per run")
    medians = {"warm": statistics.median(phase("warm", step, iterations, args.runs))}
    for cycle in range(1, args.cycles + 1):
        print(f"  idle {args.idle:.0f} s ...")
        time.sleep(args.idle)
        medians[f"after idle {cycle}"] = statistics.median(phase(f"after idle {cycle}", step, iterations, args.runs))
    base = medians["warm"]
    print("medians: " + ", ".join(f"{k} {v:.2f} ms ({v / base - 1:+.1%})" for k, v in medians.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
