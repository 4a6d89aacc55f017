"""The plugin's pytest-xdist hooks: the one place, with the scheduler of :mod:`.xdist_schedule`, that knows about
pytest-xdist (registered only when xdist is loaded). It holds the only ``pytest_testnodedown`` and
``pytest_xdist_make_scheduler``."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.session import WORKEROUTPUT_KEY, record_from_property

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession


LOADGROUP_KEY = "xla_dynamo_loadgroup"  # workerinput: the controller schedules by xdist_group
SHARED_FOLDER_KEY = "xla_dynamo_shared"  # workerinput: the folder the controller and its workers share


def _worker_id(node: Any) -> str:
    return str(getattr(node, "workerinput", {}).get("workerid") or getattr(getattr(node, "gateway", None), "id", "?"))


class XdistHooks:
    """The plugin's pytest-xdist hooks (registered only when xdist is loaded): what each worker sent
    reaches the controller's session. A worker sends its records once, at its end; the records also
    travel with each test's report, and those of a worker that died before its end (a segfault, the OOM
    killer) are taken from its reports instead of being lost."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.streamed: dict[str, list[dict[str, Any]]] = {}  # worker -> records seen in its teardown reports
        self.shared_folder: str | None = None  # controller: the folder its workers share, made at the first's start

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # set by xdist on a report a worker sent
        if node is None or report.when != "teardown":  # teardown: the last report, with every property
            return
        found = (record_from_property(name, value) for name, value in report.user_properties)
        self.streamed.setdefault(_worker_id(node), []).extend(r for r in found if r is not None)

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        """Give each worker the scheduling the controller chose and the folder the workers share with it: their
        tests' groups for the scheduler (:mod:`.xdist_schedule`) and the machine lock (:mod:`.machine_lock`)."""
        # a worker parses the command line again: a --dist the controller chose (loadgroup, plugin.py) reaches it
        # only here
        node.workerinput[LOADGROUP_KEY] = getattr(self.session.config.option, "dist", None) == "loadgroup"
        if self.shared_folder is None:
            self.shared_folder = tempfile.mkdtemp(prefix="xla-dynamo-xdist-")
        node.workerinput[SHARED_FOLDER_KEY] = self.shared_folder

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A worker: write its tests' groups before xdist sends the controller its collection."""
        from pytest_xla_dynamo.workers.xdist_schedule import groups_of, write_groups

        workerinput = getattr(session.config, "workerinput", None)
        if isinstance(workerinput, dict) and workerinput.get(SHARED_FOLDER_KEY):
            write_groups(workerinput[SHARED_FOLDER_KEY], str(workerinput.get("workerid", os.getpid())),
                         groups_of(session.items))

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.shared_folder is not None:
            shutil.rmtree(self.shared_folder, ignore_errors=True)
            self.shared_folder = None

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """xdist's loadgroup scheduler without its hangs after a worker crash (see :mod:`.xdist_schedule`)."""
        from pytest_xla_dynamo.workers.xdist_schedule import make_scheduler

        return make_scheduler(config, log, self.shared_folder)

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        worker = _worker_id(node)
        streamed = self.streamed.pop(worker, [])
        if output is None:  # the worker died before its end: keep what its reports carried
            self.session.dead_workers.append(worker)
            self._keep_snapshots()
            if streamed:
                output = {"records": streamed}
                self.session.recovered_records[worker] = len(streamed)
        self.session.merge_worker_output(worker, output or {})

    def _keep_snapshots(self) -> None:
        """A dead worker never sends syrupy its snapshot use, and syrupy (7.0) counts worker reports, not
        workers: its replacement's report makes the count whole, and the controller would delete the dead
        worker's snapshots as unused under ``--snapshot-update``. Switch the cleanup off for this session."""
        option = self.session.config.option
        if hasattr(option, "disable_unused_snapshots") and not option.disable_unused_snapshots:
            option.disable_unused_snapshots = True
            self.session.snapshot_cleanup_off = True
