"""Fault injection for the options and markers of issue 28: exit 4 at start-up with the valid range, a "did you
mean" and a wrapped list for a bad model name, markers' keyword arguments and two modes reported as such.

Unit tests of ``config.resolve`` and ``markers.validate_item`` in process; one subprocess runs the sessions of
the option cases in turn (``sample_data.run_sessions``), one session checks the markers (collection errors are
gathered into one usage error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from sample_data import run_sessions

from pytest_xla_dynamo import config as cfg
from pytest_xla_dynamo import markers
from pytest_xla_dynamo.timing import settings as timing_settings

pytest_plugins = ["pytester"]

MODELS = ["resnet18", "resnet50", "resnext50_32x4d", "alexnet", *[f"timm.model_{i:02d}" for i in range(40)]]


class Args:
    """What :func:`config.resolve` asks of a ``pytest.Config``: command-line and ini values."""

    def __init__(self, cli: Mapping[str, Any] | None = None) -> None:
        self.cli = dict(cli or {})

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.cli.get(name, default)

    def getini(self, name: str) -> Any:
        return None


def _error(cli: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str:
    with pytest.raises(pytest.UsageError) as info:
        cfg.resolve(Args(cli), backends=["trace_once", "eager"], backend_aliases={}, models=MODELS,  # type: ignore[arg-type]
                    patches=[], environ=dict(env or {}))
        timing_settings.resolve(Args(cli), backends=["trace_once", "eager"], backend_aliases={},  # type: ignore[arg-type]
                                environ=dict(env or {}))
    return str(info.value)


def test_empty_models_is_an_error_like_empty_zoo() -> None:
    """``--xla-models=`` (a CI ``--xla-models=$ONLY`` with ``ONLY`` unset) ran every model; now it is refused as
    ``--xla-zoo=`` is. Unset, the ``--xla-zoo`` models; ``all`` too."""
    assert _error({"xla_models": ""}) == ("--xla-models: invalid value ''; valid: model names (comma list), or all; "
                                          "leave the option out for the --xla-zoo models")
    assert _error({"xla_models": " , "}).startswith("--xla-models: invalid value ' , '")
    assert _error({}, {"PYTEST_XLA_MODELS": ""}).startswith("--xla-models (env PYTEST_XLA_MODELS): invalid value ''")
    assert _error({"xla_zoo": ""}).startswith("--xla-zoo: invalid value ''")
    ok = cfg.resolve(Args({"xla_models": "all"}), backends=["trace_once"], backend_aliases={},  # type: ignore[arg-type]
                     models=MODELS, patches=[], environ={})
    assert ok.models == tuple(MODELS)


def test_shard_and_threads_ranges() -> None:
    """``--xla-shard=1/1000000000`` ended in ``INTERNALERROR> MemoryError``; ``xla_threads=1e20`` passed start-up
    and failed in the timing test. Both refused at start-up with the valid range."""
    shard = "I/N with integers 1 <= I <= N <= 1000, e.g. 1/4"
    assert _error({"xla_shard": "1/1000000000"}) == f"--xla-shard: invalid value '1/1000000000'; valid: {shard}"
    assert _error({"xla_shard": "1001/1001"}) == f"--xla-shard: invalid value '1001/1001'; valid: {shard}"
    threads = "an integer 1..4096, or auto"
    assert _error({}, env={"PYTEST_XLA_THREADS": "100000000000000000000"}) == (
        f"xla_threads (env PYTEST_XLA_THREADS): invalid value '100000000000000000000'; valid: {threads}")
    ok = cfg.resolve(Args({"xla_shard": "1000/1000"}), backends=["trace_once"],  # type: ignore[arg-type]
                     backend_aliases={}, models=MODELS, patches=[], environ={})
    timing = timing_settings.resolve(Args({}), backends=["trace_once"],  # type: ignore[arg-type]
                                     backend_aliases={}, environ={"PYTEST_XLA_THREADS": "4096"})
    assert ok.shard == (1000, 1000) and timing.threads == 4096


def test_bad_model_name_says_the_closest_and_wraps_the_list() -> None:
    """A bad model name: the closest names, then the valid ones on lines of at most 100 characters (was one line of
    all 73 names, 1,600 characters, no hint)."""
    message = _error({"xla_models": "resnet19,timm.model_4"})
    head, _, listed = message.partition("; valid:")
    assert head.startswith("--xla-models: invalid value 'resnet19,timm.model_4' (did you mean 'resnet18', "
                           "'resnet50', 'timm.model_") and head.endswith("'?)")  # up to 3 closest per name
    lines = listed.splitlines()
    assert lines[0].strip() == "" and all(line.startswith("  ") and len(line) <= 102 for line in lines[1:])
    assert ", ".join(line.strip() for line in lines[1:]).replace(",,", ",") == ", ".join([*MODELS, "all"])
    assert _error({"xla_models": "RESNET18"}).startswith("--xla-models: invalid value 'RESNET18' (did you mean "
                                                         "'resnet18'")
    short = _error({"xla_backend": "trace_onse"})  # a short list stays on its line
    assert short == ("--xla-backend: invalid value 'trace_onse' (did you mean 'trace_once'?); valid: trace_once, "
                     "eager, all")


class Item:
    """What :func:`markers.validate_item` asks of a test: its node id and markers."""

    nodeid = "test_m.py::test_a"

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.marks = [m.mark for m in marks]

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)

    def iter_markers(self, name: str) -> list[Any]:
        return [m for m in self.marks if m.name == name]


def _marker_errors(*marks: pytest.MarkDecorator) -> list[str]:
    return markers.validate_item(Item(*marks), backends=["trace_once", "eager"], backend_aliases={},
                                 models=MODELS, patches=["maxpool_to_avgpool"])


def test_marker_keywords_and_two_modes() -> None:
    """A marker given a keyword says the keyword (was ``invalid value (none)``); ``xla_mode("train", "infer")`` is
    refused (was accepted); a bad model name in a marker gets the closest names too."""
    prefix = "test_m.py::test_a: @pytest.mark."
    assert _marker_errors(pytest.mark.xla_backend(names=["trace_once"])) == [
        f"{prefix}xla_backend: invalid value names=['trace_once'] (a keyword argument; the names are positional: "
        "@pytest.mark.xla_backend('a', 'b')); valid: trace_once, eager"]
    assert _marker_errors(pytest.mark.xla_models(models="resnet18")) == [
        f"{prefix}xla_models: invalid value models='resnet18' (a keyword argument; the names are positional: "
        f"@pytest.mark.xla_models('a', 'b')); valid: {cfg.listing(MODELS)}"]
    assert _marker_errors(pytest.mark.xla_mode(mode="train")) == [
        f"{prefix}xla_mode: invalid value mode='train' (a keyword argument; the mode is positional: "
        "@pytest.mark.xla_mode('train')); valid: train, infer"]
    assert _marker_errors(pytest.mark.xla_patch(name="maxpool_to_avgpool")) == [
        f"{prefix}xla_patch: invalid value name='maxpool_to_avgpool' (a keyword argument; the names are positional: "
        "@pytest.mark.xla_patch('a', 'b')); valid: maxpool_to_avgpool"]
    assert _marker_errors(pytest.mark.xla_mode("train", "infer")) == [
        f"{prefix}xla_mode: invalid value 'train', 'infer'; valid: one of train, infer (one mode per test; without "
        "the marker a test is tied to no mode)"]
    assert _marker_errors(pytest.mark.xla_mode()) == [f"{prefix}xla_mode: invalid value (none); valid: train, infer"]
    assert _marker_errors(pytest.mark.xla_models("resnet19"))[0].startswith(
        f"{prefix}xla_models: invalid value 'resnet19' (did you mean 'resnet18', 'resnet50'?); valid: \n  resnet18,")
    assert _marker_errors(pytest.mark.xla_mode("train"), pytest.mark.xla_backend("eager")) == []


# --- sessions ------------------------------------------------------------------------------------------------

PLAIN = """
def test_plain():
    print("RAN")
"""

#: (what, args, env, what the error says); each a session of its own, in one interpreter
OPTION_CASES: list[tuple[str, list[str], dict[str, str], str]] = [
    ("empty models", ["--xla-models="], {}, "--xla-models: invalid value ''; valid: model names (comma list), or all"),
    ("empty models from the environment", [], {"PYTEST_XLA_MODELS": ""},
     "--xla-models (env PYTEST_XLA_MODELS): invalid value ''"),
    ("a billion shards", ["--xla-shard=1/1000000000"], {},
     "--xla-shard: invalid value '1/1000000000'; valid: I/N with integers 1 <= I <= N <= 1000, e.g. 1/4"),
    ("threads beyond a C int", ["-o", "xla_threads=100000000000000000000"], {},
     "xla_threads (ini): invalid value '100000000000000000000'; valid: an integer 1..4096, or auto"),
    ("a misspelt model", ["--xla-models=resnet19"], {},
     "--xla-models: invalid value 'resnet19' (did you mean 'resnet18', 'resnet50'"),
]

BAD_MARKERS = """
import pytest

@pytest.mark.xla_mode("train", "infer")
def test_two_modes(): pass

@pytest.mark.xla_backend(names=["trace_once"])
def test_backend_keyword(xla_backend): pass

def test_fine(): pass
"""

#: known-issue markers: judged at collection before the other markers (their errors are a session's of their own)
BAD_KNOWN_ISSUE_MARKERS = """
import pytest

@pytest.mark.parametrize("x", [1, 2])
@pytest.mark.xla_known_issue("local:bad-signal", signal="SIGFOO")
def test_known_issue_marker(x): pass

@pytest.mark.xla_known_issue("local:bad-backend", raises="ValueError", backends=["trace_onse"], torch_xla=">=0.1")
def test_known_issue_backend(): pass

def test_fine(): pass
"""


def test_bad_options_and_markers_in_sessions(pytester: pytest.Pytester) -> None:
    """The option cases: exit 4 before any test, the value and the valid ones named, a model list wrapped."""
    pytester.makepyfile(test_plain=PLAIN)
    results = run_sessions(pytester.path, [{"args": args, "env": env} for _, args, env, _ in OPTION_CASES])
    for (what, _, _, message), result in zip(OPTION_CASES, results, strict=True):
        output = result["out"] + result["err"]
        assert result["ret"] == pytest.ExitCode.USAGE_ERROR, (what, output[-2000:])
        assert f"ERROR: {message}" in result["err"], (what, output[-2000:])
        assert "RAN" not in result["out"], what
        assert "Traceback" not in output and "INTERNALERROR" not in output, (what, output[-3000:])
        assert max(len(line) for line in result["err"].splitlines()) <= 200, what  # was one 1,600-character line
    pytester.makepyfile(test_bad_markers=BAD_MARKERS)
    session = pytester.runpytest_subprocess("test_bad_markers.py", "-p", "no:cacheprovider")
    out, err = session.stdout.str(), session.stderr.str()
    assert session.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:] + err[-3000:]
    for line in [
        "test_bad_markers.py::test_two_modes: @pytest.mark.xla_mode: invalid value 'train', 'infer'; valid: one of "
        "train, infer",
        "test_bad_markers.py::test_backend_keyword: @pytest.mark.xla_backend: invalid value names=['trace_once'] "
        "(a keyword argument; the names are positional",
    ]:
        assert line in err, (line, err)
    assert "invalid value (none)" not in err
    assert "passed" not in out and "Traceback" not in out + err and "INTERNALERROR" not in out + err
    pytester.makepyfile(test_bad_markers=BAD_KNOWN_ISSUE_MARKERS)
    session = pytester.runpytest_subprocess("test_bad_markers.py", "-p", "no:cacheprovider")
    out, err = session.stdout.str(), session.stderr.str()
    assert session.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:] + err[-3000:]
    # known-issue marker errors name the test (once for a parametrized test), not "marker:"
    assert ("test_bad_markers.py::test_known_issue_marker: @pytest.mark.xla_known_issue('local:bad-signal'): "
            "signal='SIGFOO' is not a signal name; valid: ") in err, err
    assert err.count("test_known_issue_marker") == 1
    assert ("test_bad_markers.py::test_known_issue_backend: @pytest.mark.xla_known_issue('local:bad-backend'): "
            "backends: unknown 'trace_onse' (did you mean 'trace_once'") in err, err
    assert "marker: known issue" not in err
    assert "passed" not in out and "Traceback" not in out + err and "INTERNALERROR" not in out + err
