"""Tests of pytest_xla_dynamo.known_issues.table: the docs' known-issue table is the registry's.

``test_docs_table_matches_the_registry`` fails when the block of docs/known-issues.md differs from
the table generated from the registry; it prints the command that regenerates it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_xla_dynamo.known_issues import table
from pytest_xla_dynamo.known_issues.registry import Registry, load_registry, parse_entry

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / table.DOC_FILE
V29 = {"torch": "2.9.0", "torch_xla": "2.9.0"}


def test_docs_table_matches_the_registry() -> None:
    assert DOC.is_file(), f"{table.DOC_FILE} is missing: create it with `{table.COMMAND}`"
    block = table.current_block(DOC.read_text(encoding="utf-8"), str(DOC))
    expected = table.render_block(load_registry())
    assert block == expected, (f"the known-issue table in {table.DOC_FILE} differs from the registry; "
                               f"regenerate it with `{table.COMMAND}` (edit the registry, not the table)")


def test_documented_versions_are_the_pins() -> None:
    """The table judges the stack the project pins (the ``xla`` extra of pyproject.toml)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pins = dict(p.split("==") for p in project["project"]["optional-dependencies"]["xla"] if "==" in p)
    assert {d: pins[d] for d in table.DOC_VERSIONS} == dict(table.DOC_VERSIONS)


def test_packaged_rows() -> None:
    lines = table.render_markdown(load_registry(), V29).splitlines()
    assert lines[:2] == ["| id | kind | on 2.9 | reproducer | link |", "|---|---|---|---|---|"]
    assert len(lines) == 2 + len(load_registry())
    assert ("| `pytorch/xla#4174` | error | reproduces (strict xfail) | `test_cpu_backward_before_xla_runtime` | "
            "[pytorch/xla/issues/4174](https://github.com/pytorch/xla/issues/4174) |") in lines
    assert ("| `pytorch/torchdynamo#1837` | error | fixed (regression test) | `test_maxpool2d_training_under_dynamo` "
            "| [pytorch/torchdynamo/issues/1837](https://github.com/pytorch/torchdynamo/issues/1837) |") in lines
    zoo = next(e for e in load_registry() if e.id == "local:xla-batchnorm-biased-running-var:zoo")
    assert len(zoo.models) > 20 and zoo.models[:3] == ("resnet18", "resnet50", "mnasnet1_0")
    assert ("| `local:xla-batchnorm-biased-running-var:zoo` | wrong_result | reproduces (strict xfail) | suite cases: "
            f"{', '.join(zoo.models)} | none found (related: "
            "[pytorch/pytorch/issues/106366](https://github.com/pytorch/pytorch/issues/106366)) |") in lines
    assert ("| `local:openxla-eval-outputs-without-grad` | error | reproduces (strict xfail) | "
            "`test_openxla_eval_outputs_require_grad` | none found |") in lines


def _registry() -> Registry:
    return Registry([
        parse_entry({"id": "local:a|b", "kind": "error", "raises": "ValueError", "affects": {"torch_xla": ">=2.9"},
                     "reproducer": "test_a", "url": "https://example.org/bug/1"}, source="r"),
        parse_entry({"id": "local:cases", "kind": "graph_break", "raises": "AssertionError",
                     "affects": {"torch_xla": "<2.9"}, "tests": ["test_parity", "test_graphs"]}, source="r"),
    ])


def test_render_markdown_rules() -> None:
    assert table.render_markdown(_registry(), {"torch": "2.10.1", "torch_xla": "2.10.0.dev20251001"}) == (
        "| id | kind | on 2.10 | reproducer | link |\n"
        "|---|---|---|---|---|\n"
        "| `local:a\\|b` | error | reproduces (strict xfail) | `test_a` | "
        "[example.org/bug/1](https://example.org/bug/1) |\n"
        "| `local:cases` | graph_break | fixed (regression test) | suite cases: `test_parity`, `test_graphs` | "
        "none found |\n")
    old = table.render_markdown(_registry(), {"torch": "2.8.0", "torch_xla": "2.8.0"}).splitlines()
    assert old[0].startswith("| id | kind | on 2.8 |")
    assert "fixed (regression test)" in old[2] and "reproduces (strict xfail)" in old[3]


@pytest.mark.parametrize(("versions", "label"), [
    ({"torch": "2.9.0", "torch_xla": "2.9.0+cpu"}, "on 2.9"),
    ({"torch": "2.9.1", "torch_xla": None}, "on 2.9"),
    ({"torch": None, "torch_xla": None}, "on these versions"),
    ({"torch_xla": "not-a-version"}, "on torch_xla not-a-version"),
])
def test_on_label(versions: dict[str, str | None], label: str) -> None:
    assert table.on_label(versions) == label


def test_render_text() -> None:
    lines = table.render_text(_registry(), V29).splitlines()
    assert lines[0].split() == ["id", "kind", "on", "2.9", "reproducer", "link"]
    assert lines[1].split("  ")[0] == "local:a|b" and lines[1].endswith("https://example.org/bug/1")
    assert "suite cases: test_parity, test_graphs" in lines[2] and lines[2].endswith(" -")
    assert lines[1].index("error") == lines[0].index("kind") == lines[2].index("graph_break")


DOC_TEXT = f"# Known issues\n\nprose\n\n{table.BEGIN}\nold table\n{table.END}\n\nmore prose\n"


def test_replace_block_keeps_the_prose() -> None:
    assert table.current_block(DOC_TEXT) == "old table\n"
    assert table.replace_block(DOC_TEXT, "new\n") == DOC_TEXT.replace("old table\n", "new\n")
    empty = f"{table.BEGIN}\n{table.END}"
    assert table.replace_block(empty, "t\n") == f"{table.BEGIN}\nt\n{table.END}"


@pytest.mark.parametrize("text", [
    "no markers at all\n",
    f"{table.BEGIN}\nonly the begin line\n",
    f"{table.END}\nx\n{table.BEGIN}\n",
    f"{table.BEGIN}\n{table.END}\n{table.BEGIN}\n{table.END}\n",
])
def test_bad_marker_blocks(text: str) -> None:
    with pytest.raises(table.TableError, match="needs exactly one line '<!-- known-issues-table:begin -->' "
                                               "followed by one line '<!-- known-issues-table:end -->'"):
        table.replace_block(text, "t\n", "doc.md")


def test_write_block(tmp_path: Path) -> None:
    new = tmp_path / "docs" / "known-issues.md"
    assert table.write_block(new, "t\n")
    assert new.read_text() == f"# Known issues\n\n{table.BEGIN}\nt\n{table.END}\n"
    assert not table.write_block(new, "t\n")  # up to date: not rewritten
    doc = tmp_path / "doc.md"
    doc.write_text(DOC_TEXT)
    assert table.write_block(doc, "new\n")
    assert doc.read_text() == DOC_TEXT.replace("old table\n", "new\n")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(table.TableError, match="is a directory"):
        table.write_block(tmp_path, "t\n")


def test_main_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert table.main(["--markdown"]) == 0
    assert capsys.readouterr().out == table.render_markdown(load_registry(), table.DOC_VERSIONS)
    assert table.main([]) == 0
    assert capsys.readouterr().out == table.render_text(load_registry(), table.DOC_VERSIONS)
    doc = tmp_path / "doc.md"
    doc.write_text(DOC_TEXT)
    assert table.main(["--check", str(doc)]) == 1
    err = capsys.readouterr().err
    assert f"{doc}: the known-issue table differs from the registry; regenerate it with" in err
    assert f"python -m pytest_xla_dynamo.known_issues.table --write {doc}" in err
    assert table.main(["--write", str(doc)]) == 0
    assert capsys.readouterr().out == f"{doc}: wrote the known-issue table\n"
    assert table.main(["--check", str(doc)]) == 0
    assert table.main(["--write", str(doc)]) == 0
    assert capsys.readouterr().out.endswith(f"{doc}: the table is up to date\n")
    assert doc.read_text().startswith("# Known issues\n\nprose\n") and doc.read_text().endswith("\nmore prose\n")


def test_main_extra_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text('[[issue]]\nid = "local:mine"\nkind = "error"\nraises = "KeyError"\nreproducer = "test_mine"\n')
    assert table.main(["--markdown", "--file", str(extra)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "| `local:mine` | error | reproduces (strict xfail) | `test_mine` | none found |")


@pytest.mark.parametrize(("args", "message"), [
    (["--colour"], "unrecognized arguments: --colour"),
    (["--write", "a.md", "--check", "a.md"], "not allowed with argument"),
    (["--check", "{tmp}/missing.md"], "missing.md: no such file"),
    (["--check", "{tmp}/plain.md"], "plain.md: needs exactly one line"),
    (["--write", "{tmp}/plain.md"], "plain.md: needs exactly one line"),
    (["--write", "{tmp}"], "is a directory"),
    (["--file", "{tmp}/bad.toml"], "bad.toml: invalid TOML"),
])
def test_main_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    (tmp_path / "plain.md").write_text("# no markers\n")
    (tmp_path / "bad.toml").write_text("[[issue]\n")
    args = [a.format(tmp=tmp_path) for a in args]
    assert _exit_code(args) == table.USAGE_ERROR
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert (tmp_path / "plain.md").read_text() == "# no markers\n"  # nothing half-written


def _exit_code(args: list[str]) -> int | str | None:
    """main's return value, or the code it exits with (argparse's own errors)."""
    try:
        return table.main(args)
    except SystemExit as exc:
        return exc.code


def test_runnable_module_checks_the_docs() -> None:
    """``python -m pytest_xla_dynamo.known_issues.table --check docs/known-issues.md``, as CI would run it."""
    result = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m",
                             "pytest_xla_dynamo.known_issues.table", "--check", table.DOC_FILE],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{table.DOC_FILE}: the table is up to date\n"
    torch_modules = subprocess.run(
        [sys.executable, "-c", "import sys, pytest_xla_dynamo.known_issues.table as t; t.main(['--markdown']); "
         "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_xla')))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120).stdout.splitlines()[-1]
    assert torch_modules == "[]"  # no torch for the table
