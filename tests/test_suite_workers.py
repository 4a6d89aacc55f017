"""Tests of pytest_xla_dynamo.workers.suite_workers: how many pytest-xdist workers ``./run.sh suite`` runs (pure
decisions over the cores, the memory, the variable and the arguments), and the command run.sh calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_xla_dynamo.workers.suite_workers import (
    ENV,
    MAIN_JOB_TWO_WORKERS_KB,
    TWO_WORKERS_NEED_KB,
    chosen_by_args,
    decide,
    mem_available_kb,
)

ROOT = Path(__file__).resolve().parents[1]
PLENTY = 20_000_000  # kB available


def choose(args: tuple[str, ...] = (), env: dict[str, str] | None = None, *, cores: int = 2,
           available_kb: int | None = PLENTY, xdist: bool = True, lock: bool = True) -> tuple[list[str], str]:
    found = decide(args, env or {}, cores=cores, available_kb=available_kb, xdist=xdist, lock=lock)
    return found.args, found.line


def test_two_workers_where_the_cores_and_the_memory_allow() -> None:
    assert TWO_WORKERS_NEED_KB > MAIN_JOB_TWO_WORKERS_KB  # what the plugin measured, with a margin
    args, line = choose()
    assert args == ["-n", "2"]
    assert line.startswith("run.sh: two pytest-xdist workers (2 usable cores; 20.0 GB available, two workers need ")
    assert f"{ENV}=1 for one process" in line
    assert choose(env={ENV: "auto"})[0] == ["-n", "2"] and choose(cores=8)[0] == ["-n", "2"]
    assert choose(available_kb=TWO_WORKERS_NEED_KB)[0] == ["-n", "2"]


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"cores": 1}, "1 usable core;"),
    ({"available_kb": TWO_WORKERS_NEED_KB - 1}, " GB available, two workers need "),
    ({"available_kb": None}, "MemAvailable unreadable"),
    ({"xdist": False}, "pytest-xdist is not installed"),
    ({"lock": False}, "no machine lock"),
])
def test_else_one_process_and_the_line_says_why(kwargs: dict[str, object], why: str) -> None:
    args, line = choose(**kwargs)  # type: ignore[arg-type]
    assert args == []
    assert line.startswith("run.sh: one process (") and why in line and f"{ENV}=2 to force two workers" in line


def test_the_variable_forces_either_and_a_bad_value_is_refused() -> None:
    assert choose(env={ENV: "1"}) == ([], f"run.sh: one process ({ENV}=1)")
    forced = (["-n", "2"], f"run.sh: two pytest-xdist workers ({ENV}=2)")
    assert choose(env={ENV: "2"}, cores=1, available_kb=1) == forced
    with pytest.raises(ValueError, match=f"{ENV}='3': expected one of 1, 2, auto"):
        choose(env={ENV: "3"})


@pytest.mark.parametrize("args", [("-n", "3"), ("-n3",), ("-nauto",), ("--numprocesses=4",), ("--numprocesses", "1"),
                                  ("--dist=load",), ("-p", "no:xdist"), ("-pno:xdist",)])
def test_arguments_that_choose_the_processes_win(args: tuple[str, ...]) -> None:
    assert chosen_by_args(("--xla-models=resnet18", *args, "-v")) is not None
    assert choose(("--xla-models=resnet18", *args), {ENV: "2"}) == (
        [], f"run.sh: the arguments choose the processes ({chosen_by_args(args)})")


def test_other_arguments_do_not_choose() -> None:
    for args in ((), ("-p", "no:randomly"), ("-pno:randomly",), ("--xla-models=resnet18", "-k", "not slow"),
                 ("--pyargs",)):
        assert chosen_by_args(args) is None


def test_mem_available_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   12345678 kB\n")
    assert mem_available_kb(meminfo) == 12_345_678
    meminfo.write_text("MemTotal:       24000000 kB\n")
    assert mem_available_kb(meminfo) is None
    assert mem_available_kb(tmp_path / "missing") is None


def test_the_command_run_sh_calls() -> None:
    """The line on stderr, the arguments on stdout; exit 2 and no arguments on a bad variable."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    command = [sys.executable, "-m", "pytest_xla_dynamo.workers.suite_workers", "--xla-models=resnet18"]
    done = subprocess.run(command, env={**env, ENV: "1"}, capture_output=True, text=True, check=False, cwd=ROOT)
    assert (done.returncode, done.stdout, done.stderr) == (0, "\n", f"run.sh: one process ({ENV}=1)\n")
    done = subprocess.run([*command, "-n", "2"], env=env, capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.stdout == "\n" and done.stderr == "run.sh: the arguments choose the processes (-n 2)\n"
    done = subprocess.run(command, env={**env, ENV: "two"}, capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == "" and f"{ENV}='two'" in done.stderr
    assert "suite_workers" in (ROOT / "run.sh").read_text()  # run.sh asks it
