"""``xla_timing_cpus`` (issue 31): the CPU list (pure), the option's checks, and the pinning itself on this OS's
threads (no torch: a thread of this process is enough). The timing run that records the pinned CPUs is in
test_timing_pairs.py's real session."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest
from test_config import resolve_timing, usage_error

from pytest_xla_dynamo import config as cfg
from pytest_xla_dynamo.core import machine
from pytest_xla_dynamo.timing import affinity
from pytest_xla_dynamo.timing import settings as timing_settings

needs_affinity = pytest.mark.skipif(not machine.can_pin(), reason="Linux's sched_setaffinity is needed")


@pytest.mark.parametrize(("text", "cpus"), [("", ()), ("1", (1,)), ("0-2", (0, 1, 2)), ("3,0-1, 1", (0, 1, 3)),
                                            (" 2 ", (2,))])
def test_a_cpu_list_is_read_as_taskset_does(text: str, cpus: tuple[int, ...]) -> None:
    assert machine.parse_cpus(text) == cpus


@pytest.mark.parametrize("text", ["x", "1-0", "-1", ",", "1-", "0.5"])
def test_anything_else_is_not_a_cpu_list(text: str) -> None:
    with pytest.raises(ValueError):
        machine.parse_cpus(text)


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing_settings, "usable_cpus", lambda: frozenset({0, 1}))
    monkeypatch.setattr(timing_settings, "can_pin", lambda: True)


def test_the_option_is_off_by_default_and_reads_cli_env_and_ini(two_cpus: None) -> None:
    assert resolve_timing().timing_cpus == ()
    assert resolve_timing(ini={"xla_timing_cpus": "1"}).timing_cpus == (1,)
    assert resolve_timing(env={"PYTEST_XLA_TIMING_CPUS": "0-1"}).timing_cpus == (0, 1)
    assert resolve_timing(ini={"xla_timing_cpus": "0"}).timing_cpus == (0,)


def test_a_bad_or_absent_cpu_is_a_usage_error_naming_the_valid_ones(two_cpus: None) -> None:
    valid = "valid: a CPU list as taskset -c takes it (1, 0-1, 0,2) of the CPUs this process may run on: 0,1"
    assert usage_error(ini={"xla_timing_cpus": "one"}) == f"xla_timing_cpus (ini): invalid value 'one'; {valid}"
    assert usage_error(env={"PYTEST_XLA_TIMING_CPUS": "1-3"}) == (
        f"xla_timing_cpus (env PYTEST_XLA_TIMING_CPUS): invalid value '1-3' (CPU 2,3 not available); {valid}")


def test_a_platform_that_cannot_pin_refuses_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing_settings, "can_pin", lambda: False)
    assert usage_error(ini={"xla_timing_cpus": "0"}) == (
        "xla_timing_cpus (ini): invalid value '0'; valid: empty (this platform cannot pin threads: Linux's "
        "sched_setaffinity is needed)")
    assert resolve_timing(ini={"xla_timing_cpus": ""}).timing_cpus == ()


def test_the_repro_names_the_cpus(two_cpus: None) -> None:
    from pytest_xla_dynamo.repro import repro_command

    pinned = resolve_timing(ini={"xla_timing_cpus": "1"}).repro_args()
    assert "-o xla_timing_cpus=1 " in repro_command("suites/test_timing.py::t", cfg.XlaConfig(), "trace_once",
                                                    timing=pinned)
    assert "xla_timing_cpus" not in repro_command("suites/test_timing.py::t", cfg.XlaConfig(), "trace_once",
                                                  timing=resolve_timing().repro_args())


@pytest.fixture
def other_thread() -> Iterator[threading.Thread]:
    """A second thread of this process, alive through the test."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield thread
    stop.set()
    thread.join()


def _affinities() -> dict[int, set[int]]:
    return {int(tid): os.sched_getaffinity(int(tid)) for tid in os.listdir("/proc/self/task")}


@needs_affinity
def test_every_thread_is_pinned_inside_and_put_back_after(other_thread: threading.Thread) -> None:
    before = _affinities()
    cpu = max(machine.usable_cpus())
    with affinity.pinned((cpu,)):
        inside = _affinities()
        assert set(inside) >= {threading.get_native_id(), other_thread.native_id}
        assert all(cpus == {cpu} for cpus in inside.values())
    assert {tid: cpus for tid, cpus in _affinities().items() if tid in before} == before


@needs_affinity
def test_a_thread_started_inside_gets_the_main_threads_former_cpus_after() -> None:
    main = os.sched_getaffinity(0)
    stop = threading.Event()
    with affinity.pinned((max(machine.usable_cpus()),)):
        thread = threading.Thread(target=stop.wait, daemon=True)
        thread.start()
        while thread.native_id is None:
            pass
        assert os.sched_getaffinity(thread.native_id) == {max(machine.usable_cpus())}
    assert os.sched_getaffinity(thread.native_id) == main
    stop.set()
    thread.join()


def test_no_cpus_changes_nothing() -> None:
    before = _affinities() if machine.can_pin() else {}
    with affinity.pinned(()):
        assert (_affinities() if machine.can_pin() else {}) == before
