"""Options: the group in --help, usage errors, precedence (marker > CLI > env > ini > default), and a
plugin that loads without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from pytest_xla_dynamo import config as cfg

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_the_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    out = " ".join(result.stdout.str().split())  # argparse wraps help lines
    assert "dynamo + torch_xla conformance (pytest-xla-dynamo):" in out
    for opt in cfg.OPTIONS:
        assert opt.cli in out, opt.cli
    assert "--iterations-per-run" in out  # the seed's spelling
    assert "trace_once, trace_everytime, eager, openxla_eval, inductor, aot_eager" in out
    # every option is mirrored as an ini key
    for opt in cfg.OPTIONS:
        assert opt.dest in out, opt.dest


@pytest.mark.parametrize(
    ("args", "bad", "valid"),
    [
        (["--xla-backend=nonsense"], "'nonsense'", "trace_once, trace_everytime, eager"),
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
    from pytest_xla_dynamo.config import get_config

    def test_show(request):
        c = get_config(request.config)
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
    assert got.startswith("trace_once,trace_everytime,eager,openxla_eval,inductor,aot_eager|")


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


@pytest.fixture(scope="module")
def noxla_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with pytest and the plugin, and no torch: what ``tox -e noxla`` builds."""
    env_dir = tmp_path_factory.mktemp("noxla") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest>=8",
                    "tabulate", "packaging"], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "-e", str(REPO)], check=True)
    return python


def test_without_torch(noxla_python: Path, tmp_path: Path) -> None:
    """No torch: --help works, unrelated tests pass, XLA tests skip saying what to install."""
    check = subprocess.run([noxla_python, "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True, check=True)
    assert check.stdout.strip() == "None"
    help_out = subprocess.run([noxla_python, "-m", "pytest", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert help_out.returncode == 0, help_out.stderr
    assert "--xla-backend" in help_out.stdout
    (tmp_path / "test_mixed.py").write_text(
        "import pytest\n\n"
        "def test_plain():\n    assert 1 + 1 == 2\n\n"
        "def test_device(xla_device):\n    pass\n\n"
        "def test_backend(xla_backend):\n    pass\n\n"
        "@pytest.mark.xla\ndef test_marked():\n    import torch\n")
    run = subprocess.run([noxla_python, "-m", "pytest", "-rs", "-p", "no:cacheprovider"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 3 skipped" in run.stdout
    assert "needs torch, torch_xla, not installed: pip install torch==2.9.0 torch_xla==2.9.0" in run.stdout
