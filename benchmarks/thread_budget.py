"""The thread budget's evidence: per thread count, eager and XLA steps quiet and with a busy process competing.

    PJRT_DEVICE=CPU python benchmarks/thread_budget.py [--models timm_vision_transformer,resnet18]
        [--threads 1,2] [--backend trace_once] [--mode train] [--steps 15] [--tier small]

One child process per thread count N (``PJRT_NPROC=N`` before the XLA runtime starts, ``torch.set_num_threads(N)``:
what ``xla_threads N`` sets). In it, per model: the eager (CPU) case and the ``--backend`` case are built
and warmed up, then ``--steps`` single steps of each are timed, interleaved, first quiet, then while a
busy-loop process (``while True: pass``, started and ended by the child) competes for the cores. Printed
per (threads, model, backend, condition): the median ms per step, the minimum, the spread
(max - min) / median and the median CPU/wall, and per (threads, model, backend) the busy / quiet ratio
of the medians. The load average is printed with each condition: on a shared machine every figure is
noisy. Figures only; nothing is asserted. ``auto`` in ``xla_threads`` is chosen from these figures
(see ``pytest_xla_dynamo.timing.threads``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BUSY = "while True: pass"
SETTLE_SECONDS = 2.0  # after starting the busy loop, before timing


def load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def summary(wall: list[float], cpu: list[float]) -> dict[str, float]:
    mid = statistics.median(wall)
    return {"median_ms": mid * 1e3, "min_ms": min(wall) * 1e3, "spread": (max(wall) - min(wall)) / mid,
            "cpu_wall": statistics.median(c / w for c, w in zip(cpu, wall, strict=True))}


def time_pair(cases: list[Any], steps: int) -> dict[str, dict[str, float]]:
    """``steps`` interleaved single-step runs of each case: name -> summary."""
    from pytest_xla_dynamo.timing.measure import timed_run

    runs: dict[str, tuple[list[float], list[float]]] = {c.backend.name: ([], []) for c in cases}
    for _ in range(steps):
        for case in cases:
            run = timed_run(case, 1)
            runs[case.backend.name][0].append(run.wall)
            runs[case.backend.name][1].append(run.cpu)
    return {name: summary(wall, cpu) for name, (wall, cpu) in runs.items()}


def child(args: argparse.Namespace) -> None:
    """Runs in the child process: prints one JSON line per (model, condition)."""
    import torch

    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import default_registry
    from pytest_xla_dynamo.core.cases import CaseKey, PreparedCase, build_inputs, build_model
    from pytest_xla_dynamo.core.devices import ensure_runtime
    from pytest_xla_dynamo.timing.measure import run_iterations

    threads = int(args.child)
    torch.set_num_threads(threads)
    ensure_runtime()
    registry = default_registry()
    for name in args.models.split(","):
        spec = zoo.get_model(name)
        cases = []
        for backend in (registry.get("eager"), registry.get(args.backend)):
            key = CaseKey(name, backend.name, args.mode, args.tier, 1337, (), False)
            case = PreparedCase(key, spec, backend, build_model(spec, args.tier, 1337, ()),
                                build_inputs(spec, args.tier, 1337, False))
            case.warm_up()
            run_iterations(case, 1)
            cases.append(case)
        for condition in ("quiet", "busy"):
            busy = None
            if condition == "busy":
                busy = subprocess.Popen([sys.executable, "-c", BUSY])
                time.sleep(SETTLE_SECONDS)
            try:
                before = load()
                figures = time_pair(cases, args.steps)
                after = load()
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            print("RESULT " + json.dumps({"threads": threads, "model": name, "condition": condition,
                                          "load": [before, after], "figures": figures,
                                          "torch_threads": torch.get_num_threads(),
                                          "PJRT_NPROC": os.environ.get("PJRT_NPROC")}), flush=True)
        del cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="timm_vision_transformer,resnet18")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--backend", default="trace_once")
    parser.add_argument("--mode", default="train", choices=("train", "infer"))
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--tier", default="small", choices=("small", "full"))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return 0
    rows: list[dict[str, Any]] = []
    print(f"cores: {os.cpu_count()}, load average at start: {load()}", flush=True)
    for threads in (int(t) for t in args.threads.split(",")):
        env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"), "PJRT_NPROC": str(threads)}
        cmd = [sys.executable, __file__, "--child", str(threads), "--models", args.models, "--backend",
               args.backend, "--mode", args.mode, "--steps", str(args.steps), "--tier", args.tier]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        got = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        print(f"threads {threads}: child exit {proc.returncode}, {time.perf_counter() - start:.0f} s", flush=True)
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-3000:])
        rows += got
    print(f"\n{'threads':>7} {'model':<24} {'backend':<16} {'condition':<9} {'median ms':>10} {'min ms':>9} "
          f"{'spread':>7} {'CPU/wall':>8}  load")
    for row in rows:
        for backend, fig in row["figures"].items():
            print(f"{row['threads']:>7} {row['model']:<24} {backend:<16} {row['condition']:<9} "
                  f"{fig['median_ms']:>10.1f} {fig['min_ms']:>9.1f} {fig['spread']:>7.2f} {fig['cpu_wall']:>8.2f}  "
                  f"{row['load'][0]}-{row['load'][1]}")
    print("\nbusy / quiet (median ms):")
    quiet = {(r["threads"], r["model"]): r for r in rows if r["condition"] == "quiet"}
    for row in rows:
        if row["condition"] != "busy" or (row["threads"], row["model"]) not in quiet:
            continue
        for backend, fig in row["figures"].items():
            base = quiet[(row["threads"], row["model"])]["figures"][backend]["median_ms"]
            print(f"  threads {row['threads']} {row['model']} {backend}: {fig['median_ms'] / base:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
