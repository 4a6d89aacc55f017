"""The known-issues plugin: the pytest hooks that load, apply and judge the registry and print its summary.

``plugin.py`` registers one :class:`KnownIssuesPlugin` per session (after the session object). It
loads the registry from the packaged file, ``--xla-known-issues-file`` and the
``pytest_xla_known_issues`` hook (a bad entry is a usage error), puts it on the pytest config's stash
(:func:`session_registry`), applies it at collection (``tryfirst``), judges each report (a
``tryfirst`` ``pytest_runtest_makereport`` wrapper) and, where this process reports, prints the
summary from the reports it received (also under pytest-xdist). No torch here.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.known_issues.apply import applied_issue, apply_to_items
from pytest_xla_dynamo.known_issues.exceptions import RegistryError
from pytest_xla_dynamo.known_issues.judge import judge
from pytest_xla_dynamo.known_issues.registry import Registry, hook_entries, load_registry, unknown_names
from pytest_xla_dynamo.known_issues.summary import OutcomeLog, summary_lines
from pytest_xla_dynamo.versions import installed_versions

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

#: the session's registry as the known-issues plugin loaded it (read through :func:`session_registry`)
REGISTRY_KEY = pytest.StashKey[Registry]()


def session_registry(config: pytest.Config) -> Registry | None:
    """The registry the known-issues plugin loaded for this session (None: the plugin is not registered)."""
    return config.stash.get(REGISTRY_KEY, None)


class KnownIssuesPlugin:
    """Applies the registry at collection, judges the outcomes, and prints the summary."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.config = session.config
        self.policy = session.xcfg.known_issues
        from pytest_xla_dynamo.zoo import model_names

        backends = session.backends
        self.names = ([*backends.names(), *backends.aliases], model_names())
        try:
            entries = hook_entries(self.config.hook.pytest_xla_known_issues())
            self.registry: Registry = load_registry(session.xcfg.known_issues_files, entries)
        except RegistryError as exc:
            raise pytest.UsageError(f"known issues: {exc}") from None
        unknown = unknown_names(self.registry, *self.names)
        if unknown:
            raise pytest.UsageError("known issues: filters that name no backend or model of this session:\n"
                                    + "\n".join(unknown))
        self.config.stash[REGISTRY_KEY] = self.registry
        self.log = OutcomeLog()  # filled from reports (on the xdist controller too)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        errors = apply_to_items(self.registry, items, self.policy, self.session.xcfg.tier, self.names)
        if errors:
            raise pytest.UsageError("known issues:\n" + "\n".join(errors))

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        versions = installed_versions()
        affected = sum(1 for e in self.registry if e.affected(versions))
        return [f"xla-dynamo known issues: {len(self.registry)} entries, {affected} affect the installed "
                f"versions; policy {self.policy}"]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                             pytest.TestReport]:
        rep = yield
        applied = applied_issue(item)
        if applied is not None:
            judge(applied, call, rep, runxfail=bool(self.config.option.runxfail))
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.session.reports_here:
            self.log.add(report)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self.session.reports_here or not self.log:
            return
        for line in summary_lines(self.log.outcomes()):
            if line.startswith("="):
                terminalreporter.write_sep("=", line.strip("= "))
            else:
                terminalreporter.write_line(line)
