"""Tests of pytest_xla_dynamo.session: the session object's records, worker output and merge (pure, no torch),
and of pytest_xla_dynamo.markers.case_mode (the mode read from a test's marker)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.core.backends import default_registry
from pytest_xla_dynamo.markers import case_mode
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.session import CHILD_ENV, WORKEROUTPUT_KEY, XlaSession
from pytest_xla_dynamo.workers.xdist_hooks import XdistHooks


def _session(monkeypatch: pytest.MonkeyPatch, *, worker: bool = False, child: str | None = None) -> XlaSession:
    if child is None:
        monkeypatch.delenv(CHILD_ENV, raising=False)
    else:
        monkeypatch.setenv(CHILD_ENV, child)
    config: Any = SimpleNamespace(option=SimpleNamespace())  # pytest's config, as far as the session reads it
    if worker:
        config.workerinput = {"workerid": "gw0", "workercount": 2}
    return XlaSession(config, XlaConfig(), default_registry())


def test_where_a_session_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _session(monkeypatch).reports_here
    worker = _session(monkeypatch, worker=True)
    assert worker.is_worker and not worker.reports_here and worker.worker_count == 2
    child = _session(monkeypatch, child="/tmp/reports.jsonl")
    assert not child.reports_here and str(child.child_output) == "/tmp/reports.jsonl"
    import os

    assert CHILD_ENV not in os.environ  # popped: the child's own subprocesses are not children


def test_record_stores_and_annotates_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(monkeypatch)
    item: Any = SimpleNamespace(nodeid="t.py::test_a[m-b]", user_properties=[])
    record = session.record(item, CaseRecord(suite="parity", name="m", backend="b", mode="train", status="pass",
                                             compiles=3))
    assert list(session.store) == [record] and record.nodeid == "t.py::test_a[m-b]"
    props = dict(item.user_properties)
    assert json.loads(props["xla_parity"])["status"] == "pass"
    assert props["xla_status"] == "pass" and "xla_speedup" not in props  # only what the record has


def test_a_worker_sends_its_records_and_shard_counts_and_the_controller_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _session(monkeypatch, worker=True)
    worker.store.add(CaseRecord(suite="timing", name="m", backend="b", mode="infer", speedup=1.5))
    worker.shard_counts = (3, 9)
    config: Any = worker.config
    config.workeroutput = {}
    worker.pytest_sessionfinish(SimpleNamespace(), 0)  # type: ignore[arg-type]
    sent = config.workeroutput[WORKEROUTPUT_KEY]
    controller = _session(monkeypatch)
    node = SimpleNamespace(workeroutput={WORKEROUTPUT_KEY: json.loads(json.dumps(sent))},
                           workerinput={"workerid": "gw1"})
    XdistHooks(controller).pytest_testnodedown(node, None)
    assert [(r.name, r.speedup) for r in controller.store] == [("m", 1.5)]
    assert controller.worker_records == {"gw1": 1} and controller.shard_counts == (3, 9)
    XdistHooks(controller).pytest_testnodedown(SimpleNamespace(workeroutput={}, workerinput={"workerid": "gw2"}), None)
    assert controller.worker_records == {"gw1": 1, "gw2": 0}  # a worker that ran nothing still reports


def _item(*args: str) -> Any:
    mark = pytest.mark.xla_mode(*args).mark if args else None
    return SimpleNamespace(nodeid="t.py::test_x", get_closest_marker=lambda name: mark)


def test_case_mode_from_the_argument_or_the_marker() -> None:
    assert case_mode(_item("train")) == "train"
    assert case_mode(_item("train"), "infer") == "infer"
    with pytest.raises(pytest.UsageError, match="say the mode once"):
        case_mode(_item())
    with pytest.raises(pytest.UsageError, match="invalid mode 'eval'; valid: train, infer"):
        case_mode(_item("eval"))


def test_a_dead_workers_records_come_from_its_test_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that dies sends no ``workeroutput``: the records its teardown reports carried are merged
    instead (and counted as recovered); a worker that ends normally is taken from its output alone."""
    controller = _session(monkeypatch)
    hooks = XdistHooks(controller)
    record = CaseRecord(suite="parity", name="m", backend="b", mode="train", status="pass")
    props = [("xla_parity", json.dumps(record.to_json())), ("xla_status", "pass"), ("xla_other", "{not json")]
    dead = SimpleNamespace(workerinput={"workerid": "gw0"})
    for when in ("setup", "call", "teardown"):  # only the last report counts: no duplicates
        hooks.pytest_runtest_logreport(SimpleNamespace(node=dead, when=when, user_properties=props))  # type: ignore[arg-type]
    hooks.pytest_runtest_logreport(SimpleNamespace(when="teardown", user_properties=props))  # type: ignore[arg-type]
    hooks.pytest_testnodedown(SimpleNamespace(workeroutput={}, workerinput={"workerid": "gw0"}), "crashed")
    assert [(r.name, r.status) for r in controller.store] == [("m", "pass")]
    assert controller.recovered_records == {"gw0": 1} and controller.worker_records == {"gw0": 1}
    alive = SimpleNamespace(workerinput={"workerid": "gw1"})
    hooks.pytest_runtest_logreport(SimpleNamespace(node=alive, when="teardown", user_properties=props))  # type: ignore[arg-type]
    hooks.pytest_testnodedown(SimpleNamespace(workeroutput={WORKEROUTPUT_KEY: {"records": []}},
                                              workerinput={"workerid": "gw1"}), None)
    assert len(list(controller.store)) == 1 and "gw1" not in controller.recovered_records
    assert controller.dead_workers == ["gw0"]  # gw1 ended normally
    hooks.pytest_testnodedown(SimpleNamespace(workeroutput={}, workerinput={"workerid": "gw2"}), "crashed")
    assert controller.dead_workers == ["gw0", "gw2"] and "gw2" not in controller.recovered_records  # nothing streamed
