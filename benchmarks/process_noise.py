"""What moves a case's step between processes? Both sides of a case, in fresh processes started under varied conditions.

    PJRT_DEVICE=CPU python benchmarks/process_noise.py [--model BERT_pytorch] [--processes 6] [--rounds 5]
        [--min-run-time 0.2] [--conditions default,hashseed,fixed,pinned] [--mmap-threshold BYTES]

The question behind it (issue 31): with fresh pages (``xla_placements=fresh``) resnet18's processes agree
within ~2% and the A/B gate catches its injected 10% every time, but BERT_pytorch (a 5 ms step, mostly Python
and dispatch) still has single processes that stray 5-9%, on either side. Each fresh process here builds the
model as the timing suite does (small tier, seed 1337, one torch thread, ``PJRT_NPROC=1``), then runs
``--rounds`` rounds of, in turn, ``--min-run-time`` calibrated runs of

* ``eager``: CPU eager training steps (ms per step);
* ``xla``: trace-once training steps on the XLA device (``torch.compile(backend="openxla")``, each step ending
  in ``torch_xla.sync()``, one ``xm.wait_device_ops()`` per run, as the timing suite's runs; ms per step).

The processes are started one after the other, the conditions interleaved process by process (so that a drift of
the machine in time falls on every condition alike):

* ``default``: as the timing suite starts a process (hash seed and address layout drawn anew by each);
* ``hashseed``: ``PYTHONHASHSEED=0`` (Python's string hashes, so dict and set layouts, the same in every process;
  pyperf names hash randomization as a cause of between-process variance of Python-bound benchmarks);
* ``fixed``: ``PYTHONHASHSEED=0`` and no address-space layout randomization (``setarch -R``): every process starts
  with the same hashes and addresses, so what still moves is neither;
* ``pinned``: the whole process on one core (``taskset -c 0``): the Python thread and XLA:CPU's thread share it,
  so what moves with the threads' placement on the two cores goes;
* ``nogc``, ``pinned-nogc``: Python's cyclic garbage collector off during each timed run (``gc.collect()`` before
  it, ``gc.disable()`` for it: as ``timeit`` and pytest-benchmark's ``--benchmark-disable-gc`` do), so a collection
  that falls into one run and not another goes;
* ``huge``, ``pinned-huge``: torch's CPU allocator asks for transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``, as
  ``xla_placements=huge`` sets it), so where eager's large buffers land is decided in 2 MB pages, not 4 KB ones.

Every condition counts the collections that ran during each side's timed runs and their time (``gc.callbacks``).

Printed per process: each side's median over its rounds; then per condition and side the spread of the process
medians ((max - min) / median) and the MAD of the medians relative to their median, and the median spread of the
rounds within a process. A condition whose between-process spread falls to the within-process one names the cause.
Figures only: run it alone, nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

from cpu_drift import spread, timed  # this script's folder is on sys.path (run as a script, as its children are)

from pytest_xla_dynamo.timing.placement import THP_ENV  # torch's huge pages switch, set by the huge conditions

SIDES = ("eager", "xla")
CONDITIONS = ("default", "hashseed", "fixed", "pinned", "nogc", "pinned-nogc", "huge", "pinned-huge")
NOGC_ENV = "XLA_PROCESS_NOISE_NOGC"  # set by the nogc conditions for the child


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One process: both sides of the case built as the timing suite builds them, then the rounds."""
    import copy
    import gc

    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    from pytest_xla_dynamo import zoo

    if args.mmap_threshold:
        from pytest_xla_dynamo.timing.placement import fresh_pages

        fresh_pages(args.mmap_threshold)
    device = torch_xla.device()  # the runtime up before any CPU backward (pytorch/xla#4174)
    torch.set_num_threads(1)
    spec = zoo.get_model(args.model)
    torch.manual_seed(1337)
    model = spec.build_model("small")
    inputs = spec.build_inputs("small", spec.batch("small"))
    xla_model = copy.deepcopy(model).to(device)
    xla_inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
    compiled = torch.compile(xla_model, backend="openxla")
    optimizers = {"eager": torch.optim.SGD(model.parameters(), lr=0.01),
                  "xla": torch.optim.SGD(xla_model.parameters(), lr=0.01)}

    def eager_step() -> None:
        optimizers["eager"].zero_grad(set_to_none=True)
        spec.loss(model(*inputs)).backward()
        optimizers["eager"].step()

    def xla_step() -> None:
        optimizers["xla"].zero_grad(set_to_none=True)
        spec.loss(compiled(*xla_inputs)).backward()
        optimizers["xla"].step()
        torch_xla.sync()

    def xla_run(count: int) -> None:
        for _ in range(count):
            xla_step()
        xm.wait_device_ops()

    def eager_run(count: int) -> None:
        for _ in range(count):
            eager_step()

    runs = {"eager": eager_run, "xla": xla_run}
    iterations = {}
    for side, run in runs.items():
        for _ in range(3):  # compile and warm up
            run(1)
        per_step = timed(lambda run=run: run(1), 1)
        iterations[side] = max(1, math.ceil(args.min_run_time * 1000 / per_step))
    rounds: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    collected = {side: {"collections": 0, "full": 0, "ms": 0.0} for side in SIDES}
    clock: dict[str, Any] = {"side": None, "start": 0.0}

    def count(phase: str, info: dict[str, int]) -> None:  # gc.callbacks: the collections during the timed runs
        side = clock["side"]
        if side is None:
            return
        if phase == "start":
            clock["start"] = time.perf_counter()
            return
        collected[side]["collections"] += 1
        collected[side]["full"] += info["generation"] == 2
        collected[side]["ms"] += (time.perf_counter() - clock["start"]) * 1000

    gc.callbacks.append(count)
    nogc = os.environ.get(NOGC_ENV) == "1"
    for _ in range(args.rounds):
        for side, run in runs.items():
            n = iterations[side]
            if nogc:
                gc.collect()
                gc.disable()
            clock["side"], cpu_start = side, time.process_time()
            rounds[side].append(timed(lambda run=run, n=n: run(n), 1) / n)
            cpu[side].append((time.process_time() - cpu_start) * 1000 / n)
            clock["side"] = None
            gc.enable()
    return {"medians": {side: statistics.median(v) for side, v in rounds.items()}, "rounds": rounds,
            "cpu_ms": {side: statistics.median(v) for side, v in cpu.items()}, "iterations": iterations,
            "gc": collected, "affinity": sorted(os.sched_getaffinity(0)),
            "hashseed": os.environ.get("PYTHONHASHSEED", "")}


def _mad(values: list[float]) -> float:
    centre = statistics.median(values)
    return statistics.median(abs(v - centre) for v in values) / centre


def _command(condition: str, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PJRT_NPROC="1")
    prefix: list[str] = []
    if condition in ("hashseed", "fixed"):
        env["PYTHONHASHSEED"] = "0"
    if condition == "fixed":
        prefix = ["setarch", platform.machine(), "-R"]
    if condition in ("pinned", "pinned-nogc", "pinned-huge"):
        prefix = ["taskset", "-c", "0"]
    if condition in ("nogc", "pinned-nogc"):
        env[NOGC_ENV] = "1"
    if condition in ("huge", "pinned-huge"):
        env[THP_ENV] = "1"
    return [*prefix, sys.executable, __file__, "--child", *argv], env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="BERT_pytorch")
    parser.add_argument("--processes", type=int, default=6, help="processes per condition")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-run-time", type=float, default=0.2)
    parser.add_argument("--conditions", default=",".join(CONDITIONS),
                        help=f"a comma-separated subset of {', '.join(CONDITIONS)}")
    parser.add_argument("--mmap-threshold", type=int, default=0, metavar="BYTES",
                        help="fix malloc's mmap threshold in each process (131072: xla_placements=fresh)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad or not conditions:
        parser.error(f"--conditions: unknown {', '.join(bad) or '(none given)'}; valid: {', '.join(CONDITIONS)}")
    passed = ["--model", args.model, "--rounds", str(args.rounds), "--min-run-time", str(args.min_run_time),
              "--mmap-threshold", str(args.mmap_threshold)]
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in conditions}
    for index in range(args.processes):
        for condition in conditions:
            command, env = _command(condition, passed)
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                print(f"process {index + 1} ({condition}) failed:\n{done.stderr[-3000:]}", file=sys.stderr)
                return 1
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results[condition].append(result)
            sides = "  ".join(f"{k} {v:.3f} ms (cpu {result['cpu_ms'][k]:.3f})" for k, v in result["medians"].items())
            collections = "  ".join(f"{k} {v['collections']} ({v['full']} full) {v['ms']:.1f} ms"
                                    for k, v in result["gc"].items())
            print(f"{time.strftime('%H:%M:%S')} process {index + 1} {condition:8}: {sides}  "
                  f"iterations {result['iterations']}; gc in the runs: {collections}", flush=True)
    print()
    for condition in conditions:
        for side in SIDES:
            medians = [r["medians"][side] for r in results[condition]]
            within = statistics.median(spread(r["rounds"][side]) for r in results[condition])
            print(f"{condition:8} {side:5}: process medians {min(medians):.3f}-{max(medians):.3f} ms, spread across "
                  f"processes {spread(medians):.1%} (MAD {_mad(medians):.1%}), within a process (median) {within:.1%}")
        ratios = [r["medians"]["eager"] / r["medians"]["xla"] for r in results[condition]]
        within = statistics.median(spread([e / x for e, x in zip(r["rounds"]["eager"], r["rounds"]["xla"],
                                                                  strict=True)]) for r in results[condition])
        cores = statistics.median(r["cpu_ms"]["xla"] / r["medians"]["xla"] for r in results[condition])
        print(f"{condition:8} speedup: {min(ratios):.3f}-{max(ratios):.3f}x (median {statistics.median(ratios):.3f}x), "
              f"spread {spread(ratios):.1%} (MAD {_mad(ratios):.1%}), within a process (median) {within:.1%}; "
              f"the XLA side's cores (CPU / wall, median) {cores:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
