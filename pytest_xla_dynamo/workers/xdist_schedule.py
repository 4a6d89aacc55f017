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
plugin's choice under ``-n``). It changes what happens after a crash only.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling


class CrashSafeLoadGroupScheduling(LoadGroupScheduling):
    """``LoadGroupScheduling`` that requeues only what a dead worker left undone, without the test it
    died in, and gives a replacement worker enough work (or a shutdown) to run."""

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


def make_scheduler(config: pytest.Config, log: Any) -> LoadGroupScheduling | None:
    """The scheduler for this session: the fixed one for ``--dist=loadgroup``, else xdist's own (None)."""
    if getattr(config.option, "dist", None) == "loadgroup":
        return CrashSafeLoadGroupScheduling(config, log)
    return None
