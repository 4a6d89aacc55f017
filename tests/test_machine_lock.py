"""The machine lock (pure: real processes and real ``flock``, no torch): tests of several workers run side by side,
timed runs have the machine alone, a waiting measurement is not starved, and two measurements do not deadlock."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from pytest_xla_dynamo.workers import machine_lock
from pytest_xla_dynamo.workers.machine_lock import MachineLock, worker_threads

pytestmark = pytest.mark.skipif(not machine_lock.available(), reason="no POSIX flock here")


def _log(path: Path, name: str, event: str) -> None:
    with open(path, "a", encoding="ascii") as f:
        f.write(f"{time.monotonic():.6f} {name} {event}\n")


def _shared(folder: str, log: str, name: str, hold: float, delay: float) -> None:
    time.sleep(delay)
    lock = MachineLock(folder)
    with lock.shared():
        _log(Path(log), name, "start")
        time.sleep(hold)
        _log(Path(log), name, "end")


def _timed(folder: str, log: str, name: str, hold: float, delay: float) -> None:
    """A timing test: shared for the test, exclusive for its timed runs."""
    lock = MachineLock(folder)
    with lock.shared():
        time.sleep(delay)
        with lock.exclusive():
            _log(Path(log), name, "start")
            time.sleep(hold)
            _log(Path(log), name, "end")


def _run(*jobs: tuple[object, ...]) -> None:
    procs = [multiprocessing.get_context("fork").Process(target=j[0], args=j[1:]) for j in jobs]  # type: ignore[arg-type]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0, f"{p} did not finish (deadlock?)"


def _spans(log: Path) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    for line in log.read_text(encoding="ascii").splitlines():
        stamp, name, _event = line.split()
        spans.setdefault(name, []).append(float(stamp))
    return {name: (s[0], s[1]) for name, s in spans.items()}


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_shared_holders_run_together(tmp_path: Path) -> None:
    log = tmp_path / "log"
    _run((_shared, str(tmp_path), str(log), "a", 1.0, 0.0), (_shared, str(tmp_path), str(log), "b", 1.0, 0.0))
    spans = _spans(log)
    assert _overlap(spans["a"], spans["b"]), spans


def test_timed_runs_have_the_machine_alone_and_a_waiting_measurement_is_not_starved(tmp_path: Path) -> None:
    """``long`` holds shared from the start; the measurement asks at 0.3 s and waits for it; ``late`` asks for a
    shared hold at 0.6 s, while the measurement waits: it runs after the measurement, not beside it."""
    log = tmp_path / "log"
    _run((_shared, str(tmp_path), str(log), "long", 1.5, 0.0),
         (_timed, str(tmp_path), str(log), "timed", 0.5, 0.3),
         (_shared, str(tmp_path), str(log), "late", 0.5, 0.6))
    spans = _spans(log)
    assert not _overlap(spans["timed"], spans["long"]) and not _overlap(spans["timed"], spans["late"]), spans
    assert spans["long"][1] <= spans["timed"][0] <= spans["late"][0], spans


def test_two_measurements_do_not_wait_on_each_other(tmp_path: Path) -> None:
    """Both tests hold the lock shared when they ask for it exclusive: each gives its shared hold up while it waits."""
    log = tmp_path / "log"
    _run((_timed, str(tmp_path), str(log), "one", 0.5, 0.1), (_timed, str(tmp_path), str(log), "two", 0.5, 0.1))
    spans = _spans(log)
    assert not _overlap(spans["one"], spans["two"]), spans


@pytest.mark.parametrize(("cores", "workers", "threads"), [(2, 2, 1), (2, 1, 2), (8, 2, 4), (1, 2, 1), (4, 3, 1)])
def test_a_worker_takes_its_share_of_the_cores(cores: int, workers: int, threads: int) -> None:
    assert worker_threads(cores, workers) == threads
