"""Tests of pytest_xla_dynamo.known_issues.registry and .exceptions: version matching, entry validation,
resolving ``raises``, matching names and parameters, loading TOML files, and the packaged registry
with its reproducers (pure logic, in process)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo import versions
from pytest_xla_dynamo.known_issues import registry as reg
from pytest_xla_dynamo.known_issues.exceptions import RegistryError, resolve_exception
from pytest_xla_dynamo.known_issues.registry import affects_versions, load_file, load_registry, parse_entry

ROOT = Path(__file__).resolve().parents[1]
REPRODUCERS = ROOT / "suites" / "test_known_issues.py"


def entry(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "local:x", "title": "t", "kind": "error", "raises": "ValueError"}
    base.update(kw)
    return base


# --- versions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("affects", "versions", "expected"), [
    ({}, {"torch_xla": "2.9.0"}, True),
    ({"torch_xla": ""}, {"torch_xla": "2.9.0"}, True),
    ({"torch_xla": ">=2.9"}, {"torch_xla": "2.9.0"}, True),
    ({"torch_xla": "<2.9.0"}, {"torch_xla": "2.9.0"}, False),
    ({"torch_xla": ">=1.13,<2.9.0"}, {"torch_xla": "2.8.1"}, True),
    ({"torch_xla": "<2.9.0"}, {"torch_xla": "2.9.0+cpu"}, False),  # local labels ignored
    ({"torch": "==2.9.0"}, {"torch": "2.9.0+cu128"}, True),
    ({"torch_xla": ">=2.9"}, {"torch_xla": "2.10.0.dev20251001"}, True),  # nightlies count
    ({"torch": ">=2.0", "torch_xla": "<2.0"}, {"torch": "2.9.0", "torch_xla": "2.9.0"}, False),  # all must hold
    ({"torch": ">=2.0", "torch_xla": ">=2.0"}, {"torch": "2.9.0", "torch_xla": "2.9.0"}, True),
    ({"torch_xla": ">=0"}, {"torch_xla": None}, False),  # not installed: not affected
])
def test_affects_versions(affects: dict[str, str], versions: dict[str, str | None], expected: bool) -> None:
    assert affects_versions(affects, versions) is expected


def test_installed_versions_come_from_metadata() -> None:
    from importlib import metadata

    installed = versions.installed_versions()
    assert installed == {"torch": metadata.version("torch"), "torch_xla": metadata.version("torch_xla")}
    assert reg.DISTRIBUTIONS == tuple(installed)


def test_affected_defaults_to_the_installed_versions() -> None:
    installed = versions.installed_versions()
    xla = versions.public_version(installed["torch_xla"] or "0")
    assert parse_entry(entry(affects={"torch_xla": f"=={xla}"}), source="s").affected()
    assert not parse_entry(entry(affects={"torch_xla": f"<{xla}"}), source="s").affected()
    # a distribution outside the mapping given is looked up as installed
    assert not affects_versions({"no-such-distribution-xyz": ">=0"}, {})


# --- entries ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "message"), [
    (entry(colour="red"), "unknown field(s) colour"),
    ({"title": "no id", "kind": "error", "raises": "ValueError"}, "'id' is required"),
    (entry(kind="flaky"), "kind='flaky' is invalid; valid: crash, wrong_result, error, cpu_fallback, graph_break"),
    (entry(raises=""), "'raises' is required for kind 'error'"),
    (entry(kind="crash"), "a crash has no exception"),
    (entry(affects={"torch_xla": "two point nine"}), "is not a version specifier"),
    (entry(affects=">=2.9"), "'affects' must be a table"),
    (entry(match="(unclosed"), "is not a regex"),
    (entry(raises="NoSuchError"), "is not a builtin exception"),
    (entry(raises="torch..exc"), "is not a dotted path"),
    (entry(kind="crash", raises="", signal="ABRT"), "is not a signal name"),
    (entry(tests="test_a"), None),  # a single name is accepted as a list
    (entry(tests=[1]), "must be a list of strings"),
    (entry(tiers=["small", "huge"]), "tiers=['small', 'huge']: 'huge' is not a tier; valid: small, full"),
])
def test_parse_entry_validates(data: dict[str, Any], message: str | None) -> None:
    if message is None:
        assert parse_entry(data, source="s").tests == ("test_a",)
        return
    with pytest.raises(RegistryError, match=re.escape(message)):
        parse_entry(data, source="here.toml")


def test_affects_error_shows_the_toml_syntax() -> None:
    with pytest.raises(RegistryError) as info:
        parse_entry(entry(affects=">=2.9"), source="here.toml")
    assert str(info.value) == ("here.toml: known issue 'local:x': 'affects' must be a table of version "
                               'specifiers, e.g. { torch_xla = ">=2.9" }')


def test_resolve_exception() -> None:
    import json

    assert resolve_exception("RuntimeError") is RuntimeError
    assert resolve_exception("json.JSONDecodeError") is json.JSONDecodeError
    found = resolve_exception("pytest_xla_dynamo.known_issues.exceptions.RegistryError")
    assert found is RegistryError
    assert resolve_exception("not_an_installed_package_xyz.Error") is None
    with pytest.raises(RegistryError, match="is not an exception class"):
        resolve_exception("json.dumps")
    with pytest.raises(RegistryError, match="the module json has no NoSuchThing"):  # was "cannot import it":
        resolve_exception("json.NoSuchThing")  # nothing is imported any more; json is, so the name is looked up there


def test_applies_to_names_and_parameters() -> None:
    issue = parse_entry(entry(reproducer="test_r", tests=["test_parity"], models=["vgg16"],
                              backends=["trace_once"], modes=["train"]), source="s")
    assert issue.applies_to("test_r", {}, [])  # no such parameters: the filters do not exclude it
    assert issue.applies_to("test_parity", {"xla_model": "vgg16", "xla_backend": "trace_once"}, ["train"])
    assert not issue.applies_to("test_parity", {"xla_model": "alexnet", "xla_backend": "trace_once"}, ["train"])
    assert not issue.applies_to("test_parity", {"xla_model": "vgg16", "xla_backend": "eager"}, ["train"])
    assert not issue.applies_to("test_parity", {"xla_model": "vgg16"}, ["infer"])
    assert not issue.applies_to("test_other", {}, [])
    assert issue.applies_to("test_other", {}, [], by_marker=True)
    # a zoo entry (models) is not a user's test of the same name without a model parameter
    assert not issue.applies_to("test_parity", {"xla_backend": "trace_once"}, ["train"])
    assert issue.applies_to("test_parity", {}, [], by_marker=True)


def test_applies_to_tiers() -> None:
    """An entry with ``tiers`` holds at those tiers only; without, at any; a call without a tier is not filtered."""
    small = parse_entry(entry(tests=["test_parity"], tiers=["small"]), source="s")
    anywhere = parse_entry(entry(tests=["test_parity"]), source="s")
    assert small.applies_to("test_parity", {}, [], tier="small")
    assert not small.applies_to("test_parity", {}, [], tier="full")
    assert small.applies_to("test_parity", {}, [])
    assert anywhere.applies_to("test_parity", {}, [], tier="full")


def test_applies_to_cpus() -> None:
    """An entry with ``cpus`` holds on the CPU models its globs match only (this machine's by default); without,
    on any; the table names them beside the reproducer."""
    from pytest_xla_dynamo.known_issues.table import row

    amd = parse_entry(entry(tests=["test_parity"], cpus=["AMD EPYC*"]), source="s")
    assert amd.cpus == ("AMD EPYC*",)
    assert amd.applies_to("test_parity", {}, [], cpu="AMD EPYC 7B13")
    assert not amd.applies_to("test_parity", {}, [], cpu="Intel(R) Xeon(R) Processor")
    here = versions.cpu_description()["model"]
    assert amd.applies_to("test_parity", {}, []) == here.startswith("AMD EPYC")
    assert parse_entry(entry(tests=["test_parity"]), source="s").applies_to("test_parity", {}, [], cpu="any")
    assert "(CPUs AMD EPYC* only)" in row(amd, {})[3]
    with pytest.raises(RegistryError, match="'cpus' must be a list of strings"):
        parse_entry(entry(cpus=[1]), source="s")


# --- files and the registry ---------------------------------------------------------------------


def test_load_file_lines_and_suggestions(tmp_path: Path) -> None:
    from pytest_xla_dynamo.known_issues.judge import suggestion

    path = tmp_path / "reg.toml"
    path.write_text("""
[[issue]]
id = "local:inline"
title = "inline affects"
kind = "error"
raises = "ValueError"
affects = { torch = ">=2.0", torch_xla = ">=1.13" }

[[issue]]
id = "local:table"
title = "table affects"
kind = "error"
raises = "ValueError"

[issue.affects]
torch_xla = ">=2.1"

[[issue]]
id = "local:none"
kind = "wrong_result"
raises = "AssertionError"
""")
    inline, table, none = load_file(path)
    assert (inline.line, inline.affects_line) == (3, 7)
    assert (table.line, table.affects_line) == (10, 15)
    assert (none.line, none.affects_line) == (19, None)
    assert none.title == "local:none" and none.affects == {} and none.affected()
    versions = {"torch": "2.9.0", "torch_xla": "2.9.0+cpu"}
    assert suggestion(inline, versions) == (
        f'{path}:7: entry \'local:inline\': replace that line by `affects = {{ torch = ">=2.0", '
        'torch_xla = ">=1.13,<2.9.0" }` (installed torch_xla 2.9.0+cpu no longer reproduces it; '
        "if torch brought the fix, bound affects.torch instead)")
    assert suggestion(table, versions).startswith(
        f"{path}:15: entry 'local:table': in its [issue.affects] table set `torch_xla = \">=2.1,<2.9.0\"`")
    assert suggestion(none, versions).startswith(
        f"{path}:19: entry 'local:none': add the line `affects = {{ torch_xla = \"<2.9.0\" }}`")
    only_torch = parse_entry(entry(affects={"torch": ">=2.0"}), source="pytest_xla_known_issues hook")
    assert suggestion(only_torch, versions) == (
        "entry 'local:x' from pytest_xla_known_issues hook: set `affects = { torch = \">=2.0,<2.9.0\" }` "
        "(installed torch 2.9.0 no longer reproduces it)")


def test_load_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[issue]\n")
    with pytest.raises(RegistryError, match="invalid TOML"):
        load_file(bad)
    bad.write_text("[meta]\nx = 1\n")
    with pytest.raises(RegistryError, match=r"unknown top-level key\(s\) meta"):
        load_file(bad)
    with pytest.raises(RegistryError, match=r"missing\.toml: no such file"):  # was "cannot read it": now says why
        load_file(tmp_path / "missing.toml")


def test_load_registry_sources_in_order(tmp_path: Path) -> None:
    """packaged < files < hook entries; a later source replaces an entry of the same id in place."""
    packaged = load_registry()
    first = next(iter(packaged))
    path = tmp_path / "more.toml"
    path.write_text(f'[[issue]]\nid = "{first.id}"\ntitle = "from a file"\nkind = "error"\nraises = "KeyError"\n'
                    '\n[[issue]]\nid = "local:file-only"\nkind = "error"\nraises = "KeyError"\n')
    registry = load_registry([path], [{"id": "local:file-only", "title": "from the hook", "kind": "error",
                                       "raises": "TypeError"}])
    assert len(registry) == len(packaged) + 1
    assert next(iter(registry)).title == "from a file"  # replaced where it was
    hooked = registry.get("local:file-only")
    assert hooked is not None and hooked.title == "from the hook" and hooked.source == reg.HOOK_SOURCE
    assert [e.id for e in registry.for_test(first.reproducer)] == []  # the file's entry has no reproducer
    assert len(load_registry(builtin=False)) == 0
    with pytest.raises(RegistryError, match="pytest_xla_known_issues hook: an entry must be a dict, got 3"):
        load_registry(hook_entries=[3])


def test_hook_entries() -> None:
    one = {"id": "local:a", "kind": "error", "raises": "KeyError"}
    assert reg.hook_entries([None, [one], (one, one), []]) == [one, one, one]
    for bad in (one, "local:a", 3):
        with pytest.raises(RegistryError, match=re.escape(
                f"pytest_xla_known_issues hook: return a list of entries (dicts), got {bad!r}")):
            reg.hook_entries([bad])


# --- the packaged registry and its reproducers --------------------------------------------------


def _reproducer_names() -> list[str]:
    tree = ast.parse(REPRODUCERS.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def test_every_entry_has_one_reproducer_and_every_reproducer_one_entry() -> None:
    registry = load_registry()
    names = _reproducer_names()
    assert len(names) == len(set(names))
    with_reproducer = [e for e in registry if e.reproducer]
    by_reproducer = {e.reproducer: e.id for e in with_reproducer}
    assert len(by_reproducer) == len(with_reproducer), "two entries share a reproducer"
    assert sorted(by_reproducer) == sorted(names)
    # an entry without a reproducer targets suite cases, and names the entry whose reproducer shows it
    for entry in registry:
        if not entry.reproducer:
            assert entry.tests, entry.id
            assert any(other.id in entry.title or other.id in entry.notes for other in with_reproducer), entry.id


def test_packaged_entries_link_upstream() -> None:
    for issue in load_registry():
        assert issue.status, f"{issue.id}: record its state on the tested versions in 'status'"
        match = re.fullmatch(r"([\w-]+)/([\w-]+)#(\d+)", issue.id)
        if match:
            owner, repo, number = match.groups()
            assert re.fullmatch(rf"https://github\.com/{owner}/{repo}/(issues|pull)/{number}", issue.url), issue.id
        else:
            assert issue.id.startswith("local:"), issue.id
            assert issue.url or issue.notes, f"{issue.id}: say why there is no upstream link"


def test_packaged_registry_is_package_data() -> None:
    """The TOML sits in the subpackage, and pyproject.toml ships it."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    assert reg.BUILTIN_FILE.parent == Path(reg.__file__).parent and reg.BUILTIN_FILE.is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    assert "pytest_xla_dynamo.known_issues" in setuptools["packages"]
    assert reg.BUILTIN_FILE.name in setuptools["package-data"]["pytest_xla_dynamo.known_issues"] or \
        "*.toml" in setuptools["package-data"]["pytest_xla_dynamo.known_issues"]
    assert "tomli>=2; python_version<'3.11'" in project["project"]["dependencies"]


def test_running_var_entries_match_buffer_names_with_hyphens() -> None:
    """torchvision's regnet names its blocks ``block1-0``: the suite-case entries whose match names a running_var
    buffer accept every character a module path can hold (a ``[\\w.]*`` pattern made regnet fail "wrong message")."""
    message = "fail_accuracy: step 1, buffer trunk_output.block1.block1-0.proj.1.running_var: max abs err 2.1e-04"
    entries = [e for e in load_registry() if "running_var: " in e.match]
    assert len(entries) >= 3
    for entry in entries:
        assert re.search(entry.match, message), entry.id
