"""Shared test data: the seed's model order, a toy ModelSpec, hand-made CaseRecords and CaseRows, the report
set's names and header, and the few helpers more than one test file uses (the umask, a grid table's rows, an
earlier report set, a clean environment, a session driver, a copy of the sources to build from).

Not collected (no ``test_`` prefix); the test files import it as ``from sample_data import ...``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.gating.expected import CaseRow
from pytest_xla_dynamo.records import (
    Attempt,
    CaseRecord,
    Interference,
    MemoryFigures,
    TimingContext,
    TimingFigures,
    TimingRuns,
    TimingStats,
)

REPO = Path(__file__).resolve().parents[1]
#: a conftest registering the ``tiny`` user model (two linear layers) for the plugin's real sessions
TINY_CONFTEST = '''
from pytest_xla_dynamo.zoo import ModelSpec


def _model(tier):
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _inputs(tier, bs):
    import torch

    return (torch.randn(bs, 8),)


def pytest_xla_register_models(register):
    register(ModelSpec(name="tiny", source="user", build_model=_model, build_inputs=_inputs,
                       batch_size={"small": 2, "full": 2}), replace=True)
'''

# --- the zoo --------------------------------------------------------------------------------------------

SEED_ORDER = [
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "alexnet",
    "mobilenet_v2",
    "mnasnet1_0",
    "vgg16",
    "BERT_pytorch",
    "timm_vision_transformer",
]


def benchmark_script(name: str) -> Any:
    """The module of ``benchmarks/<name>.py`` (the benchmarks are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def buildable(name: str) -> zoo.ModelSpec:
    """The zoo's ``name``, or a skip naming the libraries it needs that are not installed."""
    import pytest

    spec = zoo.get_model(name)
    missing = spec.missing_requirements()
    if missing:
        pytest.skip(f"{name} needs {', '.join(missing)}")
    return spec


def toy_spec(name: str = "toy", **kw: Any) -> zoo.ModelSpec:
    """A valid user ModelSpec whose factories are never called; ``kw`` overrides its fields."""
    args: dict[str, Any] = {
        "name": name,
        "source": "user",
        "build_model": lambda tier: None,
        "build_inputs": lambda tier, bs: (),
        "batch_size": {"small": 2, "full": 8},
    }
    args.update(kw)
    return zoo.ModelSpec(**args)


# --- records and the report set ---------------------------------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPECTED_HEADER = (
    "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,"
    "dynamo_peak_mem,calls_captured,unique_graphs,fallbacks_to_eager,graph_breaks,unique_graph_breaks,"
    "autograd_captures,autograd_compiles,backend,mode,status,iterations_per_run,spread,notes"
)
SET = ["xla-dynamo.csv", "xla-dynamo.jsonl", "xla-dynamo.png"]


def timing_record(name: str, backend: str, mode: str, speedup: float | None, **kw: Any) -> CaseRecord:
    """A timing CaseRecord over eager (``fail_to_run`` without a speedup), 1 iteration per run, repeat 5."""
    kw.setdefault("status", "pass" if speedup is not None else "fail_to_run")
    kw.setdefault("baseline", "eager")
    kw.setdefault("iterations_per_run", 1)
    kw.setdefault("repeat", 5)
    return CaseRecord(suite="timing", name=name, backend=backend, mode=mode, speedup=speedup, **kw)


def timing_figures(reasons: tuple[str, ...] = (), **memory: Any) -> TimingFigures:
    """A measured case's timing figures (1 iteration per run, repeat 2, one thread), its last attempt disturbed for
    ``reasons``; ``memory``: the memory columns."""
    context = TimingContext(1, 2, 1, {"threads": 1, "choice": "1", "cores": 2, "xla": "PJRT_NPROC=1", "torch": 1},
                            "--xla-baseline-backend")
    runs = TimingRuns("perf_counter loop", [2.0, 2.5], [4.0, 5.0], [2.0, 2.5], [4.0, 5.0], [9.5, 0.2], [0.3, 0.1],
                      9.5, 0, 0, 0.5)
    attempt = Attempt(0.5, 1.0, 1.0, 0.0, 0.0, list(reasons))
    stats = TimingStats("median", 0.2, 2.0, 4.0, 1.0, 1.0, Interference([attempt]),
                        MemoryFigures({"backend": "eager"}, {"backend": "trace_once"}, **memory))
    return TimingFigures(context, runs, stats)


def parity_record(name: str, backend: str, mode: str, status: str = "pass", **kw: Any) -> CaseRecord:
    """A parity CaseRecord."""
    return CaseRecord(suite="parity", name=name, backend=backend, mode=mode, status=status, **kw)


def sample_records() -> list[CaseRecord]:
    """Seven timing and four parity records over resnet18, resnet50 and alexnet, with gaps and failures."""
    return [
        timing_record("resnet18", "trace_once", "train", 2.0, abs_latency=12.345, compilation_latency=11.5,
                      unique_graphs=3, graph_breaks=0, fallbacks=2, calls_captured=70, spread=0.031, batch_size=2),
        timing_record("resnet18", "trace_everytime", "train", 1.0, abs_latency=24.69),
        timing_record("resnet50", "trace_once", "train", 0.5),
        timing_record("resnet50", "trace_everytime", "train", 2.0),
        timing_record("alexnet", "trace_once", "train", 4.0),
        timing_record("alexnet", "trace_everytime", "train", None),  # fail_to_run
        timing_record("resnet18", "trace_once", "infer", 3.0),
        # alexnet has no trace_everytime record at all, and no infer record for trace_once
        parity_record("resnet18", "trace_once", "train"),
        parity_record("resnet18", "trace_once", "infer", "fail_accuracy", known_issue="pytorch/xla#3361"),
        parity_record("alexnet", "trace_once", "train", "fail_to_run", message="boom"),
        parity_record("alexnet", "trace_everytime", "train", "pass_due_to_skip", flaky=True),
    ]


def table_rows(table: str) -> dict[str, list[str]]:
    """The data rows of a tabulate grid table: first cell -> the other cells, stripped."""
    rows = {}
    for line in table.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def earlier_set(folder: Path) -> dict[str, bytes]:
    """Put a complete report set from an "earlier run" into ``folder``; returns its contents."""
    folder.mkdir(exist_ok=True)
    for name in SET:
        (folder / name).write_bytes(f"earlier run: {name}\n".encode())
    return {name: (folder / name).read_bytes() for name in SET}


# --- the expected-results file ------------------------------------------------------------------------------


def sample_rows() -> list[CaseRow]:
    """Four rows of every shape: measured, unmeasured, flaky with an issue, a cell that needs quoting."""
    return [
        CaseRow("resnet18", "trace_once", "train", "pass", 0, 3, 0, 0, False, ""),
        CaseRow("alexnet", "trace_everytime", "infer", "fail_accuracy", None, None, None, None, True,
                "pytorch/xla#3361"),
        CaseRow("BERT_pytorch", "trace_once", "infer", "", 1, 2, 4, 0, False, ""),
        CaseRow("alexnet", "trace_everytime", "train", "pass", 0, 1, 0, 0, False, "a, quoted \"one\""),
    ]


def umask() -> int:
    """This process's umask (read by setting it and putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- subprocesses ---------------------------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without pytest's and the plugin's variables (as a user's shell would be)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COV_")) and k not in ("REPLACE_MAXPOOL", "USE_FAKE_TENSOR")}
    env.setdefault("PJRT_DEVICE", "CPU")
    env.update(extra)
    return env


#: runs one pytest session (``-s``) per case in one interpreter (a case: args, env), printing their results as JSON
SESSIONS_DRIVER = """
import contextlib, io, json, os, sys
import pytest

results = []
for case in json.loads(open(sys.argv[1]).read()):
    saved = dict(os.environ)
    os.environ.update(case["env"])
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            ret = int(pytest.main(["-s", "-p", "no:cacheprovider", *case["args"]]))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    results.append({"ret": ret, "out": out.getvalue(), "err": err.getvalue()})
print("RESULTS", json.dumps(results))
"""


def run_sessions(folder: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the sessions of ``cases`` (``{"args": [...], "env": {...}}`` each) in turn in one interpreter in
    ``folder``: their ``{"ret", "out", "err"}``, in order."""
    (folder / "cases.json").write_text(json.dumps(cases))
    (folder / "driver.py").write_text(SESSIONS_DRIVER)
    proc = subprocess.run([sys.executable, "driver.py", "cases.json"], cwd=folder, env=clean_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS "))
    results: list[dict[str, Any]] = json.loads(line[len("RESULTS "):])
    return results


# --- building the package -----------------------------------------------------------------------------------


def build_outputs() -> dict[str, int]:
    """What a build writes into its source folder (``build/``, ``dist/``, ``*.egg-info``), as found in the
    checkout: file -> modification time."""
    found = [p for pattern in ("build", "dist", "*.egg-info") for p in REPO.glob(pattern)]
    return {str(f): f.stat().st_mtime_ns for p in found for f in [p, *p.rglob("*")] if f.is_file()} | {
        str(p): 0 for p in found}


def copy_source(dest: Path) -> Path:
    """What a build reads (pyproject.toml, README, the package folders), copied to ``dest``: setuptools
    writes ``build/`` and ``*.egg-info`` beside the sources, so a build from the checkout would write there."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, dest / name)
    for folder in ("pytest_xla_dynamo", "suites", "snapshots"):
        shutil.copytree(REPO / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return dest


def gating_record(suite: str, name: str, **kw: Any) -> CaseRecord:
    """A hand-made record for the gate's tests (backend ``trace_once``, mode ``train`` unless given)."""
    kw.setdefault("backend", "trace_once")
    kw.setdefault("mode", "train")
    return CaseRecord(suite=suite, name=name, **kw)


def before_summary(out: str) -> str:
    """A session's output up to pytest's short test summary, which repeats each failure's whole message
    when the ``CI`` environment variable is set (so a count over the whole output would double)."""
    return out.split("short test summary info", 1)[0]
