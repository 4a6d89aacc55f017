"""The triage plugin: a failing test's report gets its triage on top (see :mod:`pytest_xla_dynamo.triage`).

A ``tryfirst`` ``pytest_runtest_makereport`` wrapper registered after the known-issues plugin's, so it
sees the final report (xfails applied and judged). For a failed call it takes the triage the engine
kept on the item, or triages the exception itself where the test uses the plugin's XLA fixtures,
matches it against the registry, puts the header on the report and adds the triage as a user property
(``xla_triage``, JSON), which travels with the report (xdist, isolated tests). An exception whose
:data:`~pytest_xla_dynamo.core.stages.TRIAGED` attribute is true carries a triage made elsewhere (a timing
process's report, in its message) and gets none on top. No torch here.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.core.stages import TRIAGED, class_names
from pytest_xla_dynamo.triage import Triage, for_item, recalled
from pytest_xla_dynamo.triage.longrepr import decorate

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

PROP_TRIAGE = "xla_triage"


def _param(item: pytest.Item, name: str) -> str:
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get(name) if callspec is not None else None
    if value is None:
        return ""
    return value if isinstance(value, str) else str(getattr(value, "name", value))


class TriagePlugin:
    """Puts each failure's triage on its report."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session

    def _generic(self, item: pytest.Item, exc: BaseException) -> Triage | None:
        """The triage of a failure outside the engines (a test using the plugin's XLA fixtures)."""
        from pytest_xla_dynamo import collection
        from pytest_xla_dynamo.known_issues import applied_issue
        from pytest_xla_dynamo.known_issues.apply import test_modes
        from pytest_xla_dynamo.repro import repro_command

        if not collection.needs_xla(item):
            return None
        applied = applied_issue(item)
        backend = _param(item, "xla_backend")
        repro = repro_command(item.nodeid, self.session.xcfg, backend, registry_off=applied is not None,
                              prefix=self.session.repro_prefix) if backend else ""
        modes = test_modes(item)
        return for_item(item, exc, model=_param(item, "xla_model"), backend=backend,
                        mode=modes[0] if len(modes) == 1 else "", repro=repro)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        rep = yield
        if (self.session.xcfg.triage == "off" or rep.when != "call" or not rep.failed or call.excinfo is None
                or isinstance(rep.longrepr, str | tuple)):
            return rep
        exc = call.excinfo.value
        if getattr(exc, TRIAGED, False):
            return rep
        triage = recalled(item)
        if triage is None or (triage.exc_names and triage.exc_names[0] not in class_names(exc)):
            triage = self._generic(item, exc)
        if triage is None:
            return rep
        from pytest_xla_dynamo.known_issues.plugin import session_registry
        from pytest_xla_dynamo.versions import installed_versions

        registry = session_registry(self.session.config)
        triage.analyze(registry if registry is not None else (), installed_versions())
        config = item.config
        style = "long" if config.option.fulltrace else str(config.option.tbstyle)
        tag = triage.where.stage if triage.where else ""
        if triage.matches:
            tag = f"{tag}; {triage.matches[0].entry.id}" if tag else triage.matches[0].entry.id
        decorate(rep, triage.header(), call.excinfo, style=style, test_path=_path(item), tag=tag)
        rep.user_properties.append((PROP_TRIAGE, json.dumps(triage.to_dict())))
        return rep


def _path(item: pytest.Item) -> Path | None:
    path: Any = getattr(item, "path", None)
    return Path(path) if path is not None else None
