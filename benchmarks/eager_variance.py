"""Between-process variance of the CPU eager baseline: N fresh processes per condition, the eager median each.

    PJRT_DEVICE=CPU python benchmarks/eager_variance.py [--model resnet18] [--mode train] [--processes 5]
        [--conditions default,xla-first,malloc-arena-1,thp-off,pinned] [--runs 5] [--min-run-time 0.2]
        [--threads 1]

The timing gate's floor on this machine: the eager baseline's median step moves ~20% between processes
(1-10% within one), so a speedup moves with it whatever the backend did. Each process builds the model (small
tier, seed 1337), imports torch_xla as the timing suite's process has it, sets torch's threads to the suite's
budget, warms eager up, then times ``--runs`` runs of ceil(min run time / step) training steps (the suite's
calibrated runs) and prints the median per iteration. Conditions (one fresh process each, round-robin, so that
the machine's drift falls on all of them alike):

* ``default``: as the timing suite's process runs eager;
* ``xla-first``: the model's XLA step (lazy tensors, ``torch_xla.sync()``) runs 3 times before eager warms up
  (the suite's order: the warm-ups are per case, XLA's compile beside eager's);
* ``malloc-arena-1``: ``MALLOC_ARENA_MAX=1`` (glibc's per-thread arenas off);
* ``thp-off``: transparent huge pages off for the process (``prctl(PR_SET_THP_DISABLE)``, inherited; the
  machine's setting, ``/sys/kernel/mm/transparent_hugepage/enabled``, is printed and left alone);
* ``pinned``: the process pinned to one core (``sched_setaffinity``, as ``taskset -c 0``).

Printed per condition: each process's eager median (ms) and its within-process spread, then the spread of the
medians across processes ((max - min) / median) and their coefficient of variation. Figures only; measure on a
quiet machine (the load is printed before and after each process).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONDITIONS = ("default", "xla-first", "malloc-arena-1", "thp-off", "pinned")
PR_SET_THP_DISABLE = 41
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def child(args: argparse.Namespace) -> None:
    """One process: the eager figures of one model, as JSON on stdout."""
    import copy

    import torch
    import torch_xla  # loaded in the timing suite's process too (used by xla-first)

    from pytest_xla_dynamo import zoo

    torch.manual_seed(1337)
    torch.set_num_threads(args.threads)
    spec = zoo.get_model(args.model)
    model = spec.build_model("small")
    inputs = spec.build_inputs("small", spec.batch("small"))
    train = args.mode == "train"
    model.train(train)

    def stepper(m: Any, ins: Any, after: Callable[[], None] = lambda: None) -> Callable[[], None]:
        opt = torch.optim.SGD(m.parameters(), lr=0.01)

        def step() -> None:
            if train:
                opt.zero_grad(set_to_none=True)
                spec.loss(m(*ins)).backward()
                opt.step()
            else:
                with torch.no_grad():
                    m(*ins)
            after()
        return step

    if args.condition == "xla-first":
        device = torch_xla.device()
        xla_step = stepper(copy.deepcopy(model).to(device), tuple(t.to(device) for t in inputs), torch_xla.sync)
        for _ in range(3):
            xla_step()
        torch_xla.sync()
    step = stepper(model, inputs)
    warm = []
    for _ in range(3):
        start = time.perf_counter()
        step()
        warm.append(time.perf_counter() - start)
    iterations = max(1, math.ceil(args.min_run_time / min(warm[1:])))
    runs = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(iterations):
            step()
        runs.append((time.perf_counter() - start) / iterations * 1000)
    print(json.dumps({"runs_ms": runs, "iterations": iterations, "affinity": sorted(os.sched_getaffinity(0))}))


def _preexec(condition: str) -> Callable[[], None] | None:
    if condition == "thp-off":
        def thp_off() -> None:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)
        return thp_off
    if condition == "pinned":
        def pin() -> None:
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return pin
    return None


def run_child(args: argparse.Namespace, condition: str) -> dict[str, Any] | None:
    env = dict(os.environ)
    if condition == "malloc-arena-1":
        env["MALLOC_ARENA_MAX"] = "1"
    cmd = [sys.executable, __file__, "--child", "--condition", condition, "--model", args.model, "--mode", args.mode,
           "--runs", str(args.runs), "--min-run-time", str(args.min_run_time), "--threads", str(args.threads)]
    before = load()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                          preexec_fn=_preexec(condition))
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith("{")), None)
    if proc.returncode or line is None:
        print(f"  {condition}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        return None
    found: dict[str, Any] = json.loads(line)
    found["load"] = f"{before} -> {load()}"
    return found


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--mode", default="train", choices=("train", "infer"))
    parser.add_argument("--processes", type=int, default=5, help="N: fresh processes per condition")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--runs", type=int, default=5, help="timed runs per process")
    parser.add_argument("--min-run-time", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads (the suite's budget: 1 on 2 cores)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--condition", default="default", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    os.environ.setdefault("PJRT_NPROC", str(args.threads))
    if args.child:
        child(args)
        return 0
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad:
        parser.error(f"--conditions: unknown {', '.join(bad)}; valid: {', '.join(CONDITIONS)}")
    thp = THP.read_text().strip() if THP.exists() else "not readable"
    print(f"cores: {os.cpu_count()}, load at start: {load()}; THP: {thp}; {args.model} {args.mode}, {args.processes} "
          f"processes per condition, {args.runs} runs each of >= {args.min_run_time} s, threads {args.threads}",
          flush=True)
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in conditions}
    for index in range(args.processes):
        for condition in conditions:  # round-robin: drift falls on every condition alike
            found = run_child(args, condition)
            if found is not None:
                results[condition].append(found)
                med = statistics.median(found["runs_ms"])
                print(f"  process {index + 1} {condition:<15} eager median {med:8.2f} ms (within: spread "
                      f"{spread(found['runs_ms']):.1%}, {found['iterations']} iterations per run, cores "
                      f"{found['affinity']}), load {found['load']}", flush=True)
    print(f"\n{'condition':<15} {'processes':>9} {'medians (ms)':<44} {'spread':>7} {'cv':>6} {'within':>7}")
    for condition, processes in results.items():
        if not processes:
            continue
        medians = [statistics.median(f["runs_ms"]) for f in processes]
        cv = statistics.stdev(medians) / statistics.mean(medians) if len(medians) > 1 else 0.0
        within = statistics.median(spread(f["runs_ms"]) for f in processes)
        print(f"{condition:<15} {len(processes):>9} {', '.join(f'{m:.1f}' for m in medians):<44} "
              f"{spread(medians):>7.1%} {cv:>6.1%} {within:>7.1%}")
    print(f"load at the end: {load()}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
