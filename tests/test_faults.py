"""Fault injection: bad values fail at start-up, and the plugin without torch degrades to skips.

* Every bad value, from the command line, ini, the environment and markers: exit 4 before any test
  runs, the value and the valid ones named, no traceback. Option errors stop a session at the first
  one, so one subprocess runs the sessions of several cases in turn (``sample_data.run_sessions``);
  marker errors are gathered, so one session with one bad marker per test checks them all.
* Without torch (a virtual environment with pytest and the plugin's wheel, and no torch): op patches
  from a marker, ``REPLACE_MAXPOOL`` or ``--xla-patch`` skip the tests that use them and leave the others
  alone; the bundled suites collect and skip cleanly; ``python -m pytest_xla_dynamo`` does not warn.

The isolation faults (hang, crash, timeout) are in test_isolation.py, the interrupted report writing
in the report tests.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
from sample_data import build_outputs, clean_env, copy_source, run_sessions

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
BOOL_VALID = "valid: 1, true, yes, on, 0, false, no, off (any case), or empty"


def _clean(output: str) -> None:
    assert "Traceback" not in output, output[-3000:]
    assert "INTERNALERROR" not in output, output[-3000:]


# --- bad values at start-up ------------------------------------------------------------------------

PLAIN_TEST = """
from pytest_xla_dynamo.session import get_session

def test_show(request):
    xcfg = get_session(request.config).xcfg
    print("RESOLVED", ",".join(xcfg.tensor_modes), ",".join(xcfg.patches) or "-", xcfg.seed)
"""

#: (what is bad, args, env, what the error says); every case is a session of its own
START_UP_CASES: list[tuple[str, list[str], dict[str, str], str]] = [
    ("seed beyond numpy's range", ["--xla-seed=4294967296"], {},
     "--xla-seed: invalid value '4294967296'; valid: an integer 0..4294967295"),
    ("negative seed", ["--xla-seed=-1"], {}, "--xla-seed: invalid value '-1'; valid: an integer 0..4294967295"),
    ("infinite tolerance", ["--xla-tolerance=inf"], {},
     "--xla-tolerance: invalid value 'inf'; valid: a finite positive number"),
    ("nan tolerance", ["--xla-tolerance=nan"], {},
     "--xla-tolerance: invalid value 'nan'; valid: a finite positive number"),
    ("infinite speedup ratio", ["--xla-min-speedup-ratio=inf", "--xla-timing-baseline=baseline.json"], {},
     "--xla-min-speedup-ratio: invalid value 'inf'; valid: a finite positive number"),
    ("nan speedup ratio", ["--xla-min-speedup-ratio=nan", "--xla-timing-baseline=baseline.json"], {},
     "--xla-min-speedup-ratio: invalid value 'nan'; valid: a finite positive number"),
    ("USE_FAKE_TENSOR=maybe", [], {"USE_FAKE_TENSOR": "maybe"},
     f"environment variable USE_FAKE_TENSOR: invalid value 'maybe'; {BOOL_VALID}"),
    ("REPLACE_MAXPOOL=2", [], {"REPLACE_MAXPOOL": "2"},
     f"environment variable REPLACE_MAXPOOL: invalid value '2'; {BOOL_VALID}"),
    ("REPLACE_MAXPOOL=maybe under --xla-patch", ["--xla-patch=dropout_to_identity"], {"REPLACE_MAXPOOL": "maybe"},
     f"environment variable REPLACE_MAXPOOL: invalid value 'maybe'; {BOOL_VALID}"),
    ("PYTEST_XLA_ISOLATE=maybe", [], {"PYTEST_XLA_ISOLATE": "maybe"},
     f"--xla-isolate (env PYTEST_XLA_ISOLATE): invalid value 'maybe'; {BOOL_VALID}"),
    ("seed in the ini file", ["-c", "bad_seed.ini"], {},
     "--xla-seed (ini): invalid value 'abc'; valid: an integer 0..4294967295"),
]

#: the seed's variables switched off in the spellings that used to switch them on; then on
GOOD_CASES: list[tuple[dict[str, str], str]] = [
    ({"USE_FAKE_TENSOR": "no", "REPLACE_MAXPOOL": "off"}, "RESOLVED eager - 1337"),
    ({"USE_FAKE_TENSOR": "FALSE", "REPLACE_MAXPOOL": "FALSE"}, "RESOLVED eager - 1337"),
    ({"USE_FAKE_TENSOR": "off", "REPLACE_MAXPOOL": "no"}, "RESOLVED eager - 1337"),
    ({"USE_FAKE_TENSOR": "Yes", "REPLACE_MAXPOOL": "on", "PYTEST_XLA_SEED": "4294967295"},
     "RESOLVED fake maxpool_to_avgpool 4294967295"),
]


def test_bad_values_fail_at_start_up(pytester: pytest.Pytester) -> None:
    """Each bad option or environment value: exit 4 before any test, the value and the valid ones named."""
    pytester.makepyfile(test_plain=PLAIN_TEST)
    pytester.makefile(".json", baseline="{}")
    pytester.makefile(".ini", bad_seed="[pytest]\nxla_seed = abc\n")
    cases = [{"args": args, "env": env} for _, args, env, _ in START_UP_CASES]
    cases += [{"args": [], "env": env} for env, _ in GOOD_CASES]
    results = run_sessions(pytester.path, cases)
    for (what, _, _, message), result in zip(START_UP_CASES, results, strict=False):
        output = result["out"] + result["err"]
        assert result["ret"] == pytest.ExitCode.USAGE_ERROR, (what, output[-2000:])
        assert f"ERROR: {message}" in result["err"], (what, output[-2000:])
        assert "RESOLVED" not in output, what  # no test ran
        _clean(output)
    for (_, expected), result in zip(GOOD_CASES, results[len(START_UP_CASES):], strict=True):
        assert result["ret"] == 0, result["out"][-2000:] + result["err"][-2000:]
        assert expected in result["out"]


BAD_MARKERS = """
import pytest

@pytest.mark.xla_seed("abc")
def test_seed_text(): pass

@pytest.mark.xla_seed(2**32)
def test_seed_range(): pass

@pytest.mark.xla_tolerance("1e-3")
def test_tolerance_text(): pass

@pytest.mark.xla_tolerance(1e-3)
def test_tolerance_positional(): pass

@pytest.mark.xla_tolerance(atol=-1e-3, rtol=1e-3)
def test_tolerance_negative(): pass

@pytest.mark.xla_mode("eval")
def test_mode_plain(): pass

@pytest.mark.xla_isolated(timeout="abc")
def test_isolated_timeout(): pass

@pytest.mark.xla_backend("trace_once", "warp_drive")
def test_backend(xla_backend): pass

@pytest.mark.xla_models("nosuchnet")
def test_models(xla_model): pass

@pytest.mark.xla_tensor_mode("real")
def test_tensor_mode(tensor_mode): pass

@pytest.mark.xla_patch("no_such_patch")
def test_patch(): pass

@pytest.mark.parametrize("x", [1, 2])
@pytest.mark.xla_seed("xyz")
def test_parametrized(x): pass

def test_fine(): pass
"""

TOLERANCE_VALID = "both atol= and rtol= (finite numbers >= 0), or tol= (a finite number > 0), as keywords"
MARKER_ERRORS = [
    "test_seed_text: @pytest.mark.xla_seed: invalid value 'abc'; valid: an integer 0..4294967295",
    "test_seed_range: @pytest.mark.xla_seed: invalid value 4294967296; valid: an integer 0..4294967295",
    f"test_tolerance_text: @pytest.mark.xla_tolerance: invalid value '1e-3' (positional); valid: {TOLERANCE_VALID}",
    f"test_tolerance_positional: @pytest.mark.xla_tolerance: invalid value 0.001 (positional); valid: "
    f"{TOLERANCE_VALID}",
    f"test_tolerance_negative: @pytest.mark.xla_tolerance: invalid value atol=-0.001, rtol=0.001; valid: "
    f"{TOLERANCE_VALID}",
    "test_mode_plain: @pytest.mark.xla_mode: invalid value 'eval'; valid: train, infer",
    "test_isolated_timeout: @pytest.mark.xla_isolated: invalid value timeout='abc'; valid: timeout= a finite "
    "positive number (seconds)",
    "test_backend: @pytest.mark.xla_backend: invalid value 'warp_drive'; valid: trace_once, trace_everytime, "
    "trace_everytime_split, eager",
    "test_models: @pytest.mark.xla_models: invalid value 'nosuchnet'; valid: ",
    "test_tensor_mode: @pytest.mark.xla_tensor_mode: invalid value 'real'; valid: eager, fake",
    "test_patch: @pytest.mark.xla_patch: invalid value 'no_such_patch'; valid: maxpool_to_avgpool, "
    "dropout_to_identity",
    "test_parametrized: @pytest.mark.xla_seed: invalid value 'xyz'; valid: an integer 0..4294967295",
]


def test_bad_marker_values_fail_at_collection(pytester: pytest.Pytester) -> None:
    """All bad markers of a session in one usage error, one line each, before any test runs."""
    pytester.makepyfile(test_bad_markers=BAD_MARKERS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:] + err[-3000:]
    for line in MARKER_ERRORS:
        assert f"test_bad_markers.py::{line}" in err, (line, err)
    assert err.count("test_parametrized") == 1  # one line for the function, not one per parameter
    assert "test_fine" not in err and "passed" not in out
    _clean(out + err)


def test_marker_mode_deselects_only_valid_modes(pytester: pytest.Pytester) -> None:
    """A valid xla_mode outside --xla-modes still deselects (the check above is not a deselection)."""
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xla_mode("train")
        def test_train(): pass

        @pytest.mark.xla_mode("infer")
        def test_infer(): pass
    """)
    result = pytester.runpytest_subprocess("--xla-modes=infer", "-p", "no:cacheprovider", "-v")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*test_infer PASSED*", "*1 passed, 1 deselected*"])


# --- without torch --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def noxla_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the plugin's wheel and its dependencies, and no torch (what ``tox -e noxla`` builds).

    The wheel is built from a copy of the sources: nothing is written into the checkout."""
    root = tmp_path_factory.mktemp("noxla")
    before = build_outputs()
    source = copy_source(root / "source")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
                            "-w", str(root / "dist"), str(source)], capture_output=True, text=True, cwd=root)
    if build.returncode != 0 and "No matching distribution found for setuptools" in build.stderr:
        pytest.skip("pip cannot get setuptools to build the wheel here (offline): " + build.stderr[-300:])
    assert build.returncode == 0, build.stderr[-3000:]
    assert build_outputs() == before
    (wheel,) = (root / "dist").glob("pytest_xla_dynamo-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], check=True,
                   cwd=root)
    check = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True, check=True)
    assert check.stdout.strip() == "None"
    return python


def _run(python: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env=clean_env(**env),
                          timeout=600)


def test_without_torch(noxla_python: Path, tmp_path: Path) -> None:
    """No torch: --help works, unrelated tests pass, XLA tests skip saying what to install."""
    help_out = _run(noxla_python, "-m", "pytest", "--help", cwd=tmp_path)
    assert help_out.returncode == 0, help_out.stderr
    assert "--xla-backend" in help_out.stdout
    (tmp_path / "test_mixed.py").write_text(
        "import pytest\n\n"
        "def test_plain():\n    assert 1 + 1 == 2\n\n"
        "def test_device(xla_device):\n    pass\n\n"
        "def test_backend(xla_backend):\n    pass\n\n"
        "@pytest.mark.xla\ndef test_marked():\n    import torch\n")
    run = _run(noxla_python, "-m", "pytest", "-rs", "-p", "no:cacheprovider", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 3 skipped" in run.stdout
    assert "needs torch, torch_xla, not installed: pip install torch==2.9.0 torch_xla==2.9.0" in run.stdout


PATCH_TESTS = """
import pytest

def test_plain():
    assert 1 + 1 == 2

@pytest.mark.xla_patch("maxpool_to_avgpool")
def test_marked():
    raise AssertionError("runs only with torch")

def test_fixture(xla_patches):
    raise AssertionError("runs only with torch")

@pytest.mark.xla_patch("dropout_to_identity")
class TestPatched:
    def test_in_class(self):
        raise AssertionError("runs only with torch")
"""


@pytest.mark.parametrize(("args", "env", "session_patch"), [
    ([], {"REPLACE_MAXPOOL": "1"}, "maxpool_to_avgpool"),
    (["--xla-patch=dropout_to_identity"], {}, "dropout_to_identity"),
], ids=["REPLACE_MAXPOOL", "--xla-patch"])
def test_patches_without_torch(noxla_python: Path, tmp_path: Path, args: list[str], env: dict[str, str],
                               session_patch: str) -> None:
    """Patches of the whole session (the environment, the command line) leave a plain test alone; a test
    that asks for patches (marker, ``xla_patches`` fixture) skips with the install hint."""
    (tmp_path / "test_patches.py").write_text(PATCH_TESTS)
    run = _run(noxla_python, "-m", "pytest", "-rs", "-p", "no:cacheprovider", *args, cwd=tmp_path, **env)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "1 passed, 3 skipped" in run.stdout
    hint = "need torch, not installed: pip install torch==2.9.0"
    marked = sorted({session_patch, "maxpool_to_avgpool"}, key=[session_patch, "maxpool_to_avgpool"].index)
    assert f"op patches ({', '.join(marked)}) {hint}" in run.stdout, run.stdout
    assert f"op patches ({session_patch}) {hint}" in run.stdout  # the fixture's test
    assert "ModuleNotFoundError" not in output
    _clean(output)


def test_bundled_suites_without_torch(noxla_python: Path, tmp_path: Path) -> None:
    """``python -m pytest_xla_dynamo`` from the wheel, without torch: every suite collects and skips."""
    run = _run(noxla_python, "-m", "pytest_xla_dynamo", "-rs", "-p", "no:cacheprovider", cwd=tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    assert " passed" not in run.stdout and " failed" not in run.stdout and " error" not in run.stdout, output[-3000:]
    assert "needs torch, torch_xla, not installed" in run.stdout
    for suite in ("test_dropout.py", "test_tensor_modes.py", "test_known_issues.py"):
        assert f"SKIPPED [1] {suite}" in run.stdout or f"{suite}:" in run.stdout, (suite, run.stdout[-3000:])
    assert "PytestAssertRewriteWarning" not in output
    _clean(output)


# --- the own-model API (issue 47) --------------------------------------------------------------------

OWN_MODELS = """
import pytest
import torch

from pytest_xla_dynamo.parity import EagerError


class NoParameters(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


class NanEverywhere(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x) * float("nan")


def test_no_parameters_inference(xla_parity):
    assert xla_parity.inference(NoParameters, [torch.randn(4, 3)], backend="trace_once").ok


def test_no_parameters_training(xla_parity):
    with pytest.raises(ValueError, match="the model has no parameters, so a training step has nothing to train"):
        xla_parity.training(NoParameters, [torch.randn(4, 3)], backend="trace_once")


def test_zero_steps(xla_parity):
    with pytest.raises(ValueError, match=r"xla_parity.training: steps=0 would compare nothing; valid: an integer >= 1"):
        xla_parity.training(lambda: torch.nn.Linear(3, 2), [torch.randn(4, 3)], backend="trace_once", steps=0)


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_nan_everywhere(xla_parity, mode):
    with pytest.raises(EagerError, match="compared nothing: every value eager computed is NaN"):
        getattr(xla_parity, mode)(NanEverywhere, [torch.randn(4, 3)], backend="trace_once")
"""


def test_own_model_api_says_what_it_cannot_compare(pytester: pytest.Pytester) -> None:
    """A model without parameters: inference passes (was: "optimizer got an empty parameter list" in both modes),
    training says there is nothing to train; ``steps=0`` is refused (was: a pass comparing nothing); a model whose
    outputs are NaN everywhere fails saying the comparison compared nothing (was: a silent pass in both modes)."""
    pytester.makepyfile(test_own=OWN_MODELS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, output[-4000:]
    result.assert_outcomes(passed=5)
    _clean(output)
