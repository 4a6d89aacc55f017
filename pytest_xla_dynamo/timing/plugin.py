"""The timing wing's plugin: resolves the timing settings (:mod:`pytest_xla_dynamo.timing.settings`) and applies
the thread budget of :mod:`pytest_xla_dynamo.timing.threads` and the page set-up to the session.

``PJRT_NPROC`` is set once collection has selected a timing test (before any test starts the XLA runtime)
and put back at unconfigure; the budget as applied is the session's (:func:`session_budget`). At the same
moment, with ``xla_placements=fresh``, malloc's mmap threshold is fixed for the process
(:func:`pytest_xla_dynamo.timing.placement.fresh_pages`): before any model is built, so that the heap never grows
large blocks a later step could reuse (fixed after a warm-up, it changes nothing: the heap's free blocks serve the
steps); with ``xla_placements=huge``, torch's CPU allocator is told to ask for huge pages
(:func:`pytest_xla_dynamo.timing.placement.huge_pages`, ``THP_MEM_ALLOC_ENABLE=1``, put back at unconfigure): torch
reads it at its first CPU allocation, which has to come after this.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from pytest_xla_dynamo.timing import settings as _settings
from pytest_xla_dynamo.timing.placement import FRESH_THRESHOLD, THP_ENV, fresh_pages, huge_pages
from pytest_xla_dynamo.timing.threads import XLA_THREADS_ENV, ThreadBudget, budget_for, set_xla_threads
from pytest_xla_dynamo.workers.isolation import SELF_ISOLATING_KEY

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

#: the budget as the plugin applied it, on the pytest config's stash (read through :func:`session_budget`)
BUDGET_KEY = pytest.StashKey[ThreadBudget]()


def session_budget(session: XlaSession) -> ThreadBudget:
    """The session's thread budget as :class:`TimingPlugin` applied it, or (without that plugin) the settings' own,
    whose XLA part says it was not applied."""
    budget = session.config.stash.get(BUDGET_KEY, None)
    if budget is not None:
        return budget
    threads = _settings.timing_settings(session.config).threads
    return budget_for(threads, xla="not set (the timing plugin is not registered)")


class TimingPlugin:
    """The timing wing in a session: its settings, resolved once (given, or read from the options), on the config's
    stash; the thread budget applied where the session times something: once collection has selected a test that
    uses ``xla_timing`` (before any test starts the XLA runtime), ``PJRT_NPROC`` is set; it is restored at
    unconfigure, and with ``xla_placements=fresh`` malloc's pages are fixed (for good: the process's malloc cannot
    be put back). A session without timing tests (parity, graphs, the plugin's own tests) keeps XLA:CPU's default
    threads and malloc's default."""

    def __init__(self, session: XlaSession, settings: _settings.TimingSettings | None = None) -> None:
        self.config = session.config
        self.session = session
        if settings is None:
            settings = _settings.resolve(session.config, backends=session.backends.names(),
                                         backend_aliases=session.backends.aliases)
        self.settings = settings
        session.config.stash[_settings.KEY] = settings
        if settings.timing_processes > 1:  # each timing test measures in children of its own (timing.across)
            session.config.stash[SELF_ISOLATING_KEY] = frozenset({"xla_timing"})
        self._saved = {XLA_THREADS_ENV: os.environ.get(XLA_THREADS_ENV)}  # the variables set here, as they were
        self._applied = False
        self.budget = budget_for(settings.threads, xla="not set (no timing test in this session)")
        session.config.stash[BUDGET_KEY] = self.budget

    def apply(self) -> ThreadBudget:
        """Set XLA:CPU's threads (and, with ``xla_placements=fresh``, malloc's pages; with ``huge``, torch's huge
        pages) now (idempotent) and return the budget as applied."""
        if not self._applied:
            self._applied = True
            if self.settings.placements == "fresh":
                fresh_pages()
            if self.settings.placements == "huge":
                self._saved[THP_ENV] = huge_pages()
            self.budget = replace(self.budget, xla=set_xla_threads(self.budget.threads))
            self.session.config.stash[BUDGET_KEY] = self.budget
        return self.budget

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        if any("xla_timing" in getattr(item, "fixturenames", ()) for item in items):
            self.apply()

    def pytest_report_collectionfinish(self, config: pytest.Config) -> str | None:
        if not self._applied:
            return None
        b = self.budget
        pages = {"fresh": f"; malloc: fresh pages for blocks >= {FRESH_THRESHOLD // 1024} KB",
                 "huge": f"; torch's CPU allocator: huge pages ({THP_ENV}=1)"}.get(self.settings.placements, "")
        return f"xla-dynamo timing threads: {b.threads} ({b.choice}, {b.cores} cores; XLA:CPU {b.xla}){pages}"

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if not self._applied:
            return
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
