"""Triage: what a failing case says on top of its traceback.

* :mod:`.stages` - the stage of a step an exception surfaced in, written on the exception
* :mod:`.matching` - registry entries an undeclared failure matches; snippets to declare it
* :mod:`.report` - :class:`Triage`, one failing case triaged, and how it reads
* :mod:`.localize` - the first submodule whose output or gradient diverges (torch)
* :mod:`.graph_split` - the seed's graph-size diagnosis on a failing case (torch)
* :mod:`.longrepr` - the header put on top of pytest's failure report
* :mod:`.plugin` - :class:`TriagePlugin`, the report hook

The engines (parity, graphs, timing) fill a :class:`Triage` and keep it on the test item
(:func:`remember`); the plugin renders it, or triages a failure outside the engines from the test's
parameters. ``--xla-triage`` says how far it goes: ``auto`` (default), ``full``, ``summary``, ``off``.
Importing this package imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.core.stages import STAGES, Where, stage, where_of
from pytest_xla_dynamo.triage.report import Triage

if TYPE_CHECKING:
    from pytest_xla_dynamo.known_issues import Applied

triage_key = pytest.StashKey[Triage]()


def remember(item: pytest.Item, triage: Triage) -> None:
    """Keep ``triage`` on ``item`` for its report (the last one of the test wins)."""
    item.stash[triage_key] = triage


def recalled(item: pytest.Item) -> Triage | None:
    return item.stash.get(triage_key, None)


def for_item(item: pytest.Item, exc: BaseException, **fields: Any) -> Triage:
    """``exc``'s triage as a failure of the test ``item``: its function name and node id, and the known issue the
    registry applied to it; ``fields``: the case (model, backend, mode, status, repro)."""
    from pytest_xla_dynamo.known_issues import applied_issue

    applied = applied_issue(item)
    return Triage.from_exception(exc, test=getattr(item, "originalname", None) or item.name, nodeid=item.nodeid,
                                 known=applied.entry.id if applied else "",
                                 known_action=applied.action if applied else "", **fields)


def wants_deep_triage(policy: str, applied: Applied | None) -> bool:
    """Whether an accuracy failure gets the reruns (localization, graph split): ``full`` always,
    ``auto`` unless the registry xfails the test (a known failure needs no new diagnosis)."""
    if policy == "full":
        return True
    return policy == "auto" and (applied is None or applied.action != "xfail")


__all__ = ["STAGES", "Triage", "Where", "for_item", "recalled", "remember", "stage", "triage_key", "wants_deep_triage",
           "where_of"]
