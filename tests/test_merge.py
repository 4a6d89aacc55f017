"""Merging sharded runs (``python -m pytest_xla_dynamo merge``): hand-made shards in process (one set, the
tables, the gate over all shards with MISSING, duplicates and mixed settings refused with nothing written, bad
arguments), and real shards of a real run (pytester subprocesses, XLA on the CPU) merged into the same tables
and verdict as the unsharded run of the same cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_data import sample_records, timing_record

from pytest_xla_dynamo.merge import main
from pytest_xla_dynamo.report import write_json

pytest_plugins = ["pytester"]


def _shards(tmp_path: Path) -> list[Path]:
    records = sample_records()
    for i, r in enumerate(records):
        r.nodeid = f"t.py::test_{r.suite}[{r.name}-{r.backend}-{r.mode}-{i}]"
    by_model: dict[str, list] = {"a": [], "b": []}
    for r in records:
        by_model["a" if r.name == "resnet18" else "b"].append(r)
    folders = []
    for shard, recs in by_model.items():
        folder = tmp_path / f"shard-{shard}"
        folder.mkdir()
        write_json(recs, folder / "xla-dynamo.jsonl", {"argv": [shard]})
        folders.append(folder)
    return folders


def test_merge_writes_one_set_and_prints_the_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shards = _shards(tmp_path)
    assert main(["--out", str(tmp_path / "merged"), "--formats", "csv,json", *map(str, shards)]) == 0
    out = capsys.readouterr().out
    assert f"11 records from 2 shards ({shards[0]}: 5, {shards[1]}: 6)" in out
    assert "parity" in out and "geomean" in out
    lines = (tmp_path / "merged" / "xla-dynamo.jsonl").read_text().splitlines()
    assert len(lines) == 11
    assert json.loads(lines[0])["environment"]["merged_from"] == [str(s) for s in shards]
    assert (tmp_path / "merged" / "xla-dynamo.csv").is_file()


def test_merge_gates_over_all_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shards = _shards(tmp_path)
    expected = tmp_path / "expected.csv"
    expected.write_text("name,backend,mode,status,graph_breaks,unique_graphs,fallbacks,recompiles,flaky,known_issue\n"
                        "resnet18,trace_once,train,pass,,,,,false,\n"
                        "alexnet,trace_once,train,fail_to_run,,,,,false,\n"
                        "vgg16,trace_once,train,pass,,,,,false,\n")
    summary = tmp_path / "summary.md"
    code = main(["--out", str(tmp_path / "m"), "--formats", "json", "--expected", str(expected),
                 "--summary", str(summary), *map(str, shards)])
    out = capsys.readouterr().out
    assert "vgg16 · trace_once · train" in out.split("MISSING", 1)[1], out  # in no shard: MISSING, not failing
    assert "xla-dynamo gate PASSED: 2 cases as expected, 3 missing" in out
    assert code == 0, out
    assert "merged from 2 shards" in summary.read_text()


def test_merge_updates_the_expected_file_from_all_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shards = _shards(tmp_path)
    expected = tmp_path / "expected.csv"
    expected.write_text("name,backend,mode,status,graph_breaks,unique_graphs,fallbacks,recompiles,flaky,known_issue\n"
                        "alexnet,trace_once,train,pass,,,,,false,\n"
                        "vgg16,trace_once,train,pass,,,,,false,\n")
    code = main(["--out", str(tmp_path / "m"), "--formats", "json", "--expected", str(expected),
                 "--update-expected", *map(str, shards)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "kept 1 rows no shard ran" in out and "xla-dynamo gate" not in out, out
    rows = {tuple(line.split(",")[:3]): line for line in expected.read_text().splitlines()[1:]}
    assert rows[("vgg16", "trace_once", "train")].split(",")[3] == "pass"  # no shard ran it: kept
    assert rows[("alexnet", "trace_once", "train")].split(",")[3] == "fail_to_run"  # from the shard
    assert ("resnet18", "trace_once", "train") in rows  # a new case: added


@pytest.mark.parametrize(("case", "message"), [
    ("update", "--update-expected needs --expected FILE"),
    ("duplicate", "duplicate cases in more than one shard"),
    ("settings", "the shards timed with different iterations_per_run: 1, 10"),
    ("missing", "no xla-dynamo.jsonl; run each shard with --xla-report=json"),
    ("formats", "--formats: invalid value 'xml'; valid: csv, json, png"),
    ("expected", "--expected: no such file"),
])
def test_merge_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str) -> None:
    shards = [str(s) for s in _shards(tmp_path)]
    args = ["--out", str(tmp_path / "out"), "--formats", "json"]
    if case == "duplicate":
        args += [shards[0], shards[0]]
    elif case == "settings":
        extra = tmp_path / "shard-c"
        extra.mkdir()
        write_json([timing_record("vgg16", "trace_once", "train", 1.0, iterations_per_run=10)],
                   extra / "xla-dynamo.jsonl", {})
        args += [*shards, str(extra)]
    elif case == "missing":
        args += [shards[0], str(tmp_path)]
    elif case == "formats":
        args = ["--out", str(tmp_path / "out"), "--formats", "xml", *shards]
    elif case == "update":
        args += ["--update-expected", *shards]
    else:
        args += ["--expected", str(tmp_path / "nope.csv"), *shards]
    assert main(args) == 4
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_merge_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 4
    assert "the following arguments are required: --out" in capsys.readouterr().err
    assert main(["--help"]) == 0


CONFTEST = """
import torch

from pytest_xla_dynamo.zoo import ModelSpec


def _net(width):
    return lambda tier: torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.Tanh(), torch.nn.Linear(width, 2))


def pytest_xla_register_models(register):
    for name, width in (("tiny_a", 8), ("tiny_b", 16), ("tiny_c", 4)):
        register(ModelSpec(name=name, source="user", build_model=_net(width),
                           build_inputs=lambda tier, bs: (torch.randn(bs, 8),), batch_size={"small": 2, "full": 2}))
"""

SUITE = """
import pytest

pytestmark = pytest.mark.xla_shared_case


@pytest.mark.xla_mode("train")
def test_training_parity(xla_parity, xla_model, xla_backend):
    xla_parity.check_case(xla_model, xla_backend)


@pytest.mark.xla_mode("infer")
def test_inference_parity(xla_parity, xla_model, xla_backend):
    xla_parity.check_case(xla_model, xla_backend)
"""


def _parity_table(lines: list[str]) -> list[str]:
    """The parity table printed after the line ``parity``, up to its counts line."""
    start = lines.index("parity") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("pass "))
    return lines[start:end + 1]


def test_shards_merged_equal_the_unsharded_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    common = ["-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "--xla-models=tiny_a,tiny_b,tiny_c",
              "--xla-backend=trace_everytime", "--xla-report=table,json"]
    whole = pytester.runpytest_subprocess(*common, "--xla-report-dir=whole", "--xla-expected=exp.csv",
                                          "--xla-update-expected")
    whole.assert_outcomes(passed=6)
    for index in (1, 2):
        shard = pytester.runpytest_subprocess(*common, f"--xla-report-dir=s{index}", f"--xla-shard={index}/2")
        assert shard.ret == 0
    again = pytester.runpytest_subprocess(*common, "--xla-report-dir=again", "--xla-expected=exp.csv")
    gate_whole = [line for line in again.stdout.lines if line.startswith(("cases:", "xla-dynamo gate PASSED"))]
    merged = pytester.run(
        __import__("sys").executable, "-m", "pytest_xla_dynamo", "merge", "--out", "merged", "--formats", "json",
        "--expected", "exp.csv", "s1", "s2")
    assert merged.ret == 0, merged.stdout.str() + merged.stderr.str()
    out = merged.stdout.lines
    assert _parity_table(out) == _parity_table(again.stdout.lines)  # the same table, rows in the same order
    assert "tiny_a" in "\n".join(_parity_table(out)) and "pass 6 / fail 0" in "\n".join(_parity_table(out))
    assert [line for line in out if line.startswith(("cases:", "xla-dynamo gate"))] == gate_whole
    assert gate_whole == ["cases: 6 PASS", "xla-dynamo gate PASSED: 6 cases as expected"]
    assert len((pytester.path / "merged" / "xla-dynamo.jsonl").read_text().splitlines()) == 6
