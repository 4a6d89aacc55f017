"""The session object: all of the plugin's state for one pytest session, registered as a plugin.

Modelled on pytest-benchmark's ``BenchmarkSession`` and syrupy's ``SnapshotSession``: ``plugin.py``
builds one :class:`XlaSession` in ``pytest_configure``, registers it (and the concern plugins, each
given this object), and every hook and fixture reaches the state through it. It holds the resolved
options (:class:`~pytest_xla_dynamo.config.XlaConfig`), the backend registry, the record store, the
case engine (created on first use: it is the only part that needs torch), and what pytest-xdist workers sent
back. A concern's own state stays with its plugin (the known-issue registry, timing's thread budget, the machine
lock): the session imports none of the concern subpackages.

:attr:`XlaSession.is_worker` is the only "am I a worker" check. A worker sends one dict
(:meth:`XlaSession.worker_output`) through ``config.workeroutput``; the controller merges it into its store
(:meth:`XlaSession.merge_worker_output`) through :class:`~pytest_xla_dynamo.workers.xdist_hooks.XdistHooks`,
or, for a worker that died, the records its test reports carried. No torch here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import launch
from pytest_xla_dynamo.activation import ACTIVATE_KEY as _ACTIVATE_KEY
from pytest_xla_dynamo.activation import CHILD_ENV as _CHILD_ENV
from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.core.backends import BackendRegistry
from pytest_xla_dynamo.markers import case_mode
from pytest_xla_dynamo.records import CaseRecord, RecordStore
from pytest_xla_dynamo.repro import repro_command

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.core.engine import CaseEngine

#: ``config.workeroutput`` key of the one dict a worker sends: ``{"records": [...], "shard": [n, of]}``
WORKEROUTPUT_KEY = "xla_dynamo"
#: the environment variable that makes a session an isolated test's child (its value: the report file)
CHILD_ENV = _CHILD_ENV
#: the user property under which a record travels with its test report
RECORD_PROPERTY = "xla_{suite}"
_RECORD_PREFIX = RECORD_PROPERTY.split("{", 1)[0]


class XlaSession:
    """The plugin's state for one pytest session (see the module docstring)."""

    def __init__(self, config: pytest.Config, xcfg: XlaConfig, backends: BackendRegistry) -> None:
        self.config = config
        self.xcfg = xcfg
        self.backends = backends
        self.store = RecordStore()
        self.is_worker = hasattr(config, "workerinput")
        # popped: the child's own subprocesses (an xla_subprocess snippet) are not isolated children
        child = os.environ.pop(CHILD_ENV, None)
        self.child_output: Path | None = Path(child) if child else None
        self.worker_records: dict[str, int] = {}  # controller: records received per worker
        self.worker_peaks: dict[str, int] = {}  # controller: each worker's peak resident memory, kB
        self.worker_pids: dict[int, str] = {}  # controller: each worker's pid -> its id (the memory figures' names)
        self.recovered_records: dict[str, int] = {}  # controller: records of dead workers, from their reports
        self.dead_workers: list[str] = []  # controller: workers that died before their end
        self.snapshot_cleanup_off = False  # controller: syrupy's unused-snapshot cleanup switched off (a dead worker)
        self.shard_counts: tuple[int, int] | None = None  # (selected, collected) under --xla-shard
        self.runs_xla = False  # collection selected a test that needs XLA (set at pytest_collection_finish)
        self.activated_late = False  # the plugin turned on during collection: its header lines follow it
        self.unchecked_snapshots: set[str] = set()  # graph snapshots of cases that failed before comparing
        self._engine: CaseEngine | None = None

    # --- where this process stands ------------------------------------------------------------------

    @property
    def reports_here(self) -> bool:
        """Whether this process reports (tables, files, gate): not an xdist worker, not an isolated
        test's child. Their records reach the session that reports."""
        return not self.is_worker and self.child_output is None

    @property
    def worker_count(self) -> int:
        """The number of pytest-xdist workers as seen from this process (0: not under xdist)."""
        workerinput = getattr(self.config, "workerinput", None)
        if isinstance(workerinput, dict) and workerinput.get("workercount"):
            return int(workerinput["workercount"])
        count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
        if count.strip().isdigit():
            return int(count)
        return 2 if self.is_worker else 0  # a worker that does not say how many: assume company

    @property
    def repro_prefix(self) -> str:
        """``pytest`` or ``python -m pytest_xla_dynamo``: how repro commands start."""
        return launch.repro_prefix(self.config)

    # --- collaborators ------------------------------------------------------------------------------

    @property
    def engine(self) -> CaseEngine:
        """The process's case engine (prepared, compiled cases shared by parity, graphs and timing)."""
        if self._engine is None:
            from pytest_xla_dynamo.core.census import random_ops
            from pytest_xla_dynamo.core.engine import CaseEngine

            self._engine = CaseEngine(self.xcfg, self.backends, random_ops)
        return self._engine

    # --- records ------------------------------------------------------------------------------------

    def record(self, item: pytest.Item, record: CaseRecord) -> CaseRecord:
        """Store ``record`` for the session and attach it to the test report (``user_properties``)."""
        record.nodeid = record.nodeid or item.nodeid
        self.store.add(record)
        item.user_properties.append((RECORD_PROPERTY.format(suite=record.suite), json.dumps(record.to_json())))
        for prop in ("status", "speedup", "compilation_latency", "unique_graphs", "graph_breaks", "fallbacks"):
            value = getattr(record, prop)
            if value is not None:
                item.user_properties.append((f"{_RECORD_PREFIX}{prop}", value))
        return record

    def merge_worker_output(self, worker: str, output: dict[str, Any]) -> None:
        """Take in what a worker sent (:meth:`worker_output`)."""
        records = output.get("records") or []
        self.store.extend(CaseRecord.from_json(d) for d in records)
        self.worker_records[worker] = len(records)
        if isinstance(output.get("peak_rss_kb"), int):
            self.worker_peaks[worker] = output["peak_rss_kb"]
        if isinstance(output.get("pid"), int):
            self.worker_pids[output["pid"]] = worker
        shard = output.get("shard")
        if shard and self.shard_counts is None:
            self.shard_counts = (int(shard[0]), int(shard[1]))

    def worker_output(self) -> dict[str, Any]:
        """What a worker sends to the controller at the end of its session."""
        from pytest_xla_dynamo.core.machine import process_peak_kb

        return {"records": [r.to_json() for r in self.store],
                "shard": list(self.shard_counts) if self.shard_counts else None, "peak_rss_kb": process_peak_kb(),
                "pid": os.getpid()}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            self.config.workeroutput[WORKEROUTPUT_KEY] = self.worker_output()  # type: ignore[attr-defined]


def record_from_property(name: str, value: Any) -> dict[str, Any] | None:
    """The record a test report's user property carries (:data:`RECORD_PROPERTY`: the record's JSON), else None."""
    if not (name.startswith(_RECORD_PREFIX) and isinstance(value, str) and value.startswith("{")):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    return data if isinstance(data, dict) and name == RECORD_PROPERTY.format(suite=data.get("suite")) else None


class CaseCheck:
    """The opening the check fixtures share (``XlaParity``, ``GraphCheck``, ``XlaTiming``): the test's session and
    item, the mode of a check, the backends' support of it, the repro command and the record's identity."""

    suite = ""

    def __init__(self, session: XlaSession, item: pytest.Item) -> None:
        self.session = session
        self.item = item

    def _mode(self, mode: str | None) -> str:
        """``mode`` if given, else the test's ``xla_mode`` marker (UsageError when neither says it)."""
        return case_mode(self.item, mode)

    def _supports(self, mode: str, *backends: Backend, what: str = "") -> None:
        """UsageError unless every one of ``backends`` supports ``mode`` (``what``: the message's prefix)."""
        unsupported = [b.name for b in backends if not b.supports(mode)]
        if unsupported:
            raise pytest.UsageError(f"{what}backend {', '.join(unsupported)} does not support mode {mode!r}")

    def _repro(self, backend: Backend, *, timing: Sequence[str] | None = None, registry_off: bool = False) -> str:
        """The command that reproduces this test's case on ``backend``."""
        return repro_command(self.item.nodeid, self.session.xcfg, backend.name, timing=timing,
                             registry_off=registry_off, prefix=self.session.repro_prefix)

    def _fields(self, spec: zoo.ModelSpec, backend: Backend, mode: str, repro: str) -> dict[str, Any]:
        """The record's identity: suite, model, backend, mode, repro, device, batch size and tier."""
        tier = self.session.xcfg.tier
        return dict(suite=self.suite, name=spec.name, backend=backend.name, mode=mode, repro=repro,
                    dev=backend.device_kind, batch_size=spec.batch(tier), tier=tier)


session_key = pytest.StashKey[XlaSession]()


def get_session(config: pytest.Config) -> XlaSession:
    """The session object of ``config`` (built where the plugin turns on; a dormant plugin turns on now; one with
    default options if the plugin did not configure, e.g. a unit test's bare config)."""
    found = config.stash.get(session_key, None)
    activate = config.stash.get(_ACTIVATE_KEY, None) if found is None else None
    if activate is not None:  # the plugin is loaded but dormant: asking for its session turns it on
        return activate()
    if found is None:
        from pytest_xla_dynamo.core.backends import default_registry

        found = config.stash[session_key] = XlaSession(config, XlaConfig(), default_registry())
    return found
