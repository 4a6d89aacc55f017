"""``python -m pytest_xla_dynamo``: the bundled suites run without this repository's layout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sample_data import build_outputs, copy_source

from pytest_xla_dynamo import __main__ as entry

REPO = Path(__file__).resolve().parents[1]
SUITES = REPO / "suites"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.setdefault("PJRT_DEVICE", "CPU")
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=600)


def _ids(proc: subprocess.CompletedProcess[str], prefix: str = "") -> list[str]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    assert all(i.startswith(prefix) for i in ids), ids[:5]
    return [i[len(prefix):] for i in ids]


# the node ids are compared in order: no random order in these sessions (pytest-randomly, where installed)
COLLECT = ["--collect-only", "-q", "--xla-backend=trace_once,trace_everytime", "-p", "no:randomly"]


@pytest.fixture(scope="module")
def repo_ids() -> list[str]:
    """``pytest suites --collect-only -q`` in the repository, without the ``suites/`` prefix."""
    proc = _run([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", *COLLECT], REPO)
    ids = _ids(proc, "suites/")
    assert ids, "the suites collect nothing"
    return ids


# --- argument building (pure) -----------------------------------------------------------------------


def test_build_args_runs_the_suites_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    args = entry.build_args(["-k", "resnet18", "--xla-expected", "snapshots/e.csv", "-n", "2"], SUITES, tmp_path)
    assert args == [f"--rootdir={SUITES}", "-o", f"cache_dir={tmp_path / '.pytest_cache'}",
                    "-k", "resnet18", "--xla-expected", "snapshots/e.csv", "-n", "2", str(SUITES)]


def test_build_args_resolves_suite_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    suites = tmp_path / "site" / "suites"
    suites.mkdir(parents=True)
    (suites / "test_a.py").write_text("")
    args = entry.build_args(["test_a.py::test_x[resnet18-trace_once]", "suites/test_a.py", "test_nope.py",
                             "--rootdir=/r", "-o", "cache_dir=/c"], suites, tmp_path)
    assert args == [f"{suites / 'test_a.py'}::test_x[resnet18-trace_once]", str(suites / "test_a.py"),
                    "test_nope.py", "--rootdir=/r", "-o", "cache_dir=/c"]  # a suite path given: no folder added
    assert entry.build_args(["../x/test_a.py"], suites, tmp_path)[-1] == str(suites)  # outside: not a suite path


def test_build_args_plugin_not_duplicated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert "xla_dynamo" not in entry.build_args([], SUITES, tmp_path)  # the entry point loads it
    assert entry.build_args(["--disable-plugin-autoload"], SUITES, tmp_path)[:2] == ["-p", "xla_dynamo"]
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert entry.build_args([], SUITES, tmp_path)[:2] == ["-p", "xla_dynamo"]
    assert entry.build_args(["-p", "xla_dynamo"], SUITES, tmp_path).count("xla_dynamo") == 1
    assert entry.build_args(["-pxla_dynamo"], SUITES, tmp_path).count("-p") == 0


def test_sub_commands_are_dispatched_on_the_first_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    def echo(args: list[str]) -> int:
        calls.append(args)
        return 7

    monkeypatch.setitem(entry.COMMANDS, "echo", echo)
    assert entry.main(["echo", "a", "--b"]) == 7
    assert calls == [["a", "--b"]]


def test_folder_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert entry.main(["--suites-dir"]) == 0
    assert capsys.readouterr().out.strip() == str(SUITES.resolve())
    assert entry.main(["--snapshots-dir"]) == 0
    assert capsys.readouterr().out.strip() == str((REPO / "snapshots").resolve())
    assert entry.main(["--suites-dir", "-x"]) == pytest.ExitCode.USAGE_ERROR
    assert capsys.readouterr().err.strip() == "ERROR: --suites-dir takes no arguments, got '-x'"


def test_known_issues_command(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_xla_dynamo.known_issues.registry import load_registry
    from pytest_xla_dynamo.known_issues.table import DOC_VERSIONS, render_markdown

    assert entry.main(["known-issues", "--markdown"]) == 0
    assert capsys.readouterr().out == render_markdown(load_registry([]), DOC_VERSIONS)
    with pytest.raises(SystemExit) as info:
        entry.main(["known-issues", "--bogus"])
    assert info.value.code == pytest.ExitCode.USAGE_ERROR
    assert "python -m pytest_xla_dynamo known-issues: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def test_entry_reuses_the_launch_module() -> None:
    from pytest_xla_dynamo import launch

    assert entry.MainMarker is launch.MainMarker and entry.suites_dir is launch.suites_dir
    assert entry.REPRO_PREFIX == launch.REPRO_PREFIX == "python -m pytest_xla_dynamo"


def test_installed_folders() -> None:
    assert entry.suites_dir() == SUITES.resolve()  # the editable install maps suites/ to the package
    assert entry.snapshots_dir() == (REPO / "snapshots").resolve()


# --- real sessions ------------------------------------------------------------------------------------


def test_module_collects_the_same_suites_from_anywhere(tmp_path: Path, repo_ids: list[str]) -> None:
    """From a folder outside the repository, the same node ids as ``pytest suites`` in it."""
    assert _ids(_run([sys.executable, "-m", "pytest_xla_dynamo", *COLLECT], tmp_path)) == repo_ids
    script = Path(sys.executable).with_name("pytest-xla-dynamo")
    assert _ids(_run([str(script), *COLLECT], tmp_path)) == repo_ids  # the console script


def test_module_runs_one_suite_file_and_loads_the_plugin_once(tmp_path: Path, repo_ids: list[str]) -> None:
    smallest = min(SUITES.glob("test_*.py"), key=lambda p: (p.stat().st_size, p.name)).name
    expected = [i for i in repo_ids if i.startswith(smallest + "::")]
    assert expected
    # a suite file named as in the repository (suites/...) resolves to the installed one; with plugin
    # autoloading off the module adds -p xla_dynamo itself (xdist is then not loaded: -p it too if needed)
    off = _run([sys.executable, "-m", "pytest_xla_dynamo", f"suites/{smallest}", *COLLECT], tmp_path,
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert _ids(off) == expected
    # the user's own -p xla_dynamo is not duplicated (a second registration would be an error); the
    # session knows it was launched by the module (repro commands then start "python -m pytest_xla_dynamo")
    (tmp_path / "probe.py").write_text(
        "from pytest_xla_dynamo.launch import launched_by_main\n"
        "def pytest_collection_finish(session):\n"
        "    print('LAUNCHED-BY-MAIN', launched_by_main(session.config))\n")
    mine = _run([sys.executable, "-m", "pytest_xla_dynamo", smallest, "-p", "xla_dynamo", "-p", "probe", *COLLECT],
                tmp_path, PYTHONPATH=str(tmp_path))
    assert _ids(mine) == expected
    assert "LAUNCHED-BY-MAIN True" in mine.stdout
    plain = _run([sys.executable, "-m", "pytest", str(SUITES / smallest), "-p", "probe", *COLLECT], tmp_path,
                 PYTHONPATH=str(tmp_path))
    assert "LAUNCHED-BY-MAIN False" in plain.stdout


def test_prints_the_installed_folders(tmp_path: Path) -> None:
    for flag, folder in (("--suites-dir", SUITES), ("--snapshots-dir", REPO / "snapshots")):
        proc = _run([sys.executable, "-m", "pytest_xla_dynamo", flag], tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip() == str(folder.resolve())
    bad = _run([sys.executable, "-m", "pytest_xla_dynamo", "--suites-dir", "extra"], tmp_path)
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR and "--suites-dir takes no arguments" in bad.stderr
    assert "Traceback" not in bad.stdout + bad.stderr


def test_known_issues_from_the_command_line(tmp_path: Path) -> None:
    proc = _run([sys.executable, "-m", "pytest_xla_dynamo", "known-issues", "--markdown"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| id |") and "pytorch/" in proc.stdout
    assert not (tmp_path / ".pytest_cache").exists()  # not a pytest session


def test_from_a_built_wheel(tmp_path: Path, repo_ids: list[str]) -> None:
    """Build the wheel (from a copy of the sources: nothing is written into the checkout), unpack it as an
    install would, and collect from it, away from the checkout: no PytestAssertRewriteWarning."""
    before = build_outputs()
    source = copy_source(tmp_path / "source")
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
                 tmp_path)
    assert build_outputs() == before
    if build.returncode != 0 and "No matching distribution found for setuptools" in build.stderr:
        pytest.skip("pip cannot get setuptools to build the wheel here (offline): " + build.stderr[-300:])
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("pytest_xla_dynamo-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(site)
    in_repo = {p.relative_to(REPO).as_posix() for p in SUITES.rglob("*.py")}
    assert {f"pytest_xla_dynamo/{n}" for n in in_repo} <= set(names)  # every suite file is shipped
    assert "pytest_xla_dynamo/snapshots/__init__.py" in names
    snapshots = {p.relative_to(REPO).as_posix() for p in (REPO / "snapshots").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    assert {f"pytest_xla_dynamo/{n}" for n in snapshots} <= set(names)  # and every snapshot
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = _run([sys.executable, "-m", "pytest_xla_dynamo", "--suites-dir"], cwd, PYTHONPATH=str(site))
    assert where.stdout.strip() == str((site / "pytest_xla_dynamo" / "suites").resolve())
    run = _run([sys.executable, "-m", "pytest_xla_dynamo", *COLLECT], cwd, PYTHONPATH=str(site))
    assert _ids(run) == repo_ids
    assert "PytestAssertRewriteWarning" not in run.stdout + run.stderr
