"""pytest-xdist's ``loadgroup`` scheduler, with its crashed-worker bugs fixed (imported only with xdist).

The plugin keeps each model's tests on one worker (``--dist=loadgroup``), and a broad run loses workers
(segfaults, the OOM killer). pytest-xdist 3.8.0's ``LoadScopeScheduling`` then hangs the session or
runs the crashing test again:

- ``remove_node`` puts back on the queue every work unit the dead worker had, completed ones too; a
  replacement is sent an empty list of tests, never completes one, and is never given more: the session
  waits forever (pytest-dev/pytest-xdist#1323, fixed upstream by #1324 after 3.8.0; also #1378);
- a replacement given a single test waits for a second one (or a shutdown) before running it, and
  nothing sends either (pytest-dev/pytest-xdist#1327, fixed by #1328 after 3.8.0);
- the test the worker died in is put back as pending, so the replacement runs it again and dies the same
  way, until ``--max-worker-restart`` is spent (pytest-dev/pytest-xdist#1371, open). xdist has already
  reported that test as failed ("worker 'gwN' crashed while running ..."), so running it again proves
  nothing.

:func:`make_scheduler` returns :class:`CrashSafeLoadGroupScheduling` for ``--dist=loadgroup`` (the
plugin's choice under ``-n``). It changes what happens after a crash, and where the groups come from.

The groups: xdist 3.8.0's worker tells its scheduler a test's ``xdist_group`` by appending ``@group`` to the
test's id (``item._nodeid``), which pytest 9.2's structured ids ignore: nothing fails, every test becomes a
group of its own and a model's tests are spread over the workers, each compiling the model again
(pytest-dev/pytest-xdist#1386, open; PR #1388). Here each worker writes its tests' groups to a file in a folder
the controller gave it (:func:`write_groups`, before it reports its collection), and the scheduler reads them
(:func:`read_groups`) instead of parsing ids; an id that still carries ``@group`` (an xdist that works) or that
no worker wrote falls back to xdist's own split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

GROUPS_PREFIX = "groups-"


def groups_of(items: Iterable[pytest.Item]) -> dict[str, str]:
    """Test id -> its ``xdist_group`` (several joined as xdist joins them), for the tests that have one."""
    groups = {}
    for item in items:
        marks = item.iter_markers("xdist_group")
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
        if names:
            groups[item.nodeid] = "_".join(sorted(names))
    return groups


def write_groups(folder: str | os.PathLike[str], worker: str, groups: Mapping[str, str]) -> None:
    """Write a worker's test groups for the controller's scheduler (atomically: a reader sees all or none)."""
    path = Path(folder) / f"{GROUPS_PREFIX}{worker}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(groups)), encoding="utf-8")
    tmp.replace(path)


def read_groups(folder: str | os.PathLike[str]) -> dict[str, str]:
    """Every worker's test groups (workers collect the same tests: the union is any one of them)."""
    groups: dict[str, str] = {}
    for path in sorted(Path(folder).glob(f"{GROUPS_PREFIX}*.json")):
        groups.update(json.loads(path.read_text(encoding="utf-8")))
    return groups


class CrashSafeLoadGroupScheduling(LoadGroupScheduling):
    """``LoadGroupScheduling`` that requeues only what a dead worker left undone, without the test it
    died in, and gives a replacement worker enough work (or a shutdown) to run; its groups are the ones the
    workers wrote to ``groups_folder`` (None: xdist's own, from the ids)."""

    def __init__(self, config: pytest.Config, log: Any = None, groups_folder: str | None = None) -> None:
        super().__init__(config, log)
        self.groups_folder = groups_folder
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None and self.groups_folder is not None and self.collection_is_completed:
            self.groups = read_groups(self.groups_folder)  # every worker wrote them before its collection arrived
        group = (self.groups or {}).get(nodeid)
        return group if group is not None else str(super()._split_scope(nodeid))

    def remove_node(self, node: Any) -> str | None:
        workload = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashitem = next(nodeid for unit in workload.values() for nodeid, done in unit.items() if not done)
        for scope, unit in workload.items():
            if scope == self._split_scope(crashitem):
                unit[crashitem] = True  # reported failed by xdist already: not run again
            if not all(unit.values()):
                self.workqueue[scope] = unit
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def schedule(self) -> None:
        if self.collection is None:
            super().schedule()
            return
        for node in self.nodes:  # a node added after a crash: give it work, or let it stop
            self._reschedule(node)
            if not node.shutting_down and self._pending_of(self.assigned_work[node]) < 2:
                self._reschedule(node)  # a worker holding one test waits for a next one or a shutdown


def make_scheduler(config: pytest.Config, log: Any, groups_folder: str | None = None) -> LoadGroupScheduling | None:
    """The scheduler for this session: the fixed one for ``--dist=loadgroup``, else xdist's own (None)."""
    if getattr(config.option, "dist", None) == "loadgroup":
        return CrashSafeLoadGroupScheduling(config, log, groups_folder)
    return None
