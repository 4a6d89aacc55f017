"""Tests of pytest_xla_dynamo.known_issues.plugin in pytester sessions: strict xfails, regression tests,
downstream entries (file, hook, marker), policies, usage errors and the summary (with and without xdist).
The scenario tests are small pure-Python programs: the plugin is under test.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]


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
    # the entry's line is named now (bad.toml:2, its id), as every registry error names where it is
    result.stderr.fnmatch_lines(["*known issues: *bad.toml:2: known issue 'local:bad': kind='flaky' is invalid; "
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


def test_an_entry_holds_at_its_tiers_only(pytester: pytest.Pytester) -> None:
    """``tiers = ["full"]``: a strict xfail under ``--xla-tier=full``; at the small tier the failure is not it."""
    pytester.makefile(".toml", registry="""
[[issue]]
id = "local:full-only"
title = "measured at the full tier"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "ValueError"
reproducer = "test_full_only"
tiers = ["full"]
""")
    pytester.makepyfile(test_t="def test_full_only():\n    raise ValueError('at every tier')\n")
    full = pytester.runpytest_subprocess("--xla-known-issues-file=registry.toml", "--xla-tier=full", "-rA")
    full.assert_outcomes(xfailed=1)
    small = pytester.runpytest_subprocess("--xla-known-issues-file=registry.toml", "--xla-tier=small", "-rA")
    small.assert_outcomes(failed=1)
    assert "local:full-only" not in small.stdout.str()
