"""Tests of the op suite (pytest_xla_dynamo.ops): selection, verdicts, comparisons, reproducers, the op server's
crash containment, and whole sessions of ``test_op`` on real torch_xla (with and without xdist)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_xla_dynamo.known_issues.registry import parse_entry
from pytest_xla_dynamo.ops.catalog import OpCatalog
from pytest_xla_dynamo.ops.plugin import coverage_lines, failure_text
from pytest_xla_dynamo.ops.runner import SampleOutcome, judge
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.records.case import record_value_problem

pytest_plugins = ["pytester"]

CATALOG = OpCatalog({"add": True, "argmax": False, "nn.functional.elu": True, "nn.functional.relu": True,
                     "max.reduction_with_dim": True})


# --- selection ------------------------------------------------------------------------------------


def test_select_names_globs_and_all() -> None:
    """Names and globs select in the catalog's order; a name that matches nothing is returned as unknown."""
    assert CATALOG.select(["nn.functional.*", "add"]) == (["add", "nn.functional.elu", "nn.functional.relu"], [])
    assert CATALOG.select(["all"])[0] == CATALOG.ids
    assert CATALOG.select(["add", "all"]) == (["add"], ["all"])  # in a list, "all" names the op torch.all
    assert CATALOG.select(["elu", "max.*"]) == (["max.reduction_with_dim"], ["elu"])


def test_directions_follow_autograd() -> None:
    """Backward only where the entry's float32 samples are differentiable."""
    assert CATALOG.directions("add") == ["forward", "backward"]
    assert CATALOG.directions("argmax") == ["forward"]


# --- verdicts (pure) ------------------------------------------------------------------------------


def _sample(kind: str, index: int = 0, problem: str = "", fallbacks: dict[str, int] | None = None,
            graphs: int = 0, random: bool = False) -> SampleOutcome:
    return SampleOutcome(index, "float32", kind, problem, fallbacks or {}, graphs, random=random)


def test_judge_orders_failures_before_fallbacks_and_capture() -> None:
    """A run failure outranks an accuracy failure; a fallback or an empty capture is not a pass."""
    failed = judge([_sample("fail_accuracy", problem="grad[0]: bad"), _sample("fail_to_run", index=1,
                                                                             problem="RuntimeError: x")],
                   "trace_once")
    assert failed.status == "fail_to_run" and "sample 1 (float32): RuntimeError: x" in failed.message
    fallback = judge([_sample("pass", fallbacks={"aten::nonzero": 2}, graphs=1)], "trace_once")
    assert fallback.status == "cpu_fallback" and "aten::nonzero (2)" in fallback.message
    assert judge([_sample("pass")], "trace_once").status == "pass_not_captured"
    assert judge([_sample("pass")], "trace_everytime").status == "pass"


def test_judge_says_when_nothing_was_compared() -> None:
    """Samples eager rejects are not a pass: the case says nothing was compared, and why."""
    result = judge([_sample("eager_fail", problem="eager raised ValueError: no")], "trace_everytime")
    assert result.status == "eager_fail_to_run" and "no sample compared" in result.message


def test_random_samples_are_noted() -> None:
    result = judge([_sample("pass", graphs=1, random=True)], "trace_once")
    assert result.status == "pass" and "not element by element" in result.notes[0]


def test_coverage_table_counts_by_status() -> None:
    records = [CaseRecord("ops", "add", "trace_once", "forward", "pass"),
               CaseRecord("ops", "nn.functional.elu", "trace_once", "backward", "fail_accuracy"),
               CaseRecord("ops", "add", "trace_once", "backward", "pass")]
    lines = coverage_lines(records)
    assert lines[0].startswith("2 ops, 3 cases")
    row = next(line for line in lines if "backward" in line).split()
    assert row[:3] == ["trace_once", "backward", "2"] and row[3:] == ["1", "1"]


def test_failure_text_names_status_repro_and_rerun() -> None:
    record = CaseRecord("ops", "nn.functional.elu", "trace_once", "backward", "fail_accuracy",
                        message="1 of 3 samples: ...", repro="pytest x")
    text = failure_text(record, "", "/tmp/r.py", Path("/tmp"))
    assert text.startswith("fail_accuracy: nn.functional.elu backward on trace_once")
    assert "PJRT_DEVICE=CPU python /tmp/r.py" in text and text.endswith("rerun: pytest x")
    assert "--xla-write-repro=DIR" in failure_text(record, "", "", None)


def test_op_records_and_registry_entries_know_directions() -> None:
    """An op record's direction is a mode to the file readers; an entry narrows by op globs and direction."""
    record = CaseRecord("ops", "add", "trace_once", "backward", "pass").to_json()
    assert record_value_problem(record) == ""
    entry = parse_entry({"id": "local:x", "title": "t", "kind": "wrong_result", "raises": "AssertionError",
                         "tests": ["test_op"], "ops": ["nn.functional.*elu"], "modes": ["backward"]}, source="t.toml")
    assert entry.applies_to("test_op", {"xla_op": "nn.functional.celu"}, ["backward"])
    assert not entry.applies_to("test_op", {"xla_op": "add"}, ["backward"])
    assert not entry.applies_to("test_op", {"xla_op": "nn.functional.elu"}, ["forward"])


# --- comparisons and reproducers (torch, no XLA) ----------------------------------------------------


def test_first_bad_element_and_random_statistics() -> None:
    torch = pytest.importorskip("torch")
    from pytest_xla_dynamo.ops import checks

    ref = torch.tensor([1.0, 2.0, 3.0])
    problem = checks.compare_exact("grad[0]", ref, torch.tensor([1.0, 2.5, 3.0]), ref.double())
    assert "first at [1]: backend 2.5, eager 2 (fp64 2)" in problem
    noise = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    other = torch.randn(4096, generator=torch.Generator().manual_seed(1))
    assert checks.compare_random("output[0]", noise, other) == ""  # another draw of the same distribution
    assert "standard errors" in checks.compare_random("output[0]", noise, other + 1.0)


def test_reproducer_source_writes_exact_values() -> None:
    torch = pytest.importorskip("torch")
    from pytest_xla_dynamo.ops.repro import public_name, tensor_source

    assert public_name(torch.nn.functional.elu) == "torch.nn.functional.elu"
    t = torch.tensor([[0.1, float("nan")], [float("-inf"), 2.0]])
    rebuilt = eval(tensor_source(t, exact=True), {"torch": torch, "nan": float("nan"), "inf": float("inf")})
    assert torch.equal(rebuilt.isnan(), t.isnan()) and rebuilt[1, 0] == -float("inf") and rebuilt[0, 0] == t[0, 0]


# --- real torch_xla: the op server and whole sessions -----------------------------------------------

needs_xla = pytest.mark.skipif(any(__import__("importlib").util.find_spec(m) is None
                                   for m in ("torch_xla", "expecttest")), reason="needs torch_xla and expecttest")


@needs_xla
def test_server_reports_a_killed_child_as_a_crash_and_goes_on(tmp_path: Path) -> None:
    """A case whose process dies is ``crash`` with the signal and the sample's reproducer; the next case runs in a
    new child (here dropout, whose random samples are compared by statistics)."""
    from pytest_xla_dynamo.ops.client import OpServer

    server = OpServer()
    try:
        assert server.run("add", "trace_everytime", "forward", 1, 300)["status"] == "pass"
        assert server.proc is not None
        pid = server.proc.pid
        server.scratch.unlink()  # the first case's sample: the thread waits for the next case's

        def kill_when_running() -> None:
            deadline = time.monotonic() + 60
            while not server.scratch.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(pid, signal.SIGSEGV)

        threading.Thread(target=kill_when_running, daemon=True).start()
        crashed = server.run("nn.functional.conv2d", "trace_once", "backward", 1, 300, repro_dir=tmp_path)
        assert crashed["status"] == "crash" and crashed["signal"] == "SIGSEGV"
        assert "while running sample 0" in crashed["message"] and Path(crashed["repro"]).exists()
        dropout = server.run("nn.functional.dropout", "trace_everytime", "forward", 1, 300)
        assert dropout["status"] == "pass", dropout["message"]  # random samples: not failed for the draw
        assert "not element by element" in dropout["notes"][0]
        assert server.started == 2
    finally:
        server.shutdown()


@needs_xla
def test_written_reproducer_fails_alone_where_the_op_is_wrong(tmp_path: Path) -> None:
    """The ELU backward reproducer needs only torch and torch_xla: it exits 1 (the known bug); add's exits 0."""
    from pytest_xla_dynamo.ops.client import OpServer

    server = OpServer()
    try:
        elu = server.run("nn.functional.elu", "trace_everytime", "backward", 1337, 300, repro_dir=tmp_path)
        assert elu["status"] == "fail_accuracy" and elu["repro"]
    finally:
        server.shutdown()
    env = {**os.environ, "PJRT_DEVICE": "CPU", "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-I", elu["repro"]], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "nn.functional.elu backward on trace_everytime: DIFFERS from the CPU" in done.stdout


OPS_TEST = """
def test_op(xla_ops, xla_op, xla_backend, xla_direction):
    xla_ops.check(xla_op, xla_backend, xla_direction)
"""


@needs_xla
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_op_session_records_gates_and_xfails_the_known_bug(pytester: pytest.Pytester, workers: list[str]) -> None:
    """A session of ELU and add on both backends: ELU's backward is the registry's strict xfail, the rest pass;
    the coverage table, the records and an expected file written and gated again."""
    pytester.makepyfile(test_ops=OPS_TEST)
    args = ["--xla-ops=nn.functional.elu,add", "--xla-backend=trace_once,trace_everytime", "--xla-report=json",
            "-p", "no:cacheprovider", *workers]
    first = pytester.runpytest_subprocess(*args, "--xla-expected=expected.csv", "--xla-update-expected")
    first.assert_outcomes(passed=6, xfailed=2)
    first.stdout.fnmatch_lines(["*xla ops coverage*", "2 ops, 8 cases*",
                                "trace_once * backward * 2 * 1 * 1*"])
    rows = (pytester.path / "expected.csv").read_text()
    assert "nn.functional.elu,trace_once,backward,fail_accuracy" in rows
    assert "add,trace_everytime,forward,pass" in rows
    records = [json.loads(line) for line in (pytester.path / "xla-report" / "xla-dynamo.jsonl").read_text().splitlines()
               if '"suite": "ops"' in line]
    assert len(records) == 8 and {r["mode"] for r in records} == {"forward", "backward"}
    again = pytester.runpytest_subprocess(*args, "--xla-expected=expected.csv")
    again.assert_outcomes(passed=6, xfailed=2)
    assert again.ret == 0


@needs_xla
def test_unknown_op_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ops=OPS_TEST)
    result = pytester.runpytest_subprocess("--xla-ops=nn.functional.elux", "-p", "no:cacheprovider")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--xla-ops: no OpInfo entry matches 'nn.functional.elux'*did you mean*"])
    assert "Traceback" not in result.stderr.str()
