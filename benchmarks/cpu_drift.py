"""Is the between-process noise the machine's own? CPU eager's step beside fixed work that involves no model.

    PJRT_DEVICE=CPU python benchmarks/cpu_drift.py [--processes 6] [--rounds 5] [--model resnet18]
        [--min-run-time 0.2] [--threads 1] [--no-aslr] [--rebuild | --redraw round|step [--settle-steps K]]
        [--mmap-threshold BYTES]

The question behind it (issue 31): CPU eager's median step moves ~20% between processes and up to 40% within one
after an idle spell, with no page fault and no other process (benchmarks/page_faults.py). If the machine itself
delivers a varying rate of work (a VM whose host changes its cores' clock, or lets another guest share the
physical core or its caches), then work that shares nothing with the model moves with it. Each of
``--processes`` fresh processes (one after the other) builds the model as the timing suite does (small tier,
seed 1337, torch_xla imported, ``--threads`` torch threads), then runs ``--rounds`` rounds of, in turn:

* ``eager``: CPU eager training steps of the model, calibrated to ``--min-run-time`` (ms per step);
* ``matmul``: a fixed 256x256 float32 matmul loop at the same threads (ms per 100 products: the CPU kernels
  eager uses, on data that stays in the core's caches);
* ``sha256``: hashlib over a 64 KB buffer, 2,000 times (ms; one core, integer work, no torch, no memory traffic);
* ``copy``: copying a 256 MB buffer into another once (ms; main memory bandwidth).

Printed per process: each workload's median over its rounds and the machine's steal time (``/proc/stat``) over
the process; then, per workload, the spread of the process medians ((max - min) / median) and the correlation of
each fixed workload's process medians with eager's. A fixed workload that spreads as eager does and moves with
it says the noise is the machine's rate of work; steal time says whether the host took the time away or made
each cycle slower. With ``--no-aslr`` each process starts without address-space layout randomization
(``setarch -R``): every process then places its libraries, heap and arenas at the same addresses, so a spread
that goes away with it is one of where eager's memory lands.

Where the memory lands *within* a process: glibc's malloc raises its mmap threshold when a large block is freed,
so after the first steps a step's activations come back to the same heap addresses, and the same physical pages,
at every step: a process keeps the placement it drew at its start. ``--rebuild`` draws a new placement each
round inside one process (a new model, inputs and optimizer, built while the old ones stay allocated and after
a random number of 4-120 KB heap blocks, kept, that shift where the next blocks land): if eager's rounds then
spread within a process as its medians do between processes, the placement is the cause.
``--redraw round`` (``step``) does what the timing suite's ``xla_placements=run`` (``step``) does before each
timed run (step) (:class:`pytest_xla_dynamo.timing.placement.Placement`): the same model, its parameters, buffers
and inputs moved to fresh storage after new heap spacers, the old ones let go (memory bounded, unlike
``--rebuild``), then ``--settle-steps`` untimed steps (default 2; the suite takes 1).
``--mmap-threshold BYTES`` fixes malloc's mmap threshold in each process (``mallopt(M_MMAP_THRESHOLD)``, which
also stops glibc from raising it): every block of that size or more is then a fresh ``mmap``, new pages at every
step, so every run averages over many placements (docs/timing.md: what both showed). Figures only: run it alone,
nothing else on the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORKLOADS = ("eager", "matmul", "sha256", "copy")


def _steal_ticks() -> int:
    """The machine's steal time so far, in clock ticks (all CPUs; 0 where the kernel does not count it)."""
    fields = Path("/proc/stat").read_text(encoding="ascii").splitlines()[0].split()
    return int(fields[8]) if len(fields) > 8 else 0


def timed(fn: Any, count: int) -> float:
    """Milliseconds of ``count`` calls of ``fn``."""
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return (time.perf_counter() - start) * 1000


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One process: build the model as the timing suite does, then the rounds; the medians as a dict."""
    import torch
    import torch_xla  # noqa: F401 - imported as the timing suite's process has it

    from pytest_xla_dynamo import zoo

    if args.mmap_threshold:
        from pytest_xla_dynamo.timing.placement import fresh_pages

        try:
            fresh_pages(args.mmap_threshold)
        except RuntimeError as err:
            raise SystemExit(str(err)) from None
    torch.manual_seed(1337)
    torch.set_num_threads(args.threads)
    spec = zoo.get_model(args.model)
    built: dict[str, Any] = {}
    from pytest_xla_dynamo.timing.placement import Placement

    placement = Placement()
    spacers: list[bytearray] = []  # --rebuild: heap blocks below the mmap threshold, kept, that shift the heap
    kept: list[dict[str, Any]] = []

    def build() -> None:
        torch.manual_seed(1337)
        built["model"] = spec.build_model("small")
        built["inputs"] = spec.build_inputs("small", spec.batch("small"))
        built["optimizer"] = torch.optim.SGD(built["model"].parameters(), lr=0.01)

    def step() -> None:
        built["optimizer"].zero_grad(set_to_none=True)
        spec.loss(built["model"](*built["inputs"])).backward()
        built["optimizer"].step()

    def redraw() -> None:  # --redraw: the timing suite's draw, then the untimed steps
        built["inputs"] = placement.redraw(built["model"], built["inputs"])
        for _ in range(args.settle_steps):
            step()

    build()

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    data, big, dst = os.urandom(64 * 1024), bytearray(256 * 1024 * 1024), bytearray(256 * 1024 * 1024)
    target = memoryview(dst)
    for _ in range(3):
        step()
    per_step = timed(step, 1)
    iterations = max(1, math.ceil(args.min_run_time * 1000 / per_step))
    steal = _steal_ticks()
    rounds: dict[str, list[float]] = {name: [] for name in WORKLOADS}
    for index in range(args.rounds):
        if args.rebuild and index:
            kept.append(dict(built))  # the old model stays allocated, so the new one cannot reuse its blocks
            spacers.extend(bytearray(random.randint(4, 120) * 1024) for _ in range(random.randint(50, 600)))
            build()
            for _ in range(2):
                step()
        if args.redraw == "round" and index:
            redraw()
        if args.redraw == "step":
            total = 0.0
            for _ in range(iterations):
                redraw()
                total += timed(step, 1)
            rounds["eager"].append(total / iterations)
        else:
            rounds["eager"].append(timed(step, iterations) / iterations)
        rounds["matmul"].append(timed(lambda: torch.mm(a, b), 100))
        rounds["sha256"].append(timed(lambda: hashlib.sha256(data).digest(), 2000))
        rounds["copy"].append(timed(lambda: target.__setitem__(slice(None), big), 1))
    ticks = os.sysconf("SC_CLK_TCK")
    return {"medians": {k: statistics.median(v) for k, v in rounds.items()}, "rounds": rounds,
            "steal_s": (_steal_ticks() - steal) / ticks, "iterations": iterations}


def spread(values: list[float]) -> float:
    """(max - min) / median."""
    return (max(values) - min(values)) / statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--min-run-time", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-aslr", action="store_true", help="start each process with setarch -R")
    parser.add_argument("--rebuild", action="store_true",
                        help="a new model, inputs and optimizer each round (the old kept), after random heap blocks")
    parser.add_argument("--redraw", choices=("none", "round", "step"), default="none",
                        help="the timing suite's placement redraw (xla_placements): before each round after the "
                             "first, or before each timed step")
    parser.add_argument("--settle-steps", type=int, default=2, help="untimed steps after each redraw")
    parser.add_argument("--mmap-threshold", type=int, default=0, metavar="BYTES",
                        help="fix malloc's mmap threshold in each process (0: glibc's dynamic default)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    results = []
    for index in range(args.processes):
        load = os.getloadavg()[0]
        prefix = ["setarch", platform.machine(), "-R"] if args.no_aslr else []
        done = subprocess.run([*prefix, sys.executable, __file__, "--child",
                               *(argv if argv is not None else sys.argv[1:])], capture_output=True, text=True,
                              check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        medians = "  ".join(f"{k} {v:.2f}" for k, v in result["medians"].items())
        print(f"process {index + 1}: {medians} ms (steal {result['steal_s']:.2f} s, load before {load:.2f})",
              flush=True)
    series = {k: [r["medians"][k] for r in results] for k in WORKLOADS}
    for name in WORKLOADS:
        corr = "" if name == "eager" or len(results) < 3 else \
            f", correlation with eager {statistics.correlation(series['eager'], series[name]):+.2f}"
        within = statistics.median(spread(r["rounds"][name]) for r in results)
        print(f"{name}: spread across processes {spread(series[name]):.1%}, within a process (median) "
              f"{within:.1%}{corr}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
