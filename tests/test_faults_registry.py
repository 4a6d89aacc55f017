"""Fault injection for the known-issue registry files of issue 28: every bad entry a usage error (exit 4) naming
the file and line; ``raises=`` matched by name at judge time, never imported, never widened to any exception.

* Loading (in process): an id twice in a file or in two ``--xla-known-issues-file`` files, ``affects`` naming a
  distribution that does not exist, ``modes`` and ``signal`` names, an ``[[issue]]`` that is not a table.
* ``raises`` (in process): matched by the class path of the exception's MRO, or a class an imported module
  re-exports; a module it names is never imported (an ``evilmod.py`` on ``sys.path`` does not run).
* Sessions (one interpreter for the bad files, one pytester session for the judge): the errors at start-up
  with ``backends``/``models`` checked against the session's names; a strict xfail whose dotted ``raises`` names
  a module that is not installed fails as "wrong exception" (it accepted any exception), an ``evilmod.py`` beside
  the tests never runs, and the right dotted class (its own path, or a re-export) is an xfail.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sample_data import run_sessions

from pytest_xla_dynamo.known_issues.exceptions import class_paths, exception_matches, resolve_exception
from pytest_xla_dynamo.known_issues.registry import RegistryError, load_file, load_registry, unknown_names

pytest_plugins = ["pytester"]


def _entry(issue_id: str, **fields: str) -> str:
    body = {"kind": "error", "raises": "KeyError", **fields}
    return f'[[issue]]\nid = "{issue_id}"\n' + "".join(f"{k} = {v}\n" if v.startswith(("[", "{")) else
                                                    f'{k} = "{v}"\n' for k, v in body.items()) + "\n"


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    """One id twice in a file (the second silently replaced the first) or in two files (which one held depended
    on the order of the options): an error naming both places. Replacing a packaged entry stays a feature."""
    one = tmp_path / "one.toml"
    one.write_text(_entry("local:a") + _entry("local:b") + _entry("local:a", raises="ValueError"))
    with pytest.raises(RegistryError) as err:
        load_file(one)
    assert str(err.value) == (f"{one}:12: known issue 'local:a' is defined twice in this file (first at line 2); "
                              "each id once")
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    first.write_text(_entry("local:x"))
    second.write_text(_entry("local:y") + _entry("local:x"))
    with pytest.raises(RegistryError) as err:
        load_registry([first, second])
    assert str(err.value).startswith(f"{second}:7: known issue 'local:x' is also defined in {first}:2; ")
    packaged = next(iter(load_registry()))
    first.write_text(_entry(packaged.id, title="mine"))
    replaced = load_registry([first]).get(packaged.id)
    assert replaced is not None and replaced.title == "mine"


@pytest.mark.parametrize(("fields", "message"), [
    ({"affects": '{ nosuchdist = ">=1" }'},
     "affects.nosuchdist: not a known distribution (an entry for it would never apply); valid: torch, torch_xla, "
     "torchvision, timm, transformers, or an installed distribution"),
    ({"modes": '["eval"]'}, "modes=['eval']: 'eval' is not a mode; valid: train, infer"),
    ({"kind": "crash", "raises": "", "signal": "SIGFOO"}, "signal='SIGFOO' is not a signal name; valid: SIGABRT, "),
    ({"raises": "evil mod.Boom"}, "raises='evil mod.Boom' is not a dotted path to an exception class"),
    ({"tiers": '["huge"]'}, "tiers=['huge']: 'huge' is not a tier; valid: small, full"),
])
def test_entry_fields_are_validated(tmp_path: Path, fields: dict[str, str], message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("# a comment\n" + _entry("local:bad", **fields))
    with pytest.raises(RegistryError) as err:
        load_file(path)
    assert str(err.value).startswith(f"{path}:3: known issue 'local:bad': {message}"), str(err.value)


def test_known_distributions_in_any_spelling(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(_entry("local:a", affects='{ torch-xla = ">=2", pytest = ">=7", transformers = ">=5" }'))
    assert load_file(path)[0].affects == {"torch-xla": ">=2", "pytest": ">=7", "transformers": ">=5"}
    path.write_text("[[issue]]\nid = 'local:a'\nkind = \n")
    with pytest.raises(RegistryError, match=r"ok\.toml: invalid TOML: .*\(at line 3"):
        load_file(path)
    path.write_text("issue = [1, 2]\n")
    with pytest.raises(RegistryError, match=r"ok\.toml: \[\[issue\]\] number 1 is not a table: 1"):
        load_file(path)


def test_backends_and_models_against_the_sessions_names(tmp_path: Path) -> None:
    path = tmp_path / "names.toml"
    path.write_text(_entry("local:a", backends='["trace_onse"]', models='["resnet19", "resnet18"]'))
    errors = unknown_names(load_file(path), ["trace_once", "eager"], ["resnet18", "resnet50"])
    assert errors == [f"{path}:2: known issue 'local:a': backends: unknown 'trace_onse' (did you mean 'trace_once'?)",
                      f"{path}:2: known issue 'local:a': models: unknown 'resnet19' (did you mean 'resnet18', "
                      "'resnet50'?)"]
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import default_registry

    backends = default_registry()
    assert unknown_names(load_registry(), [*backends.names(), *backends.aliases], zoo.model_names()) == []


def test_raises_is_matched_by_name_without_importing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``raises`` matches the exception's class path (its MRO), or a class an imported module names (a re-export);
    a module it names is never imported: an ``evilmod.py`` on the path does not run, and an exception is not
    widened to "any exception" when the module is missing."""
    (tmp_path / "evilmod.py").write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').close()\nclass Boom(Exception): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not exception_matches("evilmod.Boom", ValueError("x"))
    assert resolve_exception("evilmod.Boom") is None
    assert "evilmod" not in sys.modules and not (tmp_path / "RAN").exists()
    assert not exception_matches("not_installed_pkg.Error", RuntimeError("x"))  # was: any exception

    class Local(KeyError):
        pass

    error = Local("k")
    assert class_paths(error)[:2] == [f"{__name__}.test_raises_is_matched_by_name_without_importing.<locals>.Local",
                                      "KeyError"]
    assert exception_matches("KeyError", error) and exception_matches("LookupError", error)
    assert not exception_matches("ValueError", error)
    assert exception_matches("json.JSONDecodeError", json.JSONDecodeError("m", "d", 0))  # re-exported by json
    assert exception_matches("json.decoder.JSONDecodeError", json.JSONDecodeError("m", "d", 0))  # its own path
    assert not exception_matches("json.dumps", ValueError("x"))  # not a class: no match, no error at judge time


# --- sessions ------------------------------------------------------------------------------------------------

PLAIN = """
def test_plain():
    print("RAN")
"""

#: (file name, TOML, what the error says); each a session of its own (--xla-known-issues-file=NAME)
BAD_FILES: list[tuple[str, str, str]] = [
    ("twice.toml", _entry("local:a") + _entry("local:a"),
     "known issues: twice.toml:7: known issue 'local:a' is defined twice in this file (first at line 2)"),
    ("dist.toml", _entry("local:a", affects='{ nosuchdist = ">=1" }'),
     "known issues: dist.toml:2: known issue 'local:a': affects.nosuchdist: not a known distribution"),
    ("signal.toml", _entry("local:a", kind="crash", raises="", signal="SIGFOO"),
     "known issues: signal.toml:2: known issue 'local:a': signal='SIGFOO' is not a signal name; valid: SIGABRT"),
    ("modes.toml", _entry("local:a", modes='["eval"]'),
     "known issues: modes.toml:2: known issue 'local:a': modes=['eval']: 'eval' is not a mode; valid: train, infer"),
    ("backends.toml", _entry("local:a", backends='["trace_onse"]'),
     "known issues: filters that name no backend or model of this session:\nbackends.toml:2: known issue 'local:a': "
     "backends: unknown 'trace_onse' (did you mean 'trace_once'"),
    ("models.toml", _entry("local:a", models='["resnet19"]'),
     "models.toml:2: known issue 'local:a': models: unknown 'resnet19' (did you mean 'resnet18', 'resnet50'"),
]


def test_bad_registry_files_in_sessions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN)
    for name, text, _ in BAD_FILES:
        (pytester.path / name).write_text(text)
    (pytester.path / "a.toml").write_text(_entry("local:dup"))
    (pytester.path / "b.toml").write_text(_entry("local:dup"))
    cases = [{"args": [f"--xla-known-issues-file={name}"], "env": {}} for name, _, _ in BAD_FILES]
    cases.append({"args": ["--xla-known-issues-file=a.toml,b.toml"], "env": {}})
    results = run_sessions(pytester.path, cases)
    messages = [m for _, _, m in BAD_FILES] + ["known issues: b.toml:2: known issue 'local:dup' is also defined in "
                                               "a.toml:2"]
    for message, result in zip(messages, results, strict=True):
        output = result["out"] + result["err"]
        assert result["ret"] == pytest.ExitCode.USAGE_ERROR, (message, output[-2000:])
        assert message in result["err"], (message, output[-2000:])
        assert "RAN" not in result["out"]
        assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]


JUDGED_TESTS = """
import json

import pytest


class Mine(Exception):
    pass


def test_missing_module():
    raise RuntimeError("the recorded message")


def test_evil_module():
    raise ValueError("the recorded message")


def test_own_path():
    raise Mine("the recorded message")


def test_reexport():
    json.loads("{")


@pytest.mark.xla_known_issue("local:marker-missing", raises="no_such_pkg.Error", match="recorded", torch_xla=">=0.1")
def test_marker_missing_module():
    raise RuntimeError("the recorded message")
"""

JUDGED_REGISTRY = """
[[issue]]
id = "local:missing-module"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "no_such_pkg.errors.Error"
match = "recorded"
reproducer = "test_missing_module"

[[issue]]
id = "local:evil-module"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "evilmod.Boom"
match = "recorded"
reproducer = "test_evil_module"

[[issue]]
id = "local:own-path"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "test_judged.Mine"
match = "recorded"
reproducer = "test_own_path"

[[issue]]
id = "local:reexport"
kind = "error"
affects = { torch_xla = ">=0.1" }
raises = "json.JSONDecodeError"
reproducer = "test_reexport"
"""


def test_dotted_raises_judged_by_name_in_a_session(pytester: pytest.Pytester) -> None:
    """A dotted ``raises`` whose module is not installed was dropped from the xfail, which then accepted any
    exception; an ``evilmod`` named by the file was imported at collection and ran. Now: "wrong exception"
    failures, the module never runs, and the right class is an xfail."""
    pytester.makepyfile(test_judged=JUDGED_TESTS)
    pytester.makefile(".toml", registry=JUDGED_REGISTRY)
    pytester.makepyfile(evilmod="open('EVIL-RAN', 'w').close()\nclass Boom(Exception): pass\n")
    result = pytester.runpytest_subprocess("--xla-known-issues-file=registry.toml", "-rA", "-p", "no:randomly",
                                           "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert not (pytester.path / "EVIL-RAN").exists()  # the file named a module: it never ran
    result.assert_outcomes(failed=3, xfailed=2)
    result.stdout.re_match_lines([
        r"XFAIL test_judged.py::test_own_path - local:own-path.*",
        r"XFAIL test_judged.py::test_reexport - local:reexport.*",
        r"FAILED test_judged.py::test_missing_module - \[known issue local:missing-mod.*",  # (cut to the terminal)
        r"FAILED test_judged.py::test_evil_module - \[known issue local:evil-module: wro.*",
        r"FAILED test_judged.py::test_marker_missing_module - \[known issue local:marker.*",
    ], consecutive=False)
    assert ("[wrong exception] expected no_such_pkg.errors.Error matching 'recorded', got RuntimeError: the recorded "
            "message") in out
    assert "[wrong exception] expected evilmod.Boom matching 'recorded', got ValueError: the recorded message" in out
    assert ("[wrong exception] expected no_such_pkg.Error matching 'recorded', got RuntimeError: the recorded "
            "message") in out  # a marker's entry: the same
    assert "Traceback" not in result.stderr.str() and "INTERNALERROR" not in out
