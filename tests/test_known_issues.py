"""Tests of pytest_xla_dynamo.known_issues: the registry (pure logic, in process), and the plugin's
strict xfails, regression tests, downstream entries, policies and summary (pytester subprocesses,
with and without xdist). The scenario tests are small pure-Python programs: the plugin is under test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo import known_issues as ki
from pytest_xla_dynamo.known_issues import KnownIssue, RegistryError, affects_versions, parse_entry

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
REPRODUCERS = ROOT / "suites" / "test_known_issues.py"


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

    versions = ki.installed_versions()
    assert versions == {"torch": metadata.version("torch"), "torch_xla": metadata.version("torch_xla")}


# --- entries ------------------------------------------------------------------------------------


def entry(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "local:x", "title": "t", "kind": "error", "raises": "ValueError"}
    base.update(kw)
    return base


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
])
def test_parse_entry_validates(data: dict[str, Any], message: str | None) -> None:
    if message is None:
        assert parse_entry(data, source="s").tests == ("test_a",)
        return
    with pytest.raises(RegistryError, match=re.escape(message)):
        parse_entry(data, source="here.toml")


def test_resolve_exception() -> None:
    import json

    assert ki.resolve_exception("RuntimeError") is RuntimeError
    assert ki.resolve_exception("json.JSONDecodeError") is json.JSONDecodeError
    assert ki.resolve_exception("pytest_xla_dynamo.isolation.SubprocessError").__name__ == "SubprocessError"
    assert ki.resolve_exception("not_an_installed_package_xyz.Error") is None
    with pytest.raises(RegistryError, match="is not an exception class"):
        ki.resolve_exception("json.dumps")
    with pytest.raises(RegistryError, match="cannot import it"):
        ki.resolve_exception("json.NoSuchThing")


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


def test_load_file_lines_and_suggestions(tmp_path: Path) -> None:
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
    inline, table, none = ki.load_file(path)
    assert (inline.line, inline.affects_line) == (3, 7)
    assert (table.line, table.affects_line) == (10, 15)
    assert (none.line, none.affects_line) == (19, None)
    assert none.title == "local:none" and none.affects == {} and none.affected()
    versions = {"torch": "2.9.0", "torch_xla": "2.9.0+cpu"}
    assert ki.suggestion(inline, versions) == (
        f'{path}:7: entry \'local:inline\': replace that line by `affects = {{ torch = ">=2.0", '
        'torch_xla = ">=1.13,<2.9.0" }` (installed torch_xla 2.9.0+cpu no longer reproduces it; '
        "if torch brought the fix, bound affects.torch instead)")
    assert ki.suggestion(table, versions).startswith(
        f"{path}:15: entry 'local:table': in its [issue.affects] table set `torch_xla = \">=2.1,<2.9.0\"`")
    assert ki.suggestion(none, versions).startswith(
        f"{path}:19: entry 'local:none': add the line `affects = {{ torch_xla = \"<2.9.0\" }}`")
    only_torch = parse_entry(entry(affects={"torch": ">=2.0"}), source="pytest_xla_known_issues hook")
    assert ki.suggestion(only_torch, versions) == (
        "entry 'local:x' from pytest_xla_known_issues hook: set `affects = { torch = \">=2.0,<2.9.0\" }` "
        "(installed torch 2.9.0 no longer reproduces it)")


def test_load_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[issue]\n")
    with pytest.raises(RegistryError, match="invalid TOML"):
        ki.load_file(bad)
    bad.write_text("[meta]\nx = 1\n")
    with pytest.raises(RegistryError, match=r"unknown top-level key\(s\) meta"):
        ki.load_file(bad)


def test_summary_lines() -> None:
    info = {"id": "local:a", "title": "A", "url": "https://x/1", "kind": "error"}
    fixed = {"id": "local:b", "title": "B", "url": "", "kind": "cpu_fallback"}
    lines = ki.summary_lines({
        "reproduced": [("t.py::test_a[1]", info, []), ("t.py::test_a[2]", info, [])],
        "no_longer_reproduces": [("t.py::test_c", {**info, "id": "local:c"}, ["reg.toml:3: do this"])],
        "passed": [("t.py::test_b", fixed, [])],
    })
    assert lines[0] == "= xla known issues ="
    assert lines[1].startswith("3 known issue(s) in 4 test(s) with torch ")
    assert lines[2:] == [
        "still reproduce (strict xfail, as recorded): 1 issue(s), 2 test(s)",
        "  local:a (error): A <https://x/1> [2 tests]",
        "no longer reproduce (strict XPASS: update the registry): 1 issue(s), 1 test(s)",
        "  local:c (error): A <https://x/1>",
        "    t.py::test_c",
        "      -> reg.toml:3: do this",
        "fixed: pass as regression tests: 1 issue(s), 1 test(s)",
        "  local:b (cpu_fallback): B",
    ]


# --- the packaged registry and its reproducers --------------------------------------------------


def _reproducer_names() -> list[str]:
    tree = ast.parse(REPRODUCERS.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def test_every_entry_has_one_reproducer_and_every_reproducer_one_entry() -> None:
    registry = ki.load_registry()
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
    for issue in ki.load_registry():
        assert issue.status, f"{issue.id}: record its state on the tested versions in 'status'"
        match = re.fullmatch(r"([\w-]+)/([\w-]+)#(\d+)", issue.id)
        if match:
            owner, repo, number = match.groups()
            assert re.fullmatch(rf"https://github\.com/{owner}/{repo}/(issues|pull)/{number}", issue.url), issue.id
        else:
            assert issue.id.startswith("local:"), issue.id
            assert issue.url or issue.notes, f"{issue.id}: say why there is no upstream link"


# --- the plugin, in pytester sessions -----------------------------------------------------------

REGISTRY = """
[[issue]]
id = "local:expected"
title = "raises as recorded"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "ValueError"
match = 'boom \\d+'
reproducer = "test_expected"

[[issue]]
id = "local:wrong-type"
title = "recorded as ValueError"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "ValueError"
reproducer = "test_wrong_type"

[[issue]]
id = "local:wrong-message"
title = "recorded with another message"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "ValueError"
match = "^boom"
reproducer = "test_wrong_message"

[[issue]]
id = "local:fixed-now"
title = "recorded as affected, but it passes"
kind = "wrong_result"
affects = { torch_xla = ">=0.1" }
raises = "AssertionError"
reproducer = "test_fixed_now"

[[issue]]
id = "local:fixed-long-ago"
title = "fixed before the installed version"
kind = "cpu_fallback"
affects = { torch_xla = "<0.1" }
raises = "AssertionError"
reproducer = "test_fixed_long_ago"

[[issue]]
id = "local:came-back"
title = "fixed per the registry, but its test fails"
kind = "error"
affects = { torch_xla = "<0.1" }
raises = "AssertionError"
reproducer = "test_came_back"

[[issue]]
id = "local:eager-only"
title = "only the eager backend, only training"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "RuntimeError"
tests = ["test_backends", "test_inference"]
backends = ["eager"]
modes = ["train"]

[[issue]]
id = "local:by-marker"
title = "applied by the marker"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "KeyError"
"""

CONFTEST = """
def pytest_xla_known_issues():
    return [{"id": "local:from-hook", "title": "from the hook", "kind": "error", "raises": "TypeError",
             "affects": {"torch": ">=0.1"}, "reproducer": "test_from_hook"}]
"""

TESTS = """
import pytest

def test_expected():
    raise ValueError("boom 42")

def test_wrong_type():
    raise KeyError("not a ValueError")

def test_wrong_message():
    raise ValueError("another message")

def test_fixed_now():
    assert True

def test_fixed_long_ago():
    assert True

def test_came_back():
    assert 1 == 2, "it is back"

@pytest.mark.xla_mode("train")
@pytest.mark.xla_backend("eager", "inductor")
def test_backends(xla_backend):
    if xla_backend.name == "eager":
        raise RuntimeError("eager only")

@pytest.mark.xla_mode("infer")
def test_inference():
    raise RuntimeError("not matched: infer")

@pytest.mark.xla_known_issue("local:by-marker")
def test_by_marker():
    {}["missing"]

@pytest.mark.xla_known_issue("local:marker-kwargs", raises="ZeroDivisionError", match="division", torch_xla=">=0.1")
def test_marker_kwargs():
    1 / 0

@pytest.mark.xla_known_issue("local:marker-not-affected", raises="ZeroDivisionError", torch_xla="<0.1")
def test_marker_not_affected():
    pass

def test_from_hook():
    None + 1

def test_plain():
    pass
"""

# per test: its outcome with --xla-known-issues=xfail (default), run, skip
EXPECTED = {
    "test_expected": ("XFAIL", "FAILED", "SKIPPED"),
    "test_wrong_type": ("FAILED", "FAILED", "SKIPPED"),
    "test_wrong_message": ("FAILED", "FAILED", "SKIPPED"),
    "test_fixed_now": ("FAILED", "PASSED", "SKIPPED"),
    "test_fixed_long_ago": ("PASSED", "PASSED", "PASSED"),
    "test_came_back": ("FAILED", "FAILED", "FAILED"),
    "test_backends[eager]": ("XFAIL", "FAILED", "SKIPPED"),
    "test_backends[inductor]": ("PASSED", "PASSED", "PASSED"),
    "test_inference": ("FAILED", "FAILED", "FAILED"),
    "test_by_marker": ("XFAIL", "FAILED", "SKIPPED"),
    "test_marker_kwargs": ("XFAIL", "FAILED", "SKIPPED"),
    "test_marker_not_affected": ("PASSED", "PASSED", "PASSED"),
    "test_from_hook": ("XFAIL", "FAILED", "SKIPPED"),
    "test_plain": ("PASSED", "PASSED", "PASSED"),
}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "400")  # full short-summary lines
    pytester.makefile(".toml", registry=REGISTRY)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_demo=TESTS)
    return pytester


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """test name -> outcome, from the -v lines (with or without xdist) and the -rA summary."""
    seen: dict[str, set[str]] = {}
    for line in result.stdout.lines:
        word = re.search(r"\b(PASSED|FAILED|XFAIL|SKIPPED|ERROR|XPASS)\b", line)
        name = re.search(r"test_demo\.py::(\S+)", line)
        if word and name and not line.startswith(" "):
            seen.setdefault(name.group(1), set()).add(word.group(1))
    assert all(len(words) == 1 for words in seen.values()), seen
    return {name: words.pop() for name, words in seen.items()}


def _check(result: pytest.RunResult, column: int) -> None:
    got = _outcomes(result)
    want = {name: outcomes[column] for name, outcomes in EXPECTED.items()}
    assert got == want, result.stdout.str()


def _xfail_summary(result: pytest.RunResult) -> None:
    out = result.stdout.str()
    # a wrong type, a wrong message: failures that say so
    assert "[known issue local:wrong-type: wrong exception] KeyError: 'not a ValueError'" in out
    assert "[wrong exception] expected ValueError, got KeyError: 'not a ValueError'" in out
    assert "[known issue local:wrong-message: wrong message] ValueError: another message" in out
    assert "[wrong message] expected ValueError matching '^boom', got ValueError with another message" in out
    # a strict XPASS names the registry line to change
    assert "[XPASS(strict)] local:fixed-now: recorded as affected, but it passes" in out
    lines = REGISTRY.strip().splitlines()  # pytester strips the file's leading blank line
    fixed_now = lines.index('id = "local:fixed-now"')
    affects_line = next(i for i in range(fixed_now, len(lines)) if lines[i].startswith("affects")) + 1
    result.stdout.re_match_lines([
        r"=+ xla known issues =+",
        r"11 known issue\(s\) in 11 test\(s\) with torch .*, torch_xla .*",
        r"still reproduce \(strict xfail, as recorded\): 5 issue\(s\), 5 test\(s\)",
        r"  local:by-marker \(error\): applied by the marker",
        r"  local:eager-only \(error\): only the eager backend, only training",
        r"  local:expected \(error\): raises as recorded",
        r"  local:from-hook \(error\): from the hook",
        r"  local:marker-kwargs \(error\): local:marker-kwargs",
        r"no longer reproduce \(strict XPASS: update the registry\): 1 issue\(s\), 1 test\(s\)",
        r"  local:fixed-now \(wrong_result\): recorded as affected, but it passes",
        r"    test_demo.py::test_fixed_now",
        rf"      -> .*registry.toml:{affects_line}: entry 'local:fixed-now': replace that line by "
        r"`affects = \{ torch_xla = \">=0.1,<\d+\.\d+\.\d+\" \}` \(installed torch_xla .*",
        r"fail another way than recorded \(failures\): 2 issue\(s\), 2 test\(s\)",
        r"  local:wrong-message \(error\): recorded with another message",
        r"    test_demo.py::test_wrong_message",
        r"  local:wrong-type \(error\): recorded as ValueError",
        r"    test_demo.py::test_wrong_type",
        r"fixed per the registry, but their tests fail \(regressions\): 1 issue\(s\), 1 test\(s\)",
        r"  local:came-back \(error\): fixed per the registry, but its test fails",
        r"    test_demo.py::test_came_back",
        r"fixed: pass as regression tests: 2 issue\(s\), 2 test\(s\)",
        r"  local:fixed-long-ago \(cpu_fallback\): fixed before the installed version",
        r"  local:marker-not-affected \(error\): local:marker-not-affected",
    ])
    assert result.stdout.str().count(" xla known issues ") == 1


def test_strict_xfails_regressions_and_summary(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--xla-known-issues-file=registry.toml", "-rA", "-v",
                                          "-p", "no:randomly")
    _check(result, 0)
    _xfail_summary(result)
    assert "registry ignored" not in result.stdout.str()
    assert result.ret == 1


def test_summary_under_xdist(project: pytest.Pytester) -> None:
    """Under ``-n 2`` the controller gets the outcomes from the workers' reports."""
    result = project.runpytest_subprocess("--xla-known-issues-file=registry.toml", "-rA", "-v", "-n", "2",
                                          "-p", "no:randomly")
    _check(result, 0)
    _xfail_summary(result)


@pytest.mark.parametrize(("policy", "column"), [("run", 1), ("skip", 2)])
def test_policies(project: pytest.Pytester, policy: str, column: int) -> None:
    project.makeini(f"[pytest]\nxla_known_issues_file = registry.toml\nxla_known_issues = {policy}\n")
    result = project.runpytest_subprocess("-rA", "-v", "-p", "no:randomly")
    _check(result, column)
    out = result.stdout.str()
    assert "XFAIL" not in out and "XPASS" not in out
    if policy == "run":
        result.stdout.re_match_lines([r"registry ignored \(--xla-known-issues=run\): fail: 8 issue\(s\), 8 test\(s\)",
                                      r"registry ignored \(--xla-known-issues=run\): pass: 3 issue\(s\), 3 test\(s\)"],
                                     consecutive=False)
    else:
        result.stdout.re_match_lines([r"skipped \(--xla-known-issues=skip\): 8 issue\(s\), 8 test\(s\)",
                                      r"SKIPPED \[1\] test_demo.py(:\d+)?: known issue local:expected: raises as "
                                      r"recorded \(--xla-known-issues=skip\)"],
                                     consecutive=False)


def test_registry_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bad="[[issue]]\nid = 'local:bad'\nkind = 'flaky'\n")
    result = pytester.runpytest_subprocess("--xla-known-issues-file=bad.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*known issues: *bad.toml: known issue 'local:bad': kind='flaky' is invalid; "
                                 "valid: crash, wrong_result, error, cpu_fallback, graph_break*"])
    pytester.makepyfile(test_m="""
import pytest

@pytest.mark.xla_known_issue("local:unknown")
def test_a():
    pass

@pytest.mark.xla_known_issue("local:y", raises="ValueError", colour="red")
def test_b():
    pass
""")
    result = pytester.runpytest_subprocess("test_m.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*test_m.py::test_a: known issue 'local:unknown' is not in the registry: give its fields as keyword "
        "arguments*",
        "*test_m.py::test_b: @pytest.mark.xla_known_issue('local:y'): unknown keyword argument(s) colour; valid:*",
    ])


def test_marker_entry_merges_over_the_registry() -> None:
    registry = ki.Registry([parse_entry(entry(id="local:base", match="m", affects={"torch_xla": ">=2"}),
                                        source="r.toml", line=3)])
    merged = ki.marker_entry(registry, pytest.mark.xla_known_issue("local:base", torch_xla="<1").mark, "t")
    assert merged.affects == {"torch_xla": "<1"} and merged.match == "m" and merged.source == "marker"
    filtered = ki.marker_entry(registry, pytest.mark.xla_known_issue("local:base", models=["m1"]).mark, "t")
    assert filtered.models == ("m1",) and filtered.source == "r.toml" and filtered.line == 3
    assert isinstance(filtered, KnownIssue)
