"""What loading the plugin costs a session that does not use it: CPU seconds, with and without the plugin.

    python benchmarks/plugin_overhead.py [--runs 7] [--torch]

Part 1, a one-test plain session (``def test_one(): assert 1 + 1 == 2``; with ``--torch`` a test that
does a few torch matmuls instead): ``--runs`` pairs of ``python -m pytest test_plain.py -q -p
no:cacheprovider`` subprocesses, one with the plugin (the installed entry point) and one with ``-p
no:xla_dynamo``, the order alternating from pair to pair. Each run's CPU seconds (user + system, from
``os.wait4``) are taken; printed: the median of each side and the median of the paired differences (the
plugin's cost; issue 28's goal: under 50 ms).

Part 2, the import: ``--runs`` pairs of ``python -c "import pytest"`` against ``python -c "import pytest;
import pytest_xla_dynamo.plugin"``, the same way (what ``python -X importtime`` attributes to the plugin,
in CPU seconds).

Part 3, the same import timed inside the interpreter (``time.process_time`` around ``import
pytest_xla_dynamo.plugin`` after ``import pytest``; median of ``--runs``): the steadiest figure on a busy
machine, as subprocess start-up noise is left out.

Part 4, the plugin's own CPU inside the one-test session: a probe plugin loaded first (``-p``) imports
``pytest_xla_dynamo.plugin`` under ``time.process_time`` and wraps each of its hook functions so as to add up
the CPU spent in them (its autouse fixtures, a lookup each where the plugin is dormant, are not counted);
median of ``--runs`` sessions. Steadier than part 1, whose paired differences a busy machine swamps.

Only figures are printed; nothing is asserted. CPU time is steadier than wall time when other
processes compete for the cores, but not immune to them: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

PLAIN = "def test_one():\n    assert 1 + 1 == 2\n"
TORCH = ("import torch\n\n\ndef test_one():\n    x = torch.randn(256, 256)\n"
         "    for _ in range(50):\n        x = torch.tanh(x @ x)\n    assert torch.isfinite(x).all()\n")

PROBE = """
import atexit, functools, inspect, os, time

start = time.process_time()
import pytest_xla_dynamo.plugin as plugin
spent = {"import": time.process_time() - start, "hooks": 0.0}


def timed(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        t = time.process_time()
        try:
            return func(*args, **kwargs)
        finally:
            spent["hooks"] += time.process_time() - t
    return wrapper


for name, func in list(vars(plugin).items()):
    if name.startswith("pytest_") and inspect.isfunction(func):
        setattr(plugin, name, timed(func))
atexit.register(lambda: open(os.environ["PROBE_OUT"], "w").write(f"{spent['import']} {spent['hooks']}"))
"""
IN_PROCESS = ("import time, pytest\nstart = time.process_time()\nimport pytest_xla_dynamo.plugin\n"
              "print(time.process_time() - start)")


def cpu_seconds(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    """The CPU seconds (user + system) of one subprocess run of ``argv``; its exit status must be 0."""
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"plugin_overhead.py: {' '.join(argv)} exited {proc.returncode}\n{stderr}")
    return usage.ru_utime + usage.ru_stime


def paired(runs: int, with_plugin: Sequence[str], without: Sequence[str], cwd: Path,
           env: dict[str, str]) -> tuple[list[float], list[float]]:
    """``runs`` CPU figures of each command, run in pairs whose order alternates."""
    on: list[float] = []
    off: list[float] = []
    cpu_seconds(with_plugin, cwd, env)  # warm the file cache and the .pyc files, not counted
    cpu_seconds(without, cwd, env)
    for i in range(runs):
        if i % 2:
            off.append(cpu_seconds(without, cwd, env))
            on.append(cpu_seconds(with_plugin, cwd, env))
        else:
            on.append(cpu_seconds(with_plugin, cwd, env))
            off.append(cpu_seconds(without, cwd, env))
    return on, off


def show(title: str, on: list[float], off: list[float]) -> float:
    diffs = [a - b for a, b in zip(on, off, strict=True)]
    cost = statistics.median(diffs)
    print(f"{title}: with the plugin {statistics.median(on) * 1000:.0f} ms CPU, without "
          f"{statistics.median(off) * 1000:.0f} ms (medians of {len(on)}); the plugin's cost "
          f"{cost * 1000:+.0f} ms (median of the paired differences; range {min(diffs) * 1000:+.0f} .. "
          f"{max(diffs) * 1000:+.0f} ms)")
    return cost


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="pairs of runs per figure (default 7)")
    parser.add_argument("--torch", action="store_true", help="the one test does torch matmuls")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: an integer >= 1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # no PYTEST_ADDOPTS, no options
    python = sys.executable
    print(f"python {sys.version.split()[0]} ({python}); load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="plugin-overhead-") as tmp:
        folder = Path(tmp)
        (folder / "test_plain.py").write_text(TORCH if args.torch else PLAIN)
        base = [python, "-m", "pytest", "test_plain.py", "-q", "-p", "no:cacheprovider"]
        on, off = paired(args.runs, base, [*base, "-p", "no:xla_dynamo"], folder, env)
        session = show(f"one-test {'torch' if args.torch else 'plain'} session", on, off)
        on, off = paired(args.runs, [python, "-c", "import pytest; import pytest_xla_dynamo.plugin"],
                         [python, "-c", "import pytest"], folder, env)
        show("import pytest_xla_dynamo.plugin (beyond pytest)", on, off)
        inside = [float(subprocess.run([python, "-c", IN_PROCESS], cwd=folder, env=env, capture_output=True,
                                       text=True, check=True).stdout) for _ in range(args.runs)]
        print(f"import pytest_xla_dynamo.plugin timed inside the interpreter: "
              f"{statistics.median(inside) * 1000:.1f} ms CPU (median of {len(inside)}; range "
              f"{min(inside) * 1000:.1f} .. {max(inside) * 1000:.1f} ms)")
        (folder / "xla_overhead_probe.py").write_text(PROBE)
        probe_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")])),
                     "PROBE_OUT": str(folder / "probe.out")}
        spent = []
        for _ in range(args.runs):
            cpu_seconds([*base, "-p", "xla_overhead_probe"], folder, probe_env)
            spent.append([float(x) for x in (folder / "probe.out").read_text().split()])
        imports, hooks = [s[0] for s in spent], [s[1] for s in spent]
        totals = [a + b for a, b in spent]
        print(f"inside the session: import {statistics.median(imports) * 1000:.1f} ms + hooks "
              f"{statistics.median(hooks) * 1000:.1f} ms = {statistics.median(totals) * 1000:.1f} ms CPU (medians of "
              f"{len(totals)}; total range {min(totals) * 1000:.1f} .. {max(totals) * 1000:.1f} ms)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"goal (issue 28): under 50 ms: the paired sessions say {'met' if session < 0.050 else 'NOT met'}, the "
          f"session's own count {'met' if statistics.median(totals) < 0.050 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
