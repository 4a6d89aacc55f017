"""Tests of pytest_xla_dynamo.graphs (signature, snapshots, check): the signature builder, the checks and
the diff (pure logic over
hand-made ``metrics.Snapshot``s, in process), and the syrupy extension in real sessions (pytester
subprocesses running a copy of ``suites/test_graphs.py`` on a tiny model, with and without xdist):
the snapshot folder and format, ``--snapshot-update``, unused snapshots, a hand-edited snapshot,
a recompilation after warm-up, and the case records.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("syrupy")

from pytest_xla_dynamo import graphs as g
from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.core.backends import BUILTIN_BACKENDS, default_registry
from pytest_xla_dynamo.core.metrics import Snapshot
from pytest_xla_dynamo.graphs import snapshots as gs
from pytest_xla_dynamo.session import XlaSession, session_key

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
BACKENDS = {b.name: b for b in BUILTIN_BACKENDS}
ONCE, EVERY = BACKENDS["trace_once"], BACKENDS["trace_everytime"]


def snap(dynamo: dict[str, dict[str, int]] | None = None, **xla: int) -> Snapshot:
    return Snapshot({k.replace("__", "::"): v for k, v in xla.items()}, dynamo or {})


# counter deltas shaped like torch_xla 2.9's for a trace_once training case (measured: resnet18)
ONCE_WARMUP = [
    snap({"stats": {"calls_captured": 89, "unique_graphs": 1}, "graph_break": {}},
         UncachedCompile=4, CompileTime=4, TensorsGraphSize=4, ExecuteTime=4, RunCachedGraphInputData=2,
         DynamoExtractCompiledGraph=2, MarkStep=-3),  # the bridge cleared the counters part-way
    snap(UncachedCompile=2, CompileTime=2, TensorsGraphSize=2, ExecuteTime=4, RunCachedGraphInputData=2,
         DynamoSyncInputExecuteTime=1, MarkStep=1),
]
ONCE_STEADY = [
    snap(CachedCompile=2, TensorsGraphSize=2, ExecuteTime=4, RunCachedGraphInputData=2, DynamoSyncInputExecuteTime=1,
         MarkStep=1, aten__nonzero=1, aten___local_scalar_dense=3),
] * 2


# --- the signature ------------------------------------------------------------------------------------


def test_signature_of_a_trace_once_training_case() -> None:
    sig = g.build_signature(ONCE, "train", ONCE_WARMUP, ONCE_STEADY)
    assert sig == {
        "version": g.SIGNATURE_VERSION,
        "backend": {"name": "trace_once", "device": "xla", "dynamo_backend": "openxla"},
        "mode": "train",
        "warmup_steps": 2,
        "dynamo": {"calls_captured": 89, "unique_graphs": 1, "graph_breaks": {}},
        "xla": {
            "warmup": [
                {"step": 1, "compile_requests": 4, "executions": 4, "dynamo_graph_runs": 2},
                {"step": 2, "compile_requests": 2, "executions": 4, "dynamo_graph_runs": 2},
            ],
            "dynamo_graphs_extracted": 2,
            "steady_step": {"compile_requests": 2, "executions": 4, "dynamo_graph_runs": 2, "dynamo_input_syncs": 1,
                            "fallbacks": {"aten::nonzero": 1}, "item_calls": 3},
        },
    }
    json.dumps(sig)  # plain data


def test_signature_leaves_out_what_depends_on_process_history() -> None:
    # the same case after another model: two of its graphs were already in the compilation cache
    after_other = [
        snap({"stats": {"calls_captured": 89, "unique_graphs": 1}}, UncachedCompile=3, CompileTime=3,
             TensorsGraphSize=4, ExecuteTime=4, RunCachedGraphInputData=2, DynamoExtractCompiledGraph=2, MarkStep=-7),
        snap(UncachedCompile=1, CachedCompile=1, CompileTime=1, TensorsGraphSize=2, ExecuteTime=4,
             RunCachedGraphInputData=2, DynamoSyncInputExecuteTime=1, MarkStep=1),
    ]
    a = g.build_signature(ONCE, "train", ONCE_WARMUP, ONCE_STEADY)
    b = g.build_signature(ONCE, "train", after_other, ONCE_STEADY)
    assert a == b
    text = json.dumps(a)
    for name in ("UncachedCompile", "CachedCompile", "CompileTime", "MarkStep", "seconds"):
        assert name not in text
    # timing numbers never enter: the same counts with other seconds give the same signature
    timed = [Snapshot(s.xla, s.dynamo, {"ExecuteTime": 12.5}) for s in ONCE_STEADY]
    assert g.build_signature(ONCE, "train", ONCE_WARMUP, timed) == a


def test_signature_of_a_lazy_case_has_no_dynamo_part_and_uses_the_last_steady_step() -> None:
    warm = [snap(UncachedCompile=1, CompileTime=1, TensorsGraphSize=1, ExecuteTime=1)] * 2
    steady = [snap(CachedCompile=1, TensorsGraphSize=1, ExecuteTime=2), snap(CachedCompile=1, TensorsGraphSize=1,
                                                                              ExecuteTime=1)]
    sig = g.build_signature(EVERY, "train", warm, steady)
    assert "dynamo" not in sig
    assert sig["backend"]["dynamo_backend"] is None
    assert sig["xla"]["steady_step"]["executions"] == 1
    assert sig["xla"]["dynamo_graphs_extracted"] == 0
    cpu = g.build_signature(BACKENDS["inductor"], "infer", [], [snap({"stats": {"unique_graphs": 0}})])
    assert "xla" not in cpu and cpu["dynamo"]["unique_graphs"] == 0
    with pytest.raises(ValueError, match="steady step"):
        g.build_signature(EVERY, "train", warm, [])


def test_graph_break_reasons_are_cleaned_and_merged() -> None:
    warm = [snap({"stats": {"unique_graphs": 2}, "graph_break": {
        "Call to `torch._dynamo.graph_break()` at 0x7f00aa11 in /home/a/venv/lib/python3.11/site-packages/m.py": 1,
        "Call to `torch._dynamo.graph_break()` at 0x7f00bb22 in /opt/b/lib/python3.11/site-packages/m.py": 2,
        "data-dependent  branching\n on a tensor": 1,
    }})]
    sig = g.build_signature(ONCE, "infer", warm, [snap()])
    assert sig["dynamo"]["graph_breaks"] == {
        "Call to `torch._dynamo.graph_break()` at 0x… in …/m.py": 3,
        "data-dependent branching on a tensor": 1,
    }


def test_recompiles_name_each_steady_compilation() -> None:
    assert g.recompiles(ONCE_STEADY) == []
    problems = g.recompiles([snap(), snap(CompileTime=1, UncachedCompile=1), snap({"stats": {"unique_graphs": 1}},
                                                                              DynamoExtractCompiledGraph=2)])
    assert problems == [
        "steady step 2: 1 XLA compilation(s) (CompileTime count 1, UncachedCompile 1)",
        "steady step 3: dynamo captured 1 new graph(s) (a recompilation: guards failed)",
        "steady step 3: the dynamo bridge extracted 2 graph(s)",
    ]


def _with_steady(sig: dict[str, Any], **steady: int) -> dict[str, Any]:
    out = json.loads(json.dumps(sig))
    out["xla"]["steady_step"].update(steady)
    return out


def test_conformance_the_seeds_first_point_both_ways() -> None:
    once = g.build_signature(ONCE, "train", ONCE_WARMUP, ONCE_STEADY)
    assert g.conformance_problems(ONCE, "train", once) == []
    (problem,) = g.conformance_problems(ONCE, "train", _with_steady(once, executions=1, dynamo_graph_runs=0))
    assert "separate forward, backward and optimizer graphs" in problem and "executed 1, 0 dynamo-compiled" in problem
    every = g.build_signature(EVERY, "train", [], [snap(TensorsGraphSize=1, ExecuteTime=1)])
    assert g.conformance_problems(EVERY, "train", every) == []
    (problem,) = g.conformance_problems(EVERY, "train", _with_steady(every, executions=3))
    assert "one combined XLA graph per training step" in problem and "executed 3" in problem
    # inference and CPU backends are not concerned
    assert g.conformance_problems(EVERY, "infer", _with_steady(every, executions=3)) == []
    cpu = g.build_signature(BACKENDS["aot_eager"], "train", [], [snap()])
    assert g.conformance_problems(BACKENDS["aot_eager"], "train", cpu) == []


def test_diff_names_each_changed_counter_from_what_to_what() -> None:
    old = g.build_signature(ONCE, "train", ONCE_WARMUP, ONCE_STEADY)
    new = json.loads(json.dumps(old))
    new["xla"]["steady_step"]["executions"] = 5
    new["xla"]["warmup"][1]["compile_requests"] = 3
    new["xla"]["steady_step"]["fallbacks"] = {"aten::nonzero": 1, "aten::bernoulli": 2}
    new["dynamo"]["graph_breaks"] = {"a reason": 1}
    del new["warmup_steps"]
    assert g.diff_signatures(old, new) == [
        "dynamo.graph_breaks.a reason: (new) 1",
        "warmup_steps: 2 -> (gone)",
        "xla.steady_step.executions: 4 -> 5",
        "xla.steady_step.fallbacks.aten::bernoulli: (new) 2",
        "xla.warmup[step 2].compile_requests: 2 -> 3",
    ]
    assert g.diff_signatures(old, old) == []
    gone = json.loads(json.dumps(old))
    gone["xla"]["steady_step"]["fallbacks"] = {}
    assert g.diff_signatures(old, gone) == ["xla.steady_step.fallbacks.aten::nonzero: 1 -> (gone)"]
    del gone["xla"]["steady_step"]["fallbacks"]
    assert g.diff_signatures(old, gone) == ["xla.steady_step.fallbacks.aten::nonzero: 1 -> (gone)"]
    assert g.diff_signatures({"a": {}}, {}) == ["a: {} -> (gone)"]


# --- the snapshot folder and format ------------------------------------------------------------------


def test_snapshot_root_of_the_bundled_suites_and_of_other_test_files(tmp_path: Path) -> None:
    import pytest_xla_dynamo.snapshots
    import pytest_xla_dynamo.suites

    suites_dir = Path(pytest_xla_dynamo.suites.__file__).resolve().parent
    installed = Path(pytest_xla_dynamo.snapshots.__file__).resolve().parent
    assert gs.snapshot_root(suites_dir / "test_graphs.py") == installed
    assert gs.snapshot_root(REPO / "suites" / "test_graphs.py") == REPO / "snapshots"  # the repo (editable install)
    assert gs.snapshot_root(tmp_path / "suites" / "test_graphs.py") == tmp_path / "snapshots"
    # a model owner's project: its snapshots stay under its rootdir, also for a test file at its top
    assert gs.snapshot_root(tmp_path / "test_mine.py", rootdir=tmp_path) == tmp_path / "snapshots"
    assert gs.snapshot_root(tmp_path / "tests" / "test_mine.py", rootdir=tmp_path) == tmp_path / "snapshots"
    assert gs.snapshot_root(tmp_path / "test_mine.py") == tmp_path.parent / "snapshots"  # no rootdir: as before


def test_variant_folders_for_options_that_change_signatures() -> None:
    assert gs.variant(XlaConfig()) == ""
    assert gs.variant(XlaConfig(seed=3, randomize_input=True)) == ""
    assert gs.variant(XlaConfig(tier="full", patches=("maxpool_to_avgpool",), dropout="keep")) == (
        "tier-full+patch-maxpool_to_avgpool+dropout-keep")


def _location(tmp_path: Path, xcfg: XlaConfig) -> Any:
    config: Any = SimpleNamespace(stash=pytest.Stash(), rootpath=tmp_path)
    config.stash[session_key] = XlaSession(config, xcfg, default_registry())
    test_file = tmp_path / "suites" / "test_graphs.py"
    return SimpleNamespace(filepath=str(test_file), basename="test_graphs", item=SimpleNamespace(config=config))


def test_extension_format_folder_and_selection(tmp_path: Path) -> None:
    ext = gs.GraphSnapshotExtension()
    data = {"b": {"z": 1, "a": [2, 1]}, "a": None}
    text = ext.serialize(data)
    assert text == '{\n  "a": null,\n  "b": {\n    "a": [\n      2,\n      1\n    ],\n    "z": 1\n  }\n}\n'
    assert text == json.dumps(data, sort_keys=True, indent=2) + "\n"

    loc = _location(tmp_path, XlaConfig(models=("resnet18",), backends=("trace_once",)))
    folder = tmp_path / "snapshots" / "test_graphs"
    assert ext.dirname(test_location=loc) == str(folder)
    assert ext.dirname(test_location=_location(tmp_path, XlaConfig(tier="full"))) == str(
        tmp_path / "snapshots" / "tier-full" / "test_graphs")

    def owns(name: str) -> bool:
        return ext.owns_snapshot_collection(filepath=str(folder / name), test_location=loc)

    assert owns("test_graph_signature_train[resnet18-trace_once].json")
    assert owns("test_graph_signature_gone[resnet18-trace_once].json")  # a removed test: reported unused
    assert not owns("test_graph_signature_train[alexnet-trace_once].json")  # not selected this session
    assert not owns("test_graph_signature_train[resnet18-trace_everytime].json")
    assert owns("test_graph_signature_train[nomodel-x].json")  # an unknown id: an orphan, reported unused
    assert owns("test_something.json")
    assert not owns("test_graph_signature_train[resnet18-trace_once].ambr")


# --- real sessions ----------------------------------------------------------------------------------

CONFTEST = '''
import json

from pytest_xla_dynamo.session import get_session
from pytest_xla_dynamo.zoo import ModelSpec

LOSS_CALLS = [0]


def _model(tier):
    import torch

    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _inputs(tier, batch):
    import torch

    return (torch.randn(batch, 8),)


def _broken(tier):
    raise RuntimeError("this model cannot be built")


def _drifting_loss(out):
    # the loss's graph changes after the warm-up: a recompilation in steady state
    LOSS_CALLS[0] += 1
    return out[:, : 2 if LOSS_CALLS[0] <= 2 else 3].sum()


def pytest_xla_register_models(register):
    sizes = {"small": 2, "full": 2}
    register(ModelSpec(name="tiny", source="user", build_model=_model, build_inputs=_inputs, batch_size=sizes))
    register(ModelSpec(name="broken", source="user", build_model=_broken, build_inputs=_inputs, batch_size=sizes))
    register(ModelSpec(name="drifting", source="user", build_model=_model, build_inputs=_inputs, batch_size=sizes,
                       loss=_drifting_loss))


def pytest_sessionfinish(session):
    if get_session(session.config).reports_here:
        records = [r.to_json() for r in get_session(session.config).store if r.suite == "graphs"]
        (session.config.rootpath / "records.json").write_text(json.dumps(records))
'''

SNAPS = Path("snapshots") / "test_graphs"
TRAIN_ONCE = "test_graph_signature_train[tiny-trace_once].json"
TRAIN_EVERY = "test_graph_signature_train[tiny-trace_everytime].json"
INFER_ONCE = "test_graph_signature_infer[tiny-trace_once].json"
INFER_EVERY = "test_graph_signature_infer[tiny-trace_everytime].json"
ORPHAN = "test_graph_signature_train[tiny-trace_once].1.json"  # a second comparison the test no longer makes
RENAMED = "test_graph_signature_old[tiny-trace_once].json"  # a renamed test left it behind
FOREIGN = "test_graph_signature_train[resnet18-trace_once].json"  # another model's, not selected below
BROKEN = "test_graph_signature_train[broken-trace_once].json"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    suites = pytester.path / "suites"
    suites.mkdir()
    shutil.copy(REPO / "suites" / "test_graphs.py", suites / "test_graphs.py")
    (pytester.path / SNAPS).mkdir(parents=True)
    return pytester


def _run(p: pytest.Pytester, *args: str, path: bool = True) -> pytest.RunResult:
    return p.runpytest_subprocess(*(["suites/test_graphs.py"] if path else []), "-p", "no:cacheprovider", *args,
                                  timeout=900)


def _records(p: pytest.Pytester) -> dict[tuple[str, str, str], dict[str, Any]]:
    data = json.loads((p.path / "records.json").read_text())
    return {(r["name"], r["backend"], r["mode"]): r for r in data}


@pytest.mark.xla
def test_snapshots_in_sessions_with_and_without_xdist(project: pytest.Pytester) -> None:
    snaps = project.path / SNAPS
    (snaps / ORPHAN).write_text("{}\n")
    (snaps / FOREIGN).write_text('{"keep": "me"}\n')
    (snaps / BROKEN).write_text('{"keep": "me too"}\n')

    # 1. -n 0, --snapshot-update: four snapshots written in the folder, sorted and indented; the orphan
    # deleted as unused; the foreign model's and the broken case's snapshots left alone
    result = _run(project, "--xla-models=tiny,broken", "--xla-backend=trace_once,trace_everytime", "-p", "no:xdist",
                  "--snapshot-update")
    result.assert_outcomes(passed=4, failed=4)
    text = result.stdout.str()
    assert "4 snapshots generated" in text and "1 unused snapshot deleted" in text, text
    assert sorted(p.name for p in snaps.iterdir()) == sorted([TRAIN_ONCE, TRAIN_EVERY, INFER_ONCE, INFER_EVERY,
                                                              FOREIGN, BROKEN])
    assert (snaps / FOREIGN).read_text() == '{"keep": "me"}\n'
    assert (snaps / BROKEN).read_text() == '{"keep": "me too"}\n'
    first = {name: (snaps / name).read_text() for name in (TRAIN_ONCE, TRAIN_EVERY, INFER_ONCE, INFER_EVERY)}
    for body in first.values():
        assert body == json.dumps(json.loads(body), sort_keys=True, indent=2) + "\n"
    once, every = json.loads(first[TRAIN_ONCE]), json.loads(first[TRAIN_EVERY])
    assert every["xla"]["steady_step"]["executions"] == 1  # one combined graph per training step
    assert once["xla"]["steady_step"]["executions"] >= 3  # forward, backward, optimizer
    assert once["xla"]["steady_step"]["dynamo_graph_runs"] == 2
    assert once["dynamo"]["unique_graphs"] == 1 and once["dynamo"]["graph_breaks"] == {}
    records = _records(project)
    rec = records[("tiny", "trace_once", "train")]
    assert rec["status"] == "pass" and rec["suite"] == "graphs"
    assert rec["unique_graphs"] == 1 and rec["graph_breaks"] == 0 and rec["recompiles"] == 0
    assert rec["compiles"] >= 3 and rec["fallbacks"] == 0 and rec["calls_captured"] == 3
    assert rec["extra"]["signature"] == once
    assert "test_graph_signature_train[tiny-trace_once]" in rec["repro"]
    assert records[("broken", "trace_once", "train")]["status"] == "fail_to_run"

    # 2. -n 0, trace_once only: a hand-edited snapshot fails with the counter that changed and a diff; the
    # orphan is reported unused (and fails the run); the trace_everytime snapshots are not (not selected);
    # a loss that changes after warm-up fails as a recompilation
    edited = json.loads(first[TRAIN_ONCE])
    real = edited["xla"]["steady_step"]["executions"]
    edited["xla"]["steady_step"]["executions"] = real + 7
    (snaps / TRAIN_ONCE).write_text(json.dumps(edited, sort_keys=True, indent=2) + "\n")
    (snaps / ORPHAN).write_text(first[TRAIN_ONCE])
    result = _run(project, "--xla-models=tiny,drifting", "--xla-backend=trace_once", "-p", "no:xdist",
                  "--snapshot-details")
    result.assert_outcomes(passed=1, failed=3)
    text = result.stdout.str()
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    start = lines.index("pytest_xla_dynamo.graphs.check.GraphSignatureError: tiny / trace_once / train: graph "
                        f"signature "
                        f"changed: xla.steady_step.executions: {real + 7} -> {real}")
    assert lines[start + 1] == f"snapshot: {snaps / TRAIN_ONCE}"
    assert lines[start + 2] == "[- snapshot] [+ received]"
    diff = lines[start + 3: lines.index("}", start)]
    assert f'-       "executions": {real + 7},' in diff and f'+       "executions": {real},' in diff, diff
    assert [line for line in diff if line[:1] in "+-"] == [f'-       "executions": {real + 7},',
                                                           f'+       "executions": {real},']
    assert lines[lines.index("}", start) + 1] == (
        "if the change is intended, rewrite the snapshot with: pytest "
        "'suites/test_graphs.py::test_graph_signature_train[tiny-trace_once]' --xla-backend=trace_once "
        "--xla-tier=small --snapshot-update")
    assert ("pytest_xla_dynamo.graphs.check.RecompileError: drifting / trace_once / train: compiled after "
            "warm-up (2 steps), "
            "every steady step must reuse the compiled graphs:") in lines
    assert any(line.startswith("steady step 1: ") and "XLA compilation(s)" in line for line in lines), lines
    # the triage names the check that failed: the first steady step that compiled, the signature's comparison
    stages = [line.split("stage:", 1)[1].strip() for line in text.splitlines() if line.strip().startswith("stage:")]
    assert "comparison of steady step 1 on trace_once" in stages, stages
    assert "comparison (graph signature) on trace_once" in stages, stages
    assert "1 snapshot unused" in text and ORPHAN.replace(".json", "") in text, text
    assert not [line for line in text.splitlines() if "unused" in line and "trace_everytime" in line], text
    records = _records(project)
    assert records[("tiny", "trace_once", "train")]["status"] == "fail_graph"
    assert records[("tiny", "trace_once", "infer")]["status"] == "pass"
    drift = records[("drifting", "trace_once", "train")]
    assert drift["status"] == "fail_graph" and drift["recompiles"] >= 1
    assert "compiled after warm-up" in drift["message"]

    # 3. -n 2, --snapshot-update, no path (so syrupy also looks for snapshots of renamed tests): the edited
    # snapshot is rewritten to what -n 0 wrote, both orphans deleted, the other model's snapshot kept; the
    # other three signatures, computed on an xdist worker, match those of the -n 0 session
    (snaps / RENAMED).write_text(first[TRAIN_ONCE])
    result = _run(project, "--xla-models=tiny", "--xla-backend=trace_once,trace_everytime", "-n", "2",
                  "--snapshot-update", path=False)
    result.assert_outcomes(passed=4)
    text = result.stdout.str()
    assert "3 snapshots passed" in text and "1 snapshot updated" in text and "2 unused snapshots deleted" in text, text
    assert {name: (snaps / name).read_text() for name in first} == first
    assert not (snaps / ORPHAN).exists() and not (snaps / RENAMED).exists()
    assert (snaps / FOREIGN).exists() and (snaps / BROKEN).exists()
    assert len(_records(project)) == 4  # merged from the workers
