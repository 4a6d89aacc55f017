"""The timing harness's own cost: the plugin's per-iteration figure against a hand-written loop.

    PJRT_DEVICE=CPU python benchmarks/harness_overhead.py [--model resnet18] [--backend trace_once]
        [--mode train] [--iterations-per-run 1] [--repeat 5] [--blocks 6] [--runs 3] [--no-subprocess]

Part 1, one process. ``suites/test_timing.py`` runs in-process once (``pytest.main``, through
pytest-benchmark, for one model x backend x mode). Its prepared cases (the compiled model, its
optimizer and inputs, and the eager baseline) are kept, and the same compiled step is then timed by a
hand-written loop with the same syncs: per iteration zero_grad, forward, loss, backward, SGD step,
``torch_xla.sync()``; one ``xm.wait_device_ops()`` per run; the eager baseline's hand-written run
interleaved before each backend run, as the plugin does. Printed:

* plugin (pytest run) / hand loop right after it: the per-iteration medians' ratio (goal: within 2%
  of 1.0);
* ``--blocks`` alternating blocks of the plugin's measuring code (``timing.measure``, no
  pytest-benchmark) and the hand loop, on the same cases: the ratio of the medians over all blocks,
  which cancels the machine's drift better than one pair, and the ratio of the process CPU seconds
  of those blocks (steadier than wall time when other processes compete for the cores);
* pytest-benchmark's own median of the same timed runs (its ``--benchmark-json`` stats, per run,
  divided by the iterations) against the plugin's inner ``perf_counter`` figure: what
  pytest-benchmark's wrapper adds.

Part 2: ``--runs`` pytest subprocesses of the same case; their speedups and the spread
(max - min) / median across them.

Only figures are printed; nothing is asserted. On a shared machine every figure is noisy: the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SUITE = ROOT / "suites" / "test_timing.py"


def pytest_args(args: argparse.Namespace, json_path: Path) -> list[str]:
    return [str(SUITE), "-k", args.mode, f"--xla-models={args.model}", f"--xla-backend={args.backend}",
            f"--xla-modes={args.mode}", f"--xla-iterations-per-run={args.iterations_per_run}",
            f"--xla-repeat={args.repeat}", "--xla-report=", "-p", "no:xdist", "-p", "no:cacheprovider",
            f"--benchmark-json={json_path}", "-q", "-W", "ignore::pytest.PytestUnknownMarkWarning"]


class Grab:
    """A pytest plugin object keeping the session's timing records and prepared cases."""

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.cases: list[Any] = []

    def pytest_sessionfinish(self, session: Any) -> None:
        from pytest_xla_dynamo.session import get_session

        xla = get_session(session.config)
        self.records = xla.store.by_suite("timing")
        self.cases = list(xla.engine.cases)


def hand_run(case: Any, iterations: int) -> float:
    """One timed run written out by hand: the same compiled callable, optimizer, inputs and syncs."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm

    fn, opt, inputs, loss_fn = case.fn, case.optimizer, case.inputs, case.spec.loss
    on_xla = case.backend.is_xla
    start = time.perf_counter()
    for _ in range(iterations):
        if case.mode == "infer":
            with torch.no_grad():
                fn(*inputs)
        else:
            opt.zero_grad(set_to_none=True)
            out = fn(*inputs)
            loss_fn(out).backward()
            opt.step()
        if on_xla:
            torch_xla.sync()
    if on_xla:
        xm.wait_device_ops()
    return time.perf_counter() - start


def hand_block(case: Any, baseline: Any, iterations: int, repeat: int) -> list[float]:
    """``repeat`` hand-written backend runs (per-iteration seconds), each after a baseline run."""
    from pytest_xla_dynamo.timing.measure import run_iterations

    for c in (baseline, case):
        c.reset()
        run_iterations(c, 1)  # the plugin primes both cases the same way
        c.backend.sync()
        c.backend.wait()
    out = []
    for _ in range(repeat):
        hand_run(baseline, iterations)
        out.append(hand_run(case, iterations) / iterations)
    return out


def plugin_block(case: Any, baseline: Any, iterations: int, repeat: int) -> list[float]:
    from pytest_xla_dynamo.timing.measure import measure

    return list(measure(case, baseline, iterations, repeat).figures.backend)


def med(values: list[float]) -> float:
    return float(statistics.median(values))


def load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
    except OSError:
        return "load average unknown"


def part1(args: argparse.Namespace, tmp: Path) -> None:
    import pytest

    grab = Grab()
    json_path = tmp / "inprocess.json"
    start = time.perf_counter()
    code = pytest.main(pytest_args(args, json_path), plugins=[grab])
    print(f"in-process pytest run: exit {int(code)}, {time.perf_counter() - start:.1f} s wall ({load()})")
    if not grab.records or grab.records[0].abs_latency is None:
        print("no timing record: nothing to compare")
        return
    from pytest_xla_dynamo.timing.stats import spread  # after pytest.main: the plugin's modules get rewritten

    record = grab.records[0]
    case = next(c for c in grab.cases if c.key.backend == record.backend and c.key.mode == args.mode)
    baseline = next(c for c in grab.cases if c.key.backend == record.baseline and c.key.mode == args.mode)
    n, r = args.iterations_per_run, args.repeat
    plugin_ms = record.abs_latency
    hand = hand_block(case, baseline, n, r)
    print(f"\n{record.name} {record.backend} {args.mode}, {n} iteration(s) per run, {r} runs per figure")
    print(f"plugin (pytest run): median {plugin_ms:.2f} ms/iteration, spread {record.spread:.3f}, "
          f"speedup {record.speedup:.3f}")
    print(f"hand loop right after: median {med(hand) * 1e3:.2f} ms/iteration, spread {spread(hand):.3f}")
    print(f"ratio plugin / hand: {plugin_ms / (med(hand) * 1e3):.4f}  (goal: within 0.02 of 1.0)")

    bench = json.loads(json_path.read_text())["benchmarks"][0]
    bench_ms = bench["stats"]["median"] / n * 1e3
    print(f"pytest-benchmark's median of the same runs: {bench_ms:.3f} ms/iteration vs the plugin's inner "
          f"{plugin_ms:.3f} ms: ratio {bench_ms / plugin_ms:.5f}")

    plugin_all: list[float] = []
    hand_all: list[float] = []
    cpu_plugin: list[float] = []
    cpu_hand: list[float] = []
    print(f"\n{args.blocks} alternating blocks (timing.measure vs hand loop), ms/iteration medians; process CPU "
          "seconds per block (reset, priming, baseline and backend runs: the same work in both):")
    for i in range(args.blocks):
        c0 = time.process_time()
        p = plugin_block(case, baseline, n, r)
        c1 = time.process_time()
        h = hand_block(case, baseline, n, r)
        c2 = time.process_time()
        plugin_all += p
        hand_all += h
        cpu_plugin.append(c1 - c0)
        cpu_hand.append(c2 - c1)
        print(f"  block {i + 1}: plugin {med(p) * 1e3:.2f}  hand {med(h) * 1e3:.2f}  ratio {med(p) / med(h):.4f}"
              f"   CPU s: plugin {c1 - c0:.2f}  hand {c2 - c1:.2f}  ratio {(c1 - c0) / (c2 - c1):.4f}")
    print(f"over all blocks: plugin {med(plugin_all) * 1e3:.2f}, hand {med(hand_all) * 1e3:.2f} ms/iteration, "
          f"ratio {med(plugin_all) / med(hand_all):.4f}; CPU seconds ratio (sums) "
          f"{sum(cpu_plugin) / sum(cpu_hand):.4f} ({load()})")


def part2(args: argparse.Namespace, tmp: Path) -> None:
    speedups = []
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    print(f"\n{args.runs} pytest subprocess runs of the same case:")
    for i in range(args.runs):
        json_path = tmp / f"run{i}.json"
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", *pytest_args(args, json_path)], cwd=ROOT,
                              env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0 or not json_path.exists():
            print(f"  run {i + 1}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
            continue
        info = json.loads(json_path.read_text())["benchmarks"][0]["extra_info"]
        speedups.append(float(info["speedup"]))
        print(f"  run {i + 1}: speedup {info['speedup']:.3f}, {info['abs_latency_ms']:.2f} ms/iteration "
              f"(eager {info['baseline_latency_ms']:.2f} ms), spread {info['spread']:.3f}, "
              f"compilation {info['compilation_seconds']:.1f} s, {wall:.0f} s wall ({load()})")
    if len(speedups) >= 2:
        mid = statistics.median(speedups)
        print(f"speedup across runs: median {mid:.3f}, min {min(speedups):.3f}, max {max(speedups):.3f}, "
              f"spread (max - min) / median {(max(speedups) - min(speedups)) / mid:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--backend", default="trace_once")
    parser.add_argument("--mode", default="train", choices=("train", "infer"))
    parser.add_argument("--iterations-per-run", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-subprocess", action="store_true", help="skip part 2")
    args = parser.parse_args()
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    with tempfile.TemporaryDirectory(prefix="xla-harness-") as name:
        tmp = Path(name)
        part1(args, tmp)
        if not args.no_subprocess:
            part2(args, tmp)


if __name__ == "__main__":
    main()
