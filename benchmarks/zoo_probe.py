"""Probe the model zoo: build each model, run training steps, print the figures.

    PJRT_DEVICE=CPU python benchmarks/zoo_probe.py [--tier small] [--models a,b] [--xla] [--dynamo]

For each model: build time, parameter count, its random modules (dropout and stochastic depth with a
rate above 0, ``patches.random_modules``; MISMATCH where ``ModelSpec.has_dropout`` does not declare
them), two CPU eager training steps (forward, loss, backward; the table shows the second, steady one)
with their times and the output shape. With ``--xla``: a
deepcopy of the freshly built model is moved to ``torch_xla.device()`` and run for ``--steps``
lazy training steps (forward, loss, backward, ``torch_xla.sync()``, ``wait_device_ops()``); the
first step includes tracing and compilation, the later ones hit the compilation cache. Also
printed: XLA compilations per step and any CPU-fallback ops (``aten::*`` counters), which would
mean the model leaves the XLA graph. ``--dynamo`` additionally runs the same steps through
``torch.compile(backend="openxla")``. Times are wall seconds with the process's CPU seconds in
parentheses (steadier on a shared machine).

Keep it light on a shared machine: one or two models per invocation. Once the XLA:CPU client has
run a computation, its threads and torch's spinning OpenMP threads fight over the cores: eager CPU
steps get 2-100x slower and compilations slower too. ``OMP_WAIT_POLICY=PASSIVE`` (set before
python starts) avoids most of it; the header line shows which of these settings were in force.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core.patches import random_modules
from pytest_xla_dynamo.report import THREAD_VARIABLES


def _shape(out: Any) -> str:
    if hasattr(out, "shape"):
        return "x".join(str(d) for d in out.shape)
    if isinstance(out, (list, tuple)):
        return "(" + ", ".join(_shape(o) for o in out) + ")"
    return type(out).__name__


def _fmt_params(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n / 1e3:.1f}k"


def _fallbacks(met: Any) -> list[str]:
    return sorted(c for c in met.counter_names() if c.startswith("aten::"))


def _compiles(met: Any) -> int:
    data = met.metric_data("CompileTime")
    return int(data[0]) if data else 0


class _Clock:
    """Wall time and this process's CPU time (all threads) since start: on a shared machine the
    CPU seconds are the steadier figure (about 2x wall for a 2-thread op that had the cores)."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall0, time.process_time() - self.cpu0


def _fmt_t(t: tuple[float, float]) -> str:
    return f"{t[0]:.2f}s ({t[1]:.2f} cpu)"


def _xla_steps(spec: zoo.ModelSpec, model: Any, inputs: tuple[Any, ...], steps: int, dynamo: bool) -> dict[str, Any]:
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    dev = torch_xla.device()
    model = model.to(dev)
    model.train()
    xinputs = tuple(x.to(dev) for x in inputs)
    fn = model
    if dynamo:
        import torch

        fn = torch.compile(model, backend="openxla")
    torch_xla.sync()
    xm.wait_device_ops()
    met.clear_all()
    times: list[tuple[float, float]] = []
    compiles: list[int] = []
    loss_val = float("nan")
    for _ in range(steps):
        before = _compiles(met)
        clock = _Clock()
        for p in model.parameters():
            p.grad = None
        out = fn(*xinputs)
        loss = spec.loss(out)
        loss.backward()
        torch_xla.sync()
        xm.wait_device_ops()
        times.append(clock.stop())
        compiles.append(_compiles(met) - before)
        loss_val = float(loss.detach().cpu())
    return {"times": times, "compiles": compiles, "fallbacks": _fallbacks(met), "loss": loss_val}


def probe(name: str, tier: str, use_xla: bool, dynamo: bool, steps: int, seed: int) -> dict[str, Any]:
    import torch

    spec = zoo.get_model(name)
    missing = spec.missing_requirements()
    if missing:
        print(f"[{name}] SKIP: missing {', '.join(missing)}", flush=True)
        return {"name": name, "skipped": ", ".join(missing)}
    torch.manual_seed(seed)
    clock = _Clock()
    model = spec.build_model(tier)
    inputs = spec.build_inputs(tier, spec.batch(tier))
    build_s = clock.stop()[0]
    params = sum(p.numel() for p in model.parameters())
    random = random_modules(model)
    dropout = bool(random)
    row: dict[str, Any] = {
        "name": name,
        "params": params,
        "build_s": build_s,
        "batch": spec.batch(tier),
        "inputs": ", ".join(f"{_shape(x)}:{str(x.dtype).replace('torch.', '')}" for x in inputs),
        "dropout": dropout,
        "dropout_ok": spec.has_dropout or not dropout,  # a declared patch with nothing to switch off is harmless
    }
    fresh = copy.deepcopy(model) if (use_xla or dynamo) else None

    model.train()
    cpu_times: list[tuple[float, float]] = []
    for _ in range(2):  # the first eager step pays one-off costs (allocator, thread pools, kernel init)
        for p in model.parameters():
            p.grad = None
        clock = _Clock()
        out = model(*inputs)
        loss = spec.loss(out)
        loss.backward()
        cpu_times.append(clock.stop())
        if len(cpu_times) == 1:
            row["cpu_loss"] = float(loss.detach())
    row["cpu_first_s"], row["cpu_s"] = cpu_times
    row["out"] = _shape(out)
    print(
        f"[{name}] tier={tier} params={_fmt_params(params)} build={build_s:.2f}s inputs={row['inputs']} "
        f"out={row['out']} cpu_steps={_fmt_t(row['cpu_first_s'])}, {_fmt_t(row['cpu_s'])} loss={row['cpu_loss']:.5f} "
        f"random modules={len(random)} (spec has_dropout={spec.has_dropout}: "
        f"{'ok' if row['dropout_ok'] else 'MISMATCH: ' + ', '.join(random[:3])})",
        flush=True,
    )
    del model, out, loss
    if fresh is not None and use_xla:
        res = _xla_steps(spec, copy.deepcopy(fresh) if dynamo else fresh, inputs, steps, dynamo=False)
        row["xla"] = res
        print(
            f"[{name}] xla steps: "
            + ", ".join(_fmt_t(t) for t in res["times"])
            + f" compiles/step={res['compiles']} loss={res['loss']:.5f}"
            + f" fallbacks={res['fallbacks'] or 'none'}",
            flush=True,
        )
    if fresh is not None and dynamo:
        res = _xla_steps(spec, fresh, inputs, steps, dynamo=True)
        row["dynamo"] = res
        print(
            f"[{name}] dynamo(openxla) steps: "
            + ", ".join(_fmt_t(t) for t in res["times"])
            + f" compiles/step={res['compiles']} loss={res['loss']:.5f}"
            + f" fallbacks={res['fallbacks'] or 'none'}",
            flush=True,
        )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="small", choices=zoo.TIERS)
    parser.add_argument("--models", default="all", help="comma list of model names, or 'all'")
    parser.add_argument("--xla", action="store_true", help="also run lazy XLA training steps")
    parser.add_argument("--dynamo", action="store_true", help="also run steps under torch.compile(backend='openxla')")
    parser.add_argument("--steps", type=int, default=2, help="XLA steps per model (default 2)")
    parser.add_argument("--seed", type=int, default=1337)
    args = parser.parse_args(argv)
    try:
        names = zoo.resolve_models(args.models)
    except zoo.UnknownModelError as exc:
        parser.error(str(exc))

    if args.xla or args.dynamo:
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla

        # Initialise the XLA runtime before any CPU backward runs in this process:
        # pytorch/xla#4174, a CPU autograd pass first breaks every later XLA backward.
        torch_xla.device()

    import torch

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    env = " ".join(
        f"{k}={os.environ[k]}" for k in (*THREAD_VARIABLES, "XLA_FLAGS") if k in os.environ
    )
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, tier {args.tier}, load {load}"
        + (f", {env}" if env else ""),
        flush=True,
    )
    rows = [probe(n, args.tier, args.xla, args.dynamo, args.steps, args.seed) for n in names]

    print()
    print("times: wall s (process CPU s)")
    header = "| model | params | batch | inputs | build s | CPU step s | dropout |"
    if args.xla:
        header += " XLA compile s | XLA step s | XLA fallbacks |"
    if args.dynamo:
        header += " dynamo 1st s | dynamo step s | dynamo compiles |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for r in rows:
        if "skipped" in r:
            print(f"| {r['name']} | skipped: missing {r['skipped']} |")
            continue
        line = (
            f"| {r['name']} | {_fmt_params(r['params'])} | {r['batch']} | {r['inputs']} | {r['build_s']:.2f} | "
            f"{_fmt_t(r['cpu_s'])} | {r['dropout']}{'' if r['dropout_ok'] else ' (MISMATCH)'} |"
        )
        for key in ("xla", "dynamo"):
            if key in r:
                t = r[key]["times"]
                tail = _fmt_t(t[-1]) if len(t) > 1 else "-"
                extra = ", ".join(r[key]["fallbacks"]) or "none" if key == "xla" else str(r[key]["compiles"])
                line += f" {_fmt_t(t[0])} | {tail} | {extra} |"
        print(line)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB, load {load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
