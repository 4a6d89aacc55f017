"""The expected-results file (gating.expected): round trip, the accepted dialects, and errors naming file and line."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from sample_data import sample_rows, umask

from pytest_xla_dynamo.gating.expected import (
    COLUMNS,
    CaseRow,
    ExpectedFileError,
    format_expected,
    parse_expected,
    parse_metadata,
    read_expected,
    read_metadata,
    write_expected,
)

HEADER = ",".join(COLUMNS)


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "expected.csv"
    write_expected(path, sample_rows())
    back = read_expected(path)
    assert back == {r.key: r for r in sample_rows()}
    text = path.read_text()
    assert text.splitlines()[0] == HEADER
    # sorted deterministically by (name, backend, mode), and written identically again
    assert [line.split(",")[0] for line in text.splitlines()[1:]] == ["BERT_pytorch", "alexnet", "alexnet",
                                                                    "resnet18"]
    assert format_expected(back.values()) == text
    assert not list(path.parent.glob(".*.tmp"))  # no temporary file left behind
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask()  # an ordinary file, not mkstemp's 0600


def test_read_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_expected(tmp_path / "nope.csv") == {}


def test_read_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(ExpectedFileError, match="is a directory"):
        read_expected(tmp_path)


def test_parse_accepts_pytorch_style_minimal_file() -> None:
    parsed = parse_expected("name,backend,mode,accuracy,graph_breaks,extra\nvgg16,openxla,train,pass,0,zzz\n")
    row = parsed[("vgg16", "openxla", "train")]
    assert row.status == "pass" and row.graph_breaks == 0 and row.fallbacks is None and not row.flaky


def test_parse_accepts_short_rows_and_blank_lines() -> None:
    parsed = parse_expected(f"{HEADER}\n\nm,b,train,pass\n")
    assert parsed[("m", "b", "train")] == CaseRow("m", "b", "train", "pass")


@pytest.mark.parametrize(("text", "message"), [
    ("name,backend\nx,y\n", "missing column(s) mode"),
    (f"{HEADER}\nm,b,train,passed,,,,,,,\n", "invalid value 'passed'"),
    (f"{HEADER}\nm,b,train,pass,broken,,,,,,\n",
     "column graph_status: invalid value 'broken'; valid: pass, fail_graph"),
    (f"{HEADER}\nm,b,train,pass,,-1,,,,,\n", "column graph_breaks: invalid value '-1'"),
    (f"{HEADER}\nm,b,train,pass,,two,,,,,\n", "column graph_breaks: invalid value 'two'"),
    (f"{HEADER}\nm,b,train,pass,,,,,,maybe,\n", "column flaky: invalid value 'maybe'"),
    (f"{HEADER}\nm,b,train,pass,,,,,,,\nm,b,train,pass,,,,,,,\n", "f.csv:3: duplicate case m,b,train"),
    (f"{HEADER}\n,b,train,pass,,,,,,,\n", "f.csv:2: empty name"),
    (f"{HEADER}\nm,b,train,pass,,,,,,,,,x,y\n", "f.csv:2: 14 cells, but the header has 12 columns (extra: 'x,y')"),
    (f"{HEADER}\n\nm,b,train,pass,,,,,,,,,\n", "f.csv:3: 13 cells, but the header has 12 columns"),  # real line
    (f"{HEADER}\nm,b,train,pass,,,,,,,,maybe\n", "column coverage: invalid value 'maybe'"),
    ("name,backend,mode\nm,b,train,pass\n", "f.csv:2: 4 cells, but the header has 3 columns (extra: 'pass')"),
])
def test_parse_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ExpectedFileError, match=re.escape(message)):
        parse_expected(text, "f.csv")


KERNELS = "ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, --xla_cpu_max_isa=AVX2"


def test_the_file_records_its_kernel_setting_and_cpu(tmp_path: Path) -> None:
    path = tmp_path / "expected.csv"
    meta = {"kernels": KERNELS, "cpu": "AMD EPYC 7B13; avx avx2 fma avx512f"}
    write_expected(path, sample_rows(), meta)
    text = path.read_text()
    assert text.splitlines()[:3] == [f"# kernels: {KERNELS}", "# cpu: AMD EPYC 7B13; avx avx2 fma avx512f", HEADER]
    assert read_expected(path) == {r.key: r for r in sample_rows()}  # the rows read as without metadata
    assert read_metadata(path) == meta and parse_metadata(text) == meta
    assert format_expected(sample_rows(), meta) == text
    # rewritten without saying: the file keeps its metadata; with other metadata: the file says that
    write_expected(path, sample_rows()[:1])
    assert read_metadata(path) == meta and len(read_expected(path)) == 1
    write_expected(path, sample_rows(), {"kernels": "uncapped"})
    assert read_metadata(path) == {"kernels": "uncapped"}
    # one line per value, whatever it holds
    assert format_expected([], {"cpu": "a\nb"}) == f"# cpu: a b\n{HEADER}\n"


def test_files_without_metadata_read_as_before_and_errors_count_the_metadata_lines(tmp_path: Path) -> None:
    assert parse_metadata(f"{HEADER}\nm,b,train,pass\n") == {}
    assert read_metadata(tmp_path / "missing.csv") == {} and read_metadata(tmp_path) == {}
    # comment lines of another form are comments; keys are read without regard to case
    assert parse_metadata(f"# a comment\n# Kernels: uncapped\n{HEADER}\n") == {"kernels": "uncapped"}
    with pytest.raises(ExpectedFileError, match=re.escape("f.csv:4: column status: invalid value 'passed'")):
        parse_expected(f"# kernels: {KERNELS}\n# cpu: x\n{HEADER}\nm,b,train,passed\n", "f.csv")
    # a spreadsheet's BOM before the metadata
    assert parse_metadata(f"\ufeff# kernels: uncapped\n{HEADER}\n") == {"kernels": "uncapped"}
    assert list(parse_expected(f"\ufeff# kernels: uncapped\n{HEADER}\nm,b,train,pass\n")) == [("m", "b", "train")]
