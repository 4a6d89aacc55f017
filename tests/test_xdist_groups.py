"""The test groups the workers hand the scheduler (pytest-xdist#1386: xdist 3.8.0's ``@group`` suffix is lost on
pytest 9.2's structured ids); the integration, a model's tests on one worker under ``-n 2``, is in
``test_timing_check.py::test_two_xdist_workers_time_under_the_machine_lock``."""

from __future__ import annotations

from pathlib import Path

from pytest_xla_dynamo.workers.xdist_schedule import read_groups, write_groups


def test_the_workers_groups_reach_the_scheduler_whole(tmp_path: Path) -> None:
    write_groups(tmp_path, "gw0", {"t.py::a[m1-x]": "xla-m1", "t.py::b[m2-x]": "xla-m2"})
    write_groups(tmp_path, "gw1", {"t.py::a[m1-x]": "xla-m1", "t.py::b[m2-x]": "xla-m2"})
    assert read_groups(tmp_path) == {"t.py::a[m1-x]": "xla-m1", "t.py::b[m2-x]": "xla-m2"}
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_no_worker_wrote_no_groups(tmp_path: Path) -> None:
    assert read_groups(tmp_path) == {}
