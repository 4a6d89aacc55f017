"""Options in pytest sessions: the group in --help, the markers in --markers, usage errors, precedence
(marker > CLI > env > ini > default), a plugin that imports no torch. Parsing itself: test_config.py; the
plugin without torch and every bad value at start-up: test_faults.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest

from pytest_xla_dynamo import markers
from pytest_xla_dynamo.options import OPTIONS
from pytest_xla_dynamo.timing.options import TIMING_OPTIONS

pytest_plugins = ["pytester"]


def test_help_lists_the_option_groups(pytester: pytest.Pytester) -> None:
    """The plugin's group and the timing wing's; a lab setting has no flag, only its ini key; at most 30 flags."""
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    out = " ".join(result.stdout.str().split())  # argparse wraps help lines
    assert "dynamo + torch_xla conformance (pytest-xla-dynamo):" in out
    assert "dynamo + torch_xla timing (pytest-xla-dynamo):" in out
    flags = set(re.findall(r"--xla-[a-z-]+", result.stdout.str()))
    for opt in (*OPTIONS, *TIMING_OPTIONS):
        assert (opt.cli in flags) == opt.on_cli, opt.cli
        assert opt.dest in out, opt.dest  # every option is mirrored as an ini key
    assert len(flags) <= 30, sorted(flags)
    assert "--iterations-per-run" in out  # the seed's spelling
    assert "trace_once, trace_everytime, trace_everytime_split, eager, openxla_eval, inductor, aot_eager" in out


def test_markers_are_declared(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    assert result.ret == 0
    out = result.stdout.str()
    for line in markers.MARKERS:
        name, _, text = line.partition(": ")
        assert f"@pytest.mark.{name}: {text}" in out, line


@pytest.mark.parametrize(
    ("args", "bad", "valid"),
    [
        (["--xla-backend=nonsense"], "'nonsense'", "trace_once, trace_everytime, trace_everytime_split, eager"),
        (["--xla-backend=trace_once,bogus"], "'bogus'", "all"),
        (["--xla-tier=huge"], "'huge'", "small, full"),
        (["--xla-models=resnet18,nosuchnet"], "'nosuchnet'", "resnet18, resnet50"),
        (["--xla-tensor-mode=real"], "'real'", "eager, fake"),
        (["--xla-patch=nopatch"], "'nopatch'", "maxpool_to_avgpool, dropout_to_identity"),
        (["--xla-steps=0"], "'0'", "an integer >= 1"),
        (["--xla-shard=3/2"], "'3/2'", "I/N"),
        (["--xla-report=pdf"], "'pdf'", "table, csv, json, png"),
    ],
)
def test_bad_values_are_usage_errors(pytester: pytest.Pytester, args: list[str], bad: str, valid: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"invalid value {bad}" in err
    assert valid in err
    assert "Traceback" not in err + result.stdout.str()


def test_bad_marker_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xla_backend("trace_once", "warp_drive")
        def test_a(xla_backend):
            pass

        @pytest.mark.xla_patch("no_such_patch")
        def test_b():
            pass
    """)
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "@pytest.mark.xla_backend: invalid value 'warp_drive'; valid: trace_once" in err
    assert "@pytest.mark.xla_patch: invalid value 'no_such_patch'; valid: maxpool_to_avgpool" in err


PRECEDENCE_TEST = """
    import pytest
    from pytest_xla_dynamo.session import get_session

    def test_show(request):
        c = get_session(request.config).xcfg
        print("RESOLVED", "|".join([",".join(c.backends), str(c.seed), ",".join(c.patches),
              ",".join(c.tensor_modes), c.sources["xla_backend"], c.sources["xla_seed"]]))
"""


def _resolved(pytester: pytest.Pytester, *args: str, env: dict[str, str] | None = None) -> str:
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        result = pytester.runpytest_subprocess("-s", "-p", "no:randomly", *args)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    line = next(x for x in result.stdout.lines if "RESOLVED " in x)
    return line.split("RESOLVED ", 1)[1].strip()


def test_precedence_cli_env_ini_default(pytester: pytest.Pytester) -> None:
    """Precedence: command line > environment > ini > default; the seed's env variables count."""
    pytester.makepyfile(PRECEDENCE_TEST)
    pytester.makeini("[pytest]\nxla_backend = trace_everytime\nxla_seed = 7\n")
    # ini over default
    assert _resolved(pytester, "-p", "no:xdist") == "trace_everytime|7||fake|ini|ini"
    # env over ini; the seed's REPLACE_MAXPOOL and USE_FAKE_TENSOR
    env = {"PYTEST_XLA_BACKEND": "eager", "REPLACE_MAXPOOL": "1", "USE_FAKE_TENSOR": "0"}
    assert _resolved(pytester, env=env) == "eager|7|maxpool_to_avgpool|eager|env PYTEST_XLA_BACKEND|ini"
    # command line over env
    got = _resolved(pytester, "--xla-backend=trace_once,trace_everytime", "--xla-seed=3", env=env)
    assert got == "trace_once,trace_everytime|3|maxpool_to_avgpool|eager|command line|command line"
    # 'all' and the seed's alias names
    got = _resolved(pytester, "--xla-backend=all")
    assert got.startswith("trace_once,trace_everytime,trace_everytime_split,eager,openxla_eval,inductor,aot_eager|")


def test_marker_overrides_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xla_backend("eager")
        def test_marked(xla_backend):
            assert xla_backend.name == "eager"

        def test_unmarked(xla_backend):
            assert xla_backend.name in ("trace_once", "trace_everytime")
    """)
    result = pytester.runpytest_subprocess("--xla-backend=trace_once,trace_everytime", "-v", "--collect-only", "-q")
    out = result.stdout.str()
    assert "test_marked[eager]" in out
    assert "test_unmarked[trace_once]" in out and "test_unmarked[trace_everytime]" in out
    assert "test_marked[trace_once]" not in out


def test_seed_alias_accepted_with_a_note(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(xla_backend):\n    print('BACKEND', xla_backend.name)\n")
    result = pytester.runpytest_subprocess("--xla-backend=aot_torchxla_trace_once", "--collect-only", "-q")
    assert result.ret == 0
    out = result.stdout.str()
    assert "test_x[trace_once]" in out
    assert "'aot_torchxla_trace_once' is the seed's name" in out


def test_plugin_import_does_not_import_torch() -> None:
    code = "import pytest_xla_dynamo.plugin, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_docs_name_every_zoo_collection() -> None:
    """docs/options.md's ``--xla-zoo`` row names every collection of the zoo, in the zoo's order (issue 47: it named
    four of twelve), so that a collection added to the zoo fails here until the page names it."""
    import re
    from pathlib import Path

    from pytest_xla_dynamo.zoo import collection_names

    page = (Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `--xla-zoo` |"))
    described = row.split("|")[3]
    named = [n for n in re.findall(r"`([a-z_]+)`", described) if n != "all"]
    assert named == list(collection_names()), (named, collection_names())


class _Config:
    """What :func:`raw_value` reads: a command-line value and an ini value for every dest."""

    def getoption(self, dest: str, default: object = None) -> object:
        return "from the command line"

    def getini(self, dest: str) -> object:
        return "from ini"


def test_a_lab_setting_is_an_ini_key_and_environment_variable_only() -> None:
    """``on_cli=False``: no flag in ``pytest --help`` (the ini key alone), read env > ini > default; named by its
    ini key in messages and as ``-o xla_<name>=VALUE`` in repro commands."""
    from pytest_xla_dynamo.options import Option, help_texts, raw_value
    from pytest_xla_dynamo.repro import _arg

    lab = Option("lab-knob", "a knob", "1", on_cli=False)
    config: Any = _Config()
    assert raw_value(config, lab, {}) == ("from ini", "ini")
    assert raw_value(config, lab, {"PYTEST_XLA_LAB_KNOB": "2"}) == ("2", "env PYTEST_XLA_LAB_KNOB")
    assert raw_value(config, Option("knob", "a knob", "1"), {})[1] == "command line"
    assert lab.label == "xla_lab_knob" and help_texts(lab, {})[1].startswith("lab setting (ini and environment only)")
    assert _arg("xla_seed", 7) == ["--xla-seed=7"] and _arg("xla_isolate") == ["--xla-isolate"]
