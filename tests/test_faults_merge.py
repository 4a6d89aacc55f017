"""Fault injection for ``python -m pytest_xla_dynamo merge`` (issue 28): every bad input or output exit 4 with
``ERROR:`` naming the file, no traceback, and nothing written, all outputs checked before any is written (the
tables are not printed either); ``--summary $GITHUB_STEP_SUMMARY`` appends, as ``--xla-summary`` does.

In process (``merge.main``), hand-made shards; one subprocess runs the command line as a user would.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sample_data import clean_env, sample_records

from pytest_xla_dynamo.merge import main
from pytest_xla_dynamo.report import write_json

HEADER = "name,backend,mode,status,graph_breaks,unique_graphs,fallbacks,recompiles,flaky,known_issue"
EXPECTED = f"{HEADER}\nresnet18,trace_once,train,pass,,,,,false,\n"


def _shards(tmp_path: Path) -> list[Path]:
    records = sample_records()
    for i, r in enumerate(records):
        r.nodeid = f"t.py::test_{r.suite}[{r.name}-{r.backend}-{r.mode}-{i}]"
    folders = []
    for shard, recs in (("a", records[:5]), ("b", records[5:])):
        folder = tmp_path / f"shard-{shard}"
        folder.mkdir()
        write_json(recs, folder / "xla-dynamo.jsonl", {"argv": [shard]})
        folders.append(folder)
    return folders


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``root``: what "nothing written" compares."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def _case(tmp_path: Path, case: str, shards: list[Path]) -> tuple[list[str], str]:
    """The arguments of one bad merge and what its error says."""
    out = ["--out", str(tmp_path / "out"), "--formats", "csv,json"]
    expected = tmp_path / "expected.csv"
    if case == "summary is a folder":
        (tmp_path / "summary-dir").mkdir()
        return [*out, "--summary", str(tmp_path / "summary-dir"), *map(str, shards)], \
            f"--summary: cannot write {str(tmp_path / 'summary-dir')!r}: it is a directory"
    if case == "summary in an unwritable place":  # a folder that is a file: unwritable for root too
        (tmp_path / "afile").write_text("x")
        return [*out, "--summary", str(tmp_path / "afile" / "s.md"), *map(str, shards)], \
            f"--summary: cannot write {str(tmp_path / 'afile' / 's.md')!r}: {tmp_path / 'afile'} is not a directory"
    if case == "update-expected into a folder":
        (tmp_path / "exp-dir").mkdir()
        return [*out, "--update-expected", "--expected", str(tmp_path / "exp-dir"), *map(str, shards)], \
            f"--expected: {str(tmp_path / 'exp-dir')!r} is a directory"
    if case == "expected is a folder":
        (tmp_path / "exp-dir").mkdir()
        return [*out, "--expected", str(tmp_path / "exp-dir"), *map(str, shards)], \
            f"--expected: {str(tmp_path / 'exp-dir')!r} is a directory; valid: an expected-results CSV file"
    if case == "update-expected in an unwritable place":
        (tmp_path / "afile").write_text("x")
        return [*out, "--update-expected", "--expected", str(tmp_path / "afile" / "e.csv"), *map(str, shards)], \
            f"--expected: cannot write {str(tmp_path / 'afile' / 'e.csv')!r} under --update-expected"
    if case == "update-expected through a symlink into an unwritable place":  # the link's target is what is written
        (tmp_path / "afile").write_text("x")
        (tmp_path / "link.csv").symlink_to(tmp_path / "afile" / "e.csv")
        return [*out, "--update-expected", "--expected", str(tmp_path / "link.csv"), *map(str, shards)], \
            f"--expected: cannot write {str(tmp_path / 'link.csv')!r} under --update-expected: " \
            f"{tmp_path / 'afile'} is not a directory"
    if case == "out is a file":
        (tmp_path / "out").write_text("a file")
        return [*out, *map(str, shards)], \
            f"--out: cannot write the reports into {str(tmp_path / 'out')!r}: a file, not a folder"
    if case == "out in an unwritable place":
        (tmp_path / "afile").write_text("x")
        return ["--out", str(tmp_path / "afile" / "m"), *map(str, shards)], \
            f"--out: cannot write the reports into {str(tmp_path / 'afile' / 'm')!r}: cannot be created"
    if case == "expected UTF-16":
        expected.write_text(EXPECTED, encoding="utf-16")
        return [*out, "--expected", str(expected), *map(str, shards)], f"{expected}: the file is UTF-16-encoded"
    if case == "expected binary":
        expected.write_bytes(b"\x00\x01\x02\xff")
        return [*out, "--expected", str(expected), *map(str, shards)], f"{expected}:1: not UTF-8 text"
    if case == "update-expected of a UTF-16 file":
        expected.write_text(EXPECTED, encoding="utf-16")
        return [*out, "--update-expected", "--expected", str(expected), *map(str, shards)], \
            f"{expected}: the file is UTF-16-encoded"
    if case == "shard UTF-16":
        jsonl = shards[1] / "xla-dynamo.jsonl"
        jsonl.write_text(jsonl.read_text(), encoding="utf-16")
        return [*out, *map(str, shards)], f"{jsonl}: the file is UTF-16-encoded"
    if case == "shard binary":
        jsonl = shards[1] / "xla-dynamo.jsonl"
        jsonl.write_bytes(b"\x89PNG\r\n\x1a\n")
        return [*out, *map(str, shards)], f"{jsonl}:1: not UTF-8 text (byte 0x89 at offset 0)"
    if case == "shard field of the wrong type":
        jsonl = shards[1] / "xla-dynamo.jsonl"
        lines = jsonl.read_text().splitlines()
        lines[1] = lines[1].replace('"backend": "trace_once"', '"backend": 7', 1)
        assert '"backend": 7' in lines[1]
        jsonl.write_text("\n".join(lines) + "\n")
        return [*out, *map(str, shards)], f"{jsonl}:2: not a record: field 'backend': 7 is not a string"
    if case == "shard speedup of the wrong type":
        jsonl = shards[0] / "xla-dynamo.jsonl"
        lines = jsonl.read_text().splitlines()
        lines[0] = lines[0].replace('"speedup": 2.0', '"speedup": "2.0x"', 1)
        jsonl.write_text("\n".join(lines) + "\n")
        return [*out, *map(str, shards)], f"{jsonl}:1: not a record: field 'speedup': \"2.0x\" is not a number"
    if case == "shard folder missing":
        return [*out, str(shards[0]), str(tmp_path / "nope")], f"{tmp_path / 'nope'}: no such folder"
    raise AssertionError(case)


CASES = ["summary is a folder", "summary in an unwritable place", "update-expected into a folder",
         "expected is a folder", "update-expected in an unwritable place",
         "update-expected through a symlink into an unwritable place", "out is a file",
         "out in an unwritable place",
         "expected UTF-16", "expected binary", "update-expected of a UTF-16 file", "shard UTF-16", "shard binary",
         "shard field of the wrong type", "shard speedup of the wrong type", "shard folder missing"]


def _assert_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    """Exit 4 with ``message``, nothing printed but the error, no traceback, nothing written (no folder created)."""
    before = _snapshot(tmp_path)
    assert main(args) == 4
    captured = capsys.readouterr()
    assert f"ERROR: {message}" in captured.err, captured.err
    assert captured.out == ""  # no tables, no "written" line
    assert "Traceback" not in captured.err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("case", CASES)
def test_merge_refuses_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    """Exit 4, the file named, nothing printed but the error, nothing written (was: the reports written, then a
    traceback; or exit 1, the gate's "failed", after the tables)."""
    _assert_refused(tmp_path, capsys, *_case(tmp_path, case, _shards(tmp_path)))


def test_merge_appends_to_the_step_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--summary "$GITHUB_STEP_SUMMARY"`` (docs/ci.md's example) appends, as ``--xla-summary`` does (it replaced
    the file); another summary file is replaced, keeping its mode."""
    shards = _shards(tmp_path)
    step = tmp_path / "step_summary.md"
    step.write_text("## an earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    assert main(["--out", str(tmp_path / "m"), "--formats", "json", "--summary", str(step), *map(str, shards)]) == 0
    assert f"summary appended to {step}" in capsys.readouterr().out
    text = step.read_text()
    assert text.startswith("## an earlier step\n") and "merged from 2 shards" in text
    other = tmp_path / "other.md"
    other.write_text("old\n")
    other.chmod(0o640)
    assert main(["--out", str(tmp_path / "m"), "--formats", "json", "--summary", str(other), *map(str, shards)]) == 0
    assert f"summary written to {other}" in capsys.readouterr().out
    assert "old" not in other.read_text() and (other.stat().st_mode & 0o777) == 0o640


def test_merge_reads_a_spreadsheets_csv_and_keeps_a_symlinked_expected_file(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A BOM CSV gates as any other (was "missing column(s) name"); ``--update-expected`` of a symlink rewrites
    its target and keeps the link and the target's mode."""
    shards = _shards(tmp_path)
    bom = tmp_path / "bom.csv"
    bom.write_bytes(codecs.BOM_UTF8 + EXPECTED.encode())
    assert main(["--out", str(tmp_path / "m"), "--formats", "json", "--expected", str(bom), *map(str, shards)]) == 0
    assert "xla-dynamo gate PASSED: 1 case as expected" in capsys.readouterr().out
    target = tmp_path / "files" / "expected.csv"
    target.parent.mkdir()
    target.write_text(EXPECTED)
    target.chmod(0o600)
    link = tmp_path / "expected.csv"
    link.symlink_to(target)
    assert main(["--out", str(tmp_path / "m"), "--formats", "json", "--expected", str(link), "--update-expected",
                 *map(str, shards)]) == 0
    assert link.is_symlink() and (target.stat().st_mode & 0o777) == 0o600
    assert "alexnet,trace_once,train,fail_to_run" in target.read_text()


def test_merge_command_line_exit_codes(tmp_path: Path) -> None:
    """As a user runs it: a bad shard and a bad ``--out`` exit 4 with one ERROR line and no traceback (the CLI
    was exit 1 with a traceback for a decode error); usage errors too."""
    shards = _shards(tmp_path)
    jsonl = shards[1] / "xla-dynamo.jsonl"
    jsonl.write_bytes(b"\xff\xfe" + jsonl.read_text().encode("utf-16-le"))
    (tmp_path / "out").write_text("a file")
    for args, message in (
        (["--out", str(tmp_path / "m"), *map(str, shards)], f"ERROR: {jsonl}: the file is UTF-16-encoded"),
        (["--out", str(tmp_path / "out"), str(shards[0])], "ERROR: --out: cannot write the reports into"),
        (["--out"], "error: argument --out: expected one argument"),
    ):
        run = subprocess.run([sys.executable, "-m", "pytest_xla_dynamo", "merge", *args], capture_output=True,
                             text=True, env=clean_env(), cwd=tmp_path, timeout=120)
        assert run.returncode == 4, (args, run.stdout, run.stderr)
        assert message in run.stderr, (args, run.stderr)
        assert "Traceback" not in run.stderr and run.stdout == ""
    assert not (tmp_path / "m").exists()


# --- third round (issue 47): nesting, values, non-regular files, empty paths, outputs that are inputs -----------


def _edit_first_record(shard: Path, pattern: str, value: str) -> Path:
    """Replace ``pattern`` (a regex) with ``value`` in the first record of ``shard``'s report; the file."""
    jsonl = shard / "xla-dynamo.jsonl"
    lines = jsonl.read_text().splitlines()
    edited = re.sub(pattern, value, lines[0], count=1)
    assert edited != lines[0], (pattern, lines[0][:200])
    jsonl.write_text("\n".join([edited, *lines[1:]]) + "\n")
    return jsonl


def _third_round(tmp_path: Path, case: str, shards: list[Path]) -> tuple[list[str], str]:
    """The arguments of one bad merge of issue 47 and the start of what its error says."""
    out = ["--out", str(tmp_path / "out"), "--formats", "csv,json"]
    given = [*map(str, shards)]
    jsonl = shards[1] / "xla-dynamo.jsonl"
    if case in ("shard nested object", "shard nested array"):
        deep = '{"a": ' * 5000 + "1" + "}" * 5000 if case.endswith("object") else "[" * 5000 + "]" * 5000
        jsonl.write_text(jsonl.read_text() + deep + "\n")
        line = len(jsonl.read_text().splitlines())
        return [*out, *given], f"{jsonl}:{line}: nested more than 64 levels deep"
    speedups = {"speedup 0": ("0", "0"), "speedup -2": ("-2", "-2"), "speedup NaN": ("NaN", "nan"),
                "speedup inf": ("Infinity", "inf")}
    if case in speedups:
        written, said = speedups[case]
        edited = _edit_first_record(shards[0], r'"speedup": [^,]+', f'"speedup": {written}')
        return [*out, *given], f"{edited}:1: not a record: field 'speedup': {said} is out of range; valid: a finite " \
                               "number > 0 or null"
    if case == "mode eval":
        edited = _edit_first_record(shards[0], r'"mode": "[a-z]+"', '"mode": "eval"')
        return [*out, *given], f"{edited}:1: not a record: field 'mode': 'eval' is not a mode; valid: train, infer"
    if case == "suite nonsense":
        edited = _edit_first_record(shards[0], r'"suite": "[a-z]+"', '"suite": "nonsense"')
        return [*out, *given], f"{edited}:1: not a record: field 'suite': 'nonsense' is not a suite; valid: parity, " \
                               "graphs, timing"
    if case == "expected /dev/null":
        return [*out, "--expected", "/dev/null", *given], "--expected: '/dev/null' is not a regular file"
    if case == "expected a FIFO":
        os.mkfifo(tmp_path / "fifo.csv")
        return [*out, "--expected", str(tmp_path / "fifo.csv"), *given], \
            f"--expected: {str(tmp_path / 'fifo.csv')!r} is not a regular file"
    if case == "expected a link to /dev/zero":
        (tmp_path / "zero.csv").symlink_to("/dev/zero")
        return [*out, "--expected", str(tmp_path / "zero.csv"), *given], \
            f"--expected: {str(tmp_path / 'zero.csv')!r} is not a regular file"
    if case == "out is a shard":
        return ["--out", str(shards[0]), *given], f"--out: {str(shards[0])!r} is the folder of the shard"
    if case == "summary is a shard's report":
        return [*out, "--summary", str(jsonl), *given], f"--summary: {str(jsonl)!r} is an input of the merge"
    if case == "summary is the expected file":
        (tmp_path / "expected.csv").write_text(EXPECTED)
        return [*out, "--expected", str(tmp_path / "expected.csv"), "--summary", str(tmp_path / "expected.csv"),
                *given], f"--summary: {str(tmp_path / 'expected.csv')!r} is an input of the merge"
    if case == "formats empty":
        return ["--out", str(tmp_path / "out"), "--formats", "", *given], "--formats: empty ('')"
    raise AssertionError(case)


THIRD_ROUND = ["shard nested object", "shard nested array", "speedup 0", "speedup -2", "speedup NaN", "speedup inf",
               "mode eval", "suite nonsense", "expected /dev/null", "expected a FIFO", "expected a link to /dev/zero",
               "out is a shard", "summary is a shard's report", "summary is the expected file", "formats empty"]


@pytest.mark.parametrize("case", THIRD_ROUND)
def test_merge_refuses_bad_values_and_its_own_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     case: str) -> None:
    """Issue 47: a shard nested past the bound (was: RecursionError), a speedup, mode or suite the session's reader
    refuses (was: ``0.00x``, ``nanx``, "PASSED" with the row missing), an expected file that is no regular file (was:
    the gate skipped, exit 0), an output that is an input (was: a shard's records replaced), empty ``--formats``
    (was: nothing written, nothing said): exit 4, the error named, nothing written."""
    _assert_refused(tmp_path, capsys, *_third_round(tmp_path, case, _shards(tmp_path)))


@pytest.mark.parametrize("option", ["--out", "--summary", "--expected"])
def test_merge_refuses_an_empty_path(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str) -> None:
    """``--out ''`` (was: the reports written into the working folder), ``--summary ''``, ``--expected ''``: exit 4
    saying the path is empty; nothing written."""
    shards = _shards(tmp_path)
    args = {"--out": ["--out", ""], "--summary": ["--out", str(tmp_path / "o"), "--summary", ""],
            "--expected": ["--out", str(tmp_path / "o"), "--expected", ""]}[option]
    before = _snapshot(tmp_path)
    assert main([*args, *map(str, shards)]) == 4
    err = capsys.readouterr().err
    assert f"argument {option}: empty; valid: a path" in err, err
    assert "Traceback" not in err
    assert _snapshot(tmp_path) == before
