"""Fault injection for the files the plugin reads and writes (issue 28): every bad file a usage error (exit 4)
naming the file and line, no traceback, nothing half-written; written files keep a mode and a symlink's target.

* Reading (``fileio.read_text``): UTF-16 (with or without a byte-order mark), binary data, invalid UTF-8, a
  folder, a missing file; a UTF-8 BOM (a spreadsheet's CSV) is read. The same through the expected-results CSV,
  the JSON report, the known-issue TOML and the table's ``--check``.
* Writing (``fileio.atomic_write``): an existing file's mode is kept, a symlink's target is rewritten; two
  sessions publishing one report folder cannot mix their sets (the folder lock).
* The expected file: mode ``eval`` refused with its line.
* The sessions (one interpreter, ``sample_data.run_sessions``): ``--xla-expected`` UTF-16 / binary with and
  without ``--xla-update-expected`` (the file untouched), a BOM CSV gating as usual, ``--xla-known-issues-file``
  a folder or UTF-16, and ``python -m pytest_xla_dynamo known-issues --check DIR``.

``merge`` is in test_faults_merge.py, the registry's entries in test_faults_registry.py, the options and markers
in test_faults_options.py.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sample_data import clean_env, earlier_set, run_sessions, sample_records, timing_figures, timing_record, umask

from pytest_xla_dynamo import report
from pytest_xla_dynamo.fileio import TextFileError, atomic_write_text, read_text
from pytest_xla_dynamo.gating.expected import ExpectedFileError, read_expected
from pytest_xla_dynamo.known_issues.exceptions import RegistryError
from pytest_xla_dynamo.known_issues.registry import load_file
from pytest_xla_dynamo.records import json_fields
from pytest_xla_dynamo.records.jsonform import JSON_TYPES
from pytest_xla_dynamo.report.writer import ReportSet, folder_lock

pytest_plugins = ["pytester"]

HEADER = "name,backend,mode,status,graph_status,graph_breaks,unique_graphs,fallbacks,recompiles,flaky,known_issue"
ROW = "resnet18,trace_once,train,pass,,0,1,0,0,false,"


def _clean(output: str) -> None:
    assert "Traceback" not in output, output[-3000:]
    assert "INTERNALERROR" not in output, output[-3000:]


# --- reading -------------------------------------------------------------------------------------------------


def test_read_text_refuses_what_is_not_utf8(tmp_path: Path) -> None:
    """UTF-16/32 (by their BOM), binary data and invalid UTF-8 are named with the file (and the line); a UTF-8
    BOM is dropped; a folder and a missing file are said as such."""
    cases = {
        "utf16.csv": (codecs.BOM_UTF16_LE + "a,b\n".encode("utf-16-le"), "utf16.csv: the file is UTF-16-encoded"),
        "utf16be.csv": (codecs.BOM_UTF16_BE + "a\n".encode("utf-16-be"), "utf16be.csv: the file is UTF-16-encoded"),
        "utf32.csv": (codecs.BOM_UTF32_LE + "a\n".encode("utf-32-le"), "utf32.csv: the file is UTF-32-encoded"),
        "nobom16.csv": ("a,b\n".encode("utf-16-le"), "nobom16.csv:1: a NUL byte: a binary file (or UTF-16"),
        "latin1.csv": ("a\nb\ncaf\xe9\n".encode("latin-1"), "latin1.csv:3: not UTF-8 text (byte 0xe9 at offset 7)"),
        "binary.bin": (b"\x89PNG\r\n\x1a\n\x00\x00", "binary.bin:1: not UTF-8 text (byte 0x89 at offset 0)"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(TextFileError) as err:
            read_text(tmp_path / name)
        assert str(err.value).startswith(str(tmp_path / name)), (name, str(err.value))
        assert message in str(err.value), (name, str(err.value))
        assert "save it as UTF-8" in str(err.value) or "not UTF-8 text" in str(err.value)
    (tmp_path / "bom.csv").write_bytes(codecs.BOM_UTF8 + b"a,b\n")
    assert read_text(tmp_path / "bom.csv") == "a,b\n"
    with pytest.raises(TextFileError, match="is a directory, not a file"):
        read_text(tmp_path)
    with pytest.raises(TextFileError, match=r"nope\.csv: no such file"):
        read_text(tmp_path / "nope.csv")


def test_expected_csv_encodings_and_modes(tmp_path: Path) -> None:
    """The expected CSV: a spreadsheet's BOM reads (was "missing column(s) name"); UTF-16 is named with the file;
    mode ``eval`` is refused with its line."""
    bom = tmp_path / "bom.csv"
    bom.write_bytes(codecs.BOM_UTF8 + f"{HEADER}\n{ROW}\n".encode())
    assert list(read_expected(bom)) == [("resnet18", "trace_once", "train")]
    utf16 = tmp_path / "utf16.csv"
    utf16.write_text(f"{HEADER}\n{ROW}\n", encoding="utf-16")
    with pytest.raises(ExpectedFileError, match=r"utf16\.csv: the file is UTF-16-encoded"):
        read_expected(utf16)
    evaluated = tmp_path / "eval.csv"
    evaluated.write_text(f"{HEADER}\n{ROW}\nresnet18,trace_once,eval,pass,,,,,,false,\n")
    with pytest.raises(ExpectedFileError) as err:
        read_expected(evaluated)
    assert str(err.value) == f"{evaluated}:3: column mode: invalid value 'eval'; valid: train, infer, forward, backward"


def test_json_report_encoding_and_field_types(tmp_path: Path) -> None:
    """A JSON report (a shard, a timing baseline): not UTF-8, a field of the wrong type, an environment that is
    not an object: a ValueError naming the file and line (was a TypeError traceback in merge)."""
    path = tmp_path / "r.jsonl"
    report.write_json(sample_records()[:2], path, {})
    good = path.read_text().splitlines()
    cases = {
        '"speedup": 2.0': ('"speedup": "fast"', "r.jsonl:1: not a record: field 'speedup': \"fast\" is not a number"),
        '"name": "resnet18"': ('"name": 18', "r.jsonl:1: not a record: field 'name': 18 is not a string"),
        '"batch_size": 2': ('"batch_size": true', "field 'batch_size': true is not an integer or null"),
        '"flaky": false': ('"flaky": "no"', "field 'flaky': \"no\" is not true or false"),
        '"extra": {}': ('"extra": []', "field 'extra': [] is not an object"),
        '"environment": {}': ('"environment": "x"', "r.jsonl:1: field 'environment': \"x\" is not an object"),
        '"mode": "train", ': ("", "r.jsonl:1: not a record: missing field(s) 'mode'"),
    }
    for old, (new, message) in cases.items():
        assert old in good[0], old
        path.write_text("\n".join([good[0].replace(old, new, 1), *good[1:]]) + "\n")
        with pytest.raises(ValueError) as err:
            report.read_report(path)
        assert message in str(err.value), (old, str(err.value))
    path.write_text("\n".join(good) + "\n", encoding="utf-16")
    with pytest.raises(ValueError, match=r"r\.jsonl: the file is UTF-16-encoded"):
        report.read_report(path)
    # every field of a record's JSON object is checked: a field of an annotation json_problem does not know is let
    # through
    annotations = {annotation for _, annotation, _ in json_fields()}
    assert annotations <= set(JSON_TYPES), annotations - set(JSON_TYPES)


def test_known_issue_toml_encodings(tmp_path: Path) -> None:
    entry = '[[issue]]\nid = "local:x"\nkind = "error"\nraises = "KeyError"\n'
    bom = tmp_path / "bom.toml"
    bom.write_bytes(codecs.BOM_UTF8 + entry.encode())
    assert [e.id for e in load_file(bom)] == ["local:x"]
    utf16 = tmp_path / "utf16.toml"
    utf16.write_text(entry, encoding="utf-16")
    with pytest.raises(RegistryError, match=r"utf16\.toml: the file is UTF-16-encoded"):
        load_file(utf16)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xd8\xff\xe0 jpeg")
    with pytest.raises(RegistryError, match=r"binary\.toml:1: not UTF-8 text"):
        load_file(binary)
    with pytest.raises(RegistryError, match="is a directory, not a file"):
        load_file(tmp_path)


# --- writing -------------------------------------------------------------------------------------------------


def test_atomic_write_keeps_the_mode_and_a_symlinks_target(tmp_path: Path) -> None:
    """Rewriting an existing file keeps its mode (was reset to 0666 & ~umask); a symlink stays a link and its
    target gets the text (was replaced by a plain file, the target not updated); a new file is ordinary."""
    kept = tmp_path / "expected.csv"
    kept.write_text("old\n")
    kept.chmod(0o640)
    atomic_write_text(kept, "new\n")
    assert kept.read_text() == "new\n" and stat.S_IMODE(kept.stat().st_mode) == 0o640
    target = tmp_path / "real" / "expected.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "link.csv"
    link.symlink_to(Path("real") / "expected.csv")  # relative, as `ln -s` makes them
    chain = tmp_path / "chain.csv"
    chain.symlink_to(link)
    atomic_write_text(chain, "through the chain\n")
    assert chain.is_symlink() and link.is_symlink()
    assert target.read_text() == "through the chain\n" and stat.S_IMODE(target.stat().st_mode) == 0o600
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "made" / "new.csv")
    atomic_write_text(dangling, "created\n")
    assert dangling.is_symlink() and (tmp_path / "made" / "new.csv").read_text() == "created\n"
    fresh = tmp_path / "fresh.md"
    atomic_write_text(fresh, "x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask()
    assert sorted(p.name for p in tmp_path.rglob(".*.tmp")) == []  # no temporary file left


def test_two_writers_of_one_report_folder_do_not_mix_sets(tmp_path: Path) -> None:
    """The moves of a set wait for the folder's lock: while another session holds it nothing of this set
    appears, then the whole set does (two sessions used to leave one's CSV and the other's JSONL)."""
    folder = tmp_path / "reports"
    before = earlier_set(folder)
    records = sample_records()
    writer = ReportSet(records, ["csv", "json"], folder, {"session": "second"})
    with folder_lock(folder):
        thread = threading.Thread(target=writer.write)
        thread.start()
        time.sleep(1.0)
        assert thread.is_alive() and not writer.published  # waiting for the lock
        assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in before} == before  # untouched
    thread.join(timeout=30)
    assert writer.published and writer.errors == []
    assert report.read_report(folder / "xla-dynamo.jsonl")[1] == {"session": "second"}
    assert (folder / "xla-dynamo.csv").read_text() != before["xla-dynamo.csv"].decode()
    assert not (folder / "xla-dynamo.png").exists()  # the earlier set's other file: removed with the whole set


def test_two_sessions_writing_at_once_leave_one_whole_set(tmp_path: Path) -> None:
    """Two processes writing their sets into one folder at the same time, 30 times each: both succeed, and the
    folder ends with one writer's CSV and JSON Lines (their model names carry the writer's name)."""
    folder = tmp_path / "reports"
    folder.mkdir()
    script = (
        "import sys\n"
        "from pytest_xla_dynamo.report.writer import write_reports\n"
        "from sample_data import sample_records\n"
        "name = sys.argv[1]\n"
        "records = sample_records()\n"
        "for r in records:\n"
        "    r.name = name + '_' + r.name\n"
        "for _ in range(30):\n"
        "    lines, errors = write_reports(records, ['csv', 'json'], sys.argv[2], {'writer': name})\n"
        "    assert not errors, errors\n"
    )
    env = clean_env(PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    procs = [subprocess.Popen([sys.executable, "-c", script, name, str(folder)], env=env)
             for name in ("first", "second")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    records, environment = report.read_report(folder / "xla-dynamo.jsonl")
    writer = environment["writer"]
    assert {r.name.split("_", 1)[0] for r in records} == {writer}
    names = {line.split(",")[1] for line in (folder / "xla-dynamo.csv").read_text().splitlines()[1:]}
    assert names and {n.split("_", 1)[0] for n in names} == {writer}
    assert sorted(p.name for p in folder.iterdir()) == ["xla-dynamo.csv", "xla-dynamo.jsonl"]


# --- sessions ------------------------------------------------------------------------------------------------

PLAIN = """
import os

def test_plain():
    print("PJRT_DEVICE", repr(os.environ.get("PJRT_DEVICE")))
"""

#: an XLA test: where one is selected the plugin sets PJRT_DEVICE's default (a plain session is left alone)
DEVICE = """
import os

import pytest

@pytest.mark.xla
def test_device():
    print("PJRT_DEVICE", repr(os.environ.get("PJRT_DEVICE")))
"""


def test_bad_files_in_sessions(pytester: pytest.Pytester) -> None:
    """Each bad file of a session: exit 4 before any test, the file named, no traceback, the file untouched."""
    pytester.makepyfile(test_plain=PLAIN, test_device=DEVICE)
    path = pytester.path
    (path / "utf16.csv").write_text(f"{HEADER}\n{ROW}\n", encoding="utf-16")
    (path / "binary.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff")
    (path / "bom.csv").write_bytes(codecs.BOM_UTF8 + f"{HEADER}\n".encode())
    (path / "eval.csv").write_text(f"{HEADER}\nresnet18,trace_once,eval,pass,,,,,,false,\n")
    (path / "utf16.toml").write_text('[[issue]]\nid = "local:x"\nkind = "error"\nraises = "KeyError"\n',
                                     encoding="utf-16")
    (path / "folder.toml").mkdir()
    (path / "utf16.jsonl").write_text('{"suite": "timing"}\n', encoding="utf-16")
    fresh = timing_figures()
    assert fresh.runs is not None
    fresh.runs = replace(fresh.runs, placements="fresh")
    fresh_record = timing_record("m", "trace_once", "train", 1.0, timing=fresh)
    (path / "fresh.jsonl").write_text(json.dumps(fresh_record.to_json()))
    pinned = timing_figures()
    assert pinned.runs is not None
    pinned.runs = replace(pinned.runs, timing_cpus=[0])
    pinned_record = timing_record("m", "trace_once", "train", 1.0, timing=pinned)
    (path / "pinned.jsonl").write_text(json.dumps(pinned_record.to_json()))
    originals = {name: (path / name).read_bytes() for name in ("utf16.csv", "binary.csv", "eval.csv")}
    cases = [
        (["--xla-expected=utf16.csv"], "xla-dynamo gate: utf16.csv: the file is UTF-16-encoded"),
        (["--xla-expected=utf16.csv", "--xla-update-expected"], "xla-dynamo gate: utf16.csv: the file is UTF-16"),
        (["--xla-expected=binary.csv"], "xla-dynamo gate: binary.csv:1: not UTF-8 text (byte 0x89 at offset 0)"),
        (["--xla-expected=binary.csv", "--xla-update-expected"], "xla-dynamo gate: binary.csv:1: not UTF-8 text"),
        (["--xla-expected=eval.csv"], "xla-dynamo gate: eval.csv:2: column mode: invalid value 'eval'; valid: "
                                      "train, infer"),
        (["--xla-known-issues-file=utf16.toml"], "known issues: utf16.toml: the file is UTF-16-encoded"),
        (["--xla-timing-baseline=utf16.jsonl", "--xla-min-speedup-ratio=0.9"],
         "xla-dynamo gate: utf16.jsonl: the file is UTF-16-encoded"),
        (["--xla-timing-baseline=fresh.jsonl", "--xla-min-speedup-ratio=0.9"],
         "xla-dynamo gate: fresh.jsonl was measured with xla_placements=fresh, this run with xla_placements=once"),
        (["--xla-timing-baseline=pinned.jsonl", "--xla-min-speedup-ratio=0.9"],
         "xla-dynamo gate: pinned.jsonl was measured with its timed runs pinned to CPU 0, this run's are not pinned"),
        (["--xla-known-issues-file=folder.toml"], "--xla-known-issues-file: 'folder.toml' is a directory; valid: "
                                                  "a TOML file"),
    ]
    good = [(["--xla-expected=bom.csv", "test_plain.py"], {}), (["test_device.py"], {"PJRT_DEVICE": ""})]
    results = run_sessions(path, [{"args": args, "env": {}} for args, _ in cases]
                           + [{"args": args, "env": env} for args, env in good])
    for (args, message), result in zip(cases, results, strict=False):
        output = result["out"] + result["err"]
        assert result["ret"] == pytest.ExitCode.USAGE_ERROR, (args, output[-2000:])
        assert f"ERROR: {message}" in result["err"], (args, output[-2000:])
        assert "PJRT_DEVICE" not in result["out"]  # no test ran
        _clean(output)
    assert {name: (path / name).read_bytes() for name in originals} == originals  # nothing rewritten
    bom, empty_device = results[len(cases):]
    assert bom["ret"] == 0, bom["out"][-2000:] + bom["err"][-2000:]  # a spreadsheet's CSV: read as any other
    assert "gating against bom.csv (0 rows)" in bom["out"]
    assert empty_device["ret"] == 0, empty_device["err"][-2000:]
    assert "PJRT_DEVICE 'CPU'" in empty_device["out"]  # PJRT_DEVICE= (empty) defaults to CPU, as unset


def test_known_issues_check_of_a_folder(tmp_path: Path) -> None:
    """``known-issues --check DIR`` and ``--file DIR``: exit 4 saying it is a directory (was "no such file")."""
    for args in (["--check", str(tmp_path)], ["--file", str(tmp_path), "--markdown"]):
        run = subprocess.run([sys.executable, "-m", "pytest_xla_dynamo", "known-issues", *args], capture_output=True,
                             text=True, env=clean_env(), cwd=tmp_path, timeout=120)
        assert run.returncode == 4, run.stderr
        assert f"error: {tmp_path}: is a directory, not a file" in run.stderr
        _clean(run.stdout + run.stderr)


# --- third round (issue 47): bounded readers, the registry's load time, the expected file's header -------------

DEEP_TOML = ('[[issue]]\nid = "local:deep"\nkind = "error"\nraises = "KeyError"\nnotes = '
             + "[" * 3000 + "]" * 3000 + "\n")


def test_readers_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nesting past ``fileio.MAX_DEPTH`` in a known-issue TOML and in a JSON report (an object, an array; was:
    RecursionError), a device or a FIFO (was: ``/dev/zero`` read until MemoryError), a file over
    ``MAX_FILE_BYTES``: each a clear error naming the file (and the line); brackets in strings do not count."""
    from pytest_xla_dynamo import fileio

    (tmp_path / "deep.toml").write_text(DEEP_TOML)
    with pytest.raises(RegistryError, match=r"deep\.toml:5: nested more than 64 levels deep; valid: at most 64"):
        load_file(tmp_path / "deep.toml")
    record = json.dumps(sample_records()[0].to_json())
    for name, deep in (("object", '{"a": ' * 3000 + "1" + "}" * 3000), ("array", "[" * 3000 + "]" * 3000)):
        (tmp_path / f"{name}.jsonl").write_text(f"{record}\n{deep}\n")
        with pytest.raises(ValueError, match=rf"{name}\.jsonl:2: nested more than 64 levels deep"):
            report.read_json(tmp_path / f"{name}.jsonl")
    (tmp_path / "strings.toml").write_text('[[issue]]\nid = "local:s"\nkind = "error"\nraises = "KeyError"\n'
                                           f'title = "{"[" * 200}"\nnotes = """\n{"{" * 200}\n"""  # {"[" * 200}\n')
    assert [e.id for e in load_file(tmp_path / "strings.toml")] == ["local:s"]
    fileio.check_nesting('{"a": "' + "[" * 200 + '"}', "s.json", "json")
    for device in ("/dev/zero", "/dev/null"):
        with pytest.raises(TextFileError, match=rf"{device}: not a regular file"):
            read_text(device)
    os.mkfifo(tmp_path / "fifo.csv")
    with pytest.raises(ExpectedFileError, match=r"fifo\.csv: not a regular file"):
        read_expected(tmp_path / "fifo.csv")
    monkeypatch.setattr(fileio, "MAX_FILE_BYTES", 1024)
    (tmp_path / "big.csv").write_text(HEADER + "\n" + ROW * 100)
    with pytest.raises(ExpectedFileError, match=r"big\.csv: larger than"):
        read_expected(tmp_path / "big.csv")


def test_expected_csv_cells_line_ends_and_header(tmp_path: Path) -> None:
    """A cell over 131,072 characters and CR-only line ends (was: ``_csv.Error``, INTERNALERROR), a column named
    twice (was: the later one read), a column the update would drop (only under ``--xla-update-expected``)."""
    cases = {
        "cell.csv": (f"{HEADER}\nresnet18,trace_once,train,pass,,,,,,false,{'x' * 140_000}\n",
                     r"cell\.csv:2: a cell longer than 131,072 characters"),
        "cr.csv": (f"{HEADER}\r{ROW}\r", r"cr\.csv:1: a line that ends in a lone CR .*valid: LF or CRLF line ends"),
        "twice.csv": (f"{HEADER},mode\n{ROW},infer\n", r"twice\.csv:1: column\(s\) 'mode' named twice in the header"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text, newline="")
        with pytest.raises(ExpectedFileError, match=message):
            read_expected(tmp_path / name)
    (tmp_path / "extra.csv").write_text(f"# kernels: default\n{HEADER},owner\n{ROW},me\n")
    assert len(read_expected(tmp_path / "extra.csv")) == 1  # gating: an unknown column is not read
    with pytest.raises(ExpectedFileError, match=r"extra\.csv:2: column\(s\) 'owner' would be dropped by the update"):
        read_expected(tmp_path / "extra.csv", columns_kept=True)


def test_registry_loads_in_linear_time(tmp_path: Path) -> None:
    """20,000 entries load in under 5 s (was: 1,000 in 4.1 s, 20,000 not in 120 s: every entry rescanned the
    file), each with its own line and ``affects`` line."""
    path = tmp_path / "many.toml"
    path.write_text("".join(f'[[issue]]\nid = "local:issue-{i}"\nkind = "error"\nraises = "RuntimeError"\n'
                            f'match = "boom {i}"\naffects = {{ torch_xla = ">=2.0" }}\ntests = ["test_x{i}"]\n\n'
                            for i in range(20_000)))
    start = time.perf_counter()
    entries = load_file(path)
    seconds = time.perf_counter() - start
    print(f"20,000 known-issue entries loaded in {seconds:.2f} s")
    assert seconds < 5, seconds
    assert len(entries) == 20_000
    assert (entries[0].line, entries[0].affects_line) == (2, 6)
    assert (entries[-1].line, entries[-1].affects_line) == (8 * 19_999 + 2, 8 * 19_999 + 6)


def test_a_signal_only_on_a_crash(tmp_path: Path) -> None:
    """``signal`` on an entry that is not a crash (was: accepted and ignored) is an error naming the line."""
    path = tmp_path / "signal.toml"
    path.write_text('[[issue]]\nid = "local:sig"\nkind = "error"\nraises = "KeyError"\nsignal = "SIGABRT"\n')
    with pytest.raises(RegistryError, match=r"signal\.toml:2: known issue 'local:sig': signal='SIGABRT' is given for "
                                            r"kind 'error', where it would be ignored"):
        load_file(path)


def test_cpu_ranges_are_bounded() -> None:
    """``xla_timing_cpus=0-100000000`` is refused before it is expanded (was: 8 GB after 34 s)."""
    from pytest_xla_dynamo.core.machine import parse_cpus

    start = time.perf_counter()
    with pytest.raises(ValueError, match="beyond CPU 65535"):
        parse_cpus("0-100000000")
    assert time.perf_counter() - start < 1
    assert parse_cpus("0-1,3") == (0, 1, 3)


def test_an_immutable_expected_file_is_refused_up_front(tmp_path: Path) -> None:
    """``chattr +i`` (root on a file system with the flag): the rename at the end would fail (was: a traceback after
    every test, exit 1); ``write_problem`` says so at the start. A device is no file to replace."""
    from pytest_xla_dynamo.gating.paths import write_problem

    assert write_problem(Path("/dev/null")) == "it is not a regular file (a device, a FIFO or a socket)"
    path = tmp_path / "expected.csv"
    path.write_text(f"{HEADER}\n")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system with the flag)")
    try:
        assert write_problem(path) == "the file is immutable or append-only (chattr +i/+a): it cannot be replaced"
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert write_problem(path) == ""


#: a disk that fills during the session: the gate's end-of-session writes fail as a full disk fails them (ENOSPC)
FULL_DISK = """
import errno

from pytest_xla_dynamo.gating import plugin as gate


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


saved = []


def pytest_configure(config):
    saved[:] = [gate.write_expected, gate.write_summary]
    gate.write_expected = gate.write_summary = _full


def pytest_unconfigure(config):
    gate.write_expected, gate.write_summary = saved
"""


def test_third_round_files_in_sessions(pytester: pytest.Pytester) -> None:
    """Issue 47's bad files and values of a session: exit 4 before any test (the file, line and value named, no
    traceback, the file untouched); a disk that fills during the run: the file left as it was, the error said in
    the gate's section, exit 1 (was: a traceback after every test)."""
    pytester.makepyfile(test_plain=PLAIN, test_device=DEVICE, fulldisk=FULL_DISK)
    path = pytester.path
    (path / "deep.toml").write_text(DEEP_TOML)
    (path / "deep.jsonl").write_text("[" * 3000 + "]" * 3000 + "\n")
    (path / "cell.csv").write_text(f"{HEADER}\nresnet18,trace_once,train,pass,,,,,,false,{'x' * 140_000}\n")
    (path / "cr.csv").write_bytes(f"{HEADER}\r{ROW}\r".encode())
    (path / "twice.csv").write_text(f"{HEADER},mode\n{ROW},infer\n")
    (path / "extra.csv").write_text(f"{HEADER},owner\n{ROW},me\n")
    (path / "good.csv").write_text(f"{HEADER}\n{ROW}\n")
    (path / "zero.csv").symlink_to("/dev/zero")
    originals = {name: (path / name).read_bytes() for name in ("cell.csv", "cr.csv", "twice.csv", "extra.csv",
                                                               "good.csv")}
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["--xla-known-issues-file=deep.toml"], {}, "known issues: deep.toml:5: nested more than 64 levels deep"),
        (["--xla-timing-baseline=deep.jsonl", "--xla-min-speedup-ratio=0.9"], {},
         "xla-dynamo gate: deep.jsonl:1: nested more than 64 levels deep"),
        (["--xla-expected=cell.csv"], {}, "xla-dynamo gate: cell.csv:2: a cell longer than 131,072 characters"),
        (["--xla-expected=cell.csv", "--xla-update-expected"], {}, "xla-dynamo gate: cell.csv:2: a cell longer"),
        (["--xla-expected=cr.csv"], {}, "xla-dynamo gate: cr.csv:1: a line that ends in a lone CR"),
        (["--xla-expected=zero.csv"], {}, "xla-dynamo gate: zero.csv: not a regular file"),
        (["--xla-expected=twice.csv"], {}, "xla-dynamo gate: twice.csv:1: column(s) 'mode' named twice"),
        (["--xla-expected=extra.csv", "--xla-update-expected"], {},
         "xla-dynamo gate: extra.csv:1: column(s) 'owner' would be dropped by the update"),
        (["-o", "xla_timing_cpus=0-100000000"], {},
         "xla_timing_cpus (ini): invalid value '0-100000000'; valid: a CPU list"),
        (["--xla-report-dir="], {}, "--xla-report-dir: invalid value ''; valid: a folder path"),
        (["test_device.py"], {"PYTEST_XLA_ISOLATED_CHILD": str(path / "no-folder" / "out.jsonl")},
         f"PYTEST_XLA_ISOLATED_CHILD={str(path / 'no-folder' / 'out.jsonl')!r}: cannot write the isolated test's "
         "reports there: No such file or directory"),
    ]
    full = ["-p", "fulldisk", "--xla-expected=good.csv", "--xla-update-expected", "--xla-summary=summary.md",
            "test_plain.py"]
    results = run_sessions(path, [{"args": args, "env": env} for args, env, _ in cases] + [{"args": full, "env": {}}])
    for (args, _, message), result in zip(cases, results, strict=False):
        output = result["out"] + result["err"]
        assert result["ret"] == pytest.ExitCode.USAGE_ERROR, (args, output[-2000:])
        assert f"ERROR: {message}" in result["err"], (args, output[-2000:])
        assert "PJRT_DEVICE" not in result["out"]  # no test ran
        _clean(output)
    disk = results[-1]
    output = disk["out"] + disk["err"]
    assert disk["ret"] == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    assert "PJRT_DEVICE" in disk["out"]  # the test ran
    assert "xla-dynamo: ERROR: good.csv not updated: No space left on device; the file is left as it was" in output
    assert "xla-dynamo: ERROR: summary not written to summary.md: No space left on device" in output
    _clean(output)
    assert {name: (path / name).read_bytes() for name in originals} == originals  # nothing rewritten
    assert not (path / "summary.md").exists()
