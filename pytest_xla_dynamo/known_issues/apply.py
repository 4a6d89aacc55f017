"""Applying the registry at collection: which entry a test matches, and the xfail, skip or isolation it gets.

A test matches an entry by its function name (``item.originalname``) and its parameters
(``xla_model``, ``xla_backend``, the ``xla_mode`` marker), or through its
``@pytest.mark.xla_known_issue(id, **fields)`` marker. Where the installed versions are affected it
gets ``xfail(strict=True)`` (policy ``xfail``; ``raises=`` a builtin exception class, a dotted path is
matched by name when the test fails, :mod:`.exceptions`) or a skip (policy ``skip``); where they are not,
it is a regression test. A known crash is also isolated, so it cannot end the session.
What was applied is kept in the item's stash (:func:`applied_issue`) and travels with its reports
as user properties. No torch here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_xla_dynamo.known_issues.exceptions import RegistryError, builtin_exception, exception_matches
from pytest_xla_dynamo.known_issues.registry import (
    DISTRIBUTIONS,
    FIELDS,
    FILTERS,
    KnownIssue,
    Registry,
    parse_entry,
    unknown_names,
)
from pytest_xla_dynamo.markers import base_nodeid

# user_properties keys: they travel with the reports (xdist workers, isolated children)
PROP_ID = "xla_known_issue"
PROP_INFO = "xla_known_issue_info"
PROP_OUTCOME = "xla_known_issue_outcome"
PROP_HINT = "xla_known_issue_hint"

# the marker's keyword arguments: the fields, plus one shorthand per distribution (torch_xla=">=2.9")
MARKER_KWARGS = tuple(f for f in FIELDS if f not in ("id", "tests")) + DISTRIBUTIONS
#: what a test gets: a strict xfail, a skip, a regression test (not affected), or nothing (policy run)
ACTIONS = ("xfail", "skip", "regression", "run")


class KnownCrash(Exception):  # never raised: a crash entry's xfail accepts no exception
    """Placeholder ``raises=`` of a crash entry's xfail: an ordinary exception is not the crash."""


@dataclass(frozen=True)
class Applied:
    """What the plugin did with a test: the entry, whether the versions are affected, the action
    (one of :data:`ACTIONS`)."""

    entry: KnownIssue
    affected: bool
    action: str
    exc_type: type[BaseException] | None = None  # the xfail's ``raises=``: a builtin class (a dotted path
    # is matched by name at judge time: no import at collection)

    def explains(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the failure the entry records, as the judge checks a strict xfail: its class
        (``raises``), its message (``match``) and its diverging tensors (``diverging``)."""
        entry = self.entry
        if entry.raises and not exception_matches(entry.raises, exc):
            return False
        if not entry.matches(str(exc)):
            return False
        return not entry.unexplained(getattr(exc, "diverging", None) or ())


applied_key = pytest.StashKey[Applied]()


def applied_issue(item: pytest.Item) -> Applied | None:
    """The known issue applied to ``item`` at collection (None: no entry matches it)."""
    return item.stash.get(applied_key, None)


def test_modes(item: pytest.Item) -> list[str]:
    """The modes of ``item``: its ``xla_mode`` markers' arguments and an ``xla_mode`` parameter."""
    modes: list[str] = []
    for marker in item.iter_markers("xla_mode"):
        modes.extend(a for a in marker.args if isinstance(a, str))
    callspec = getattr(item, "callspec", None)
    for param in ("xla_mode", "xla_direction"):  # an op case's direction counts as its mode
        if callspec is not None and isinstance(callspec.params.get(param), str):
            modes.append(callspec.params[param])
    return modes


test_modes.__test__ = False  # type: ignore[attr-defined]  # not a test, whatever pytest collects


def marker_entry(registry: Registry, marker: pytest.Mark, where: str) -> KnownIssue:
    """The entry of ``@pytest.mark.xla_known_issue(id, **fields)``: a registry entry with the
    keyword arguments laid over it, or a new entry defined by them."""
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise RegistryError(f"{where}: @pytest.mark.xla_known_issue takes one positional argument, "
                            "the issue id, e.g. xla_known_issue('pytorch/xla#4174')")
    issue_id = marker.args[0]
    unknown = sorted(set(marker.kwargs) - set(MARKER_KWARGS))
    if unknown:
        raise RegistryError(f"{where}: @pytest.mark.xla_known_issue({issue_id!r}): unknown keyword "
                            f"argument(s) {', '.join(unknown)}; valid: {', '.join(MARKER_KWARGS)}")
    base = registry.get(issue_id)
    if base is None and not marker.kwargs:
        raise RegistryError(f"{where}: known issue {issue_id!r} is not in the registry: give its fields "
                            "as keyword arguments (raises=..., match=..., torch_xla=...) or add it to "
                            "a --xla-known-issues-file")
    data: dict[str, Any] = {}
    if base is not None:
        data = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.name in FIELDS}
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
    data["id"] = issue_id
    affects = dict(data.get("affects", {}))
    affects.update(marker.kwargs.get("affects", {}))
    for dist in DISTRIBUTIONS:
        if dist in marker.kwargs:
            affects[dist] = marker.kwargs[dist]
    data.update({k: v for k, v in marker.kwargs.items() if k not in DISTRIBUTIONS and k != "affects"})
    data["affects"] = affects
    if base is None:
        data.setdefault("kind", "crash" if data.get("signal") else "error")
    data.pop("tests", None)
    if base is not None and not (set(marker.kwargs) - set(FILTERS)):
        narrowed: dict[str, Any] = {name: tuple(data.get(name, ())) for name in FILTERS}
        try:  # the filters a marker narrows by are validated as a file's are
            parse_entry({**data, **{k: list(v) for k, v in narrowed.items()}}, source="marker")
        except RegistryError as exc:
            raise _at(exc, where, issue_id) from None
        return dataclasses.replace(base, **narrowed)
    try:
        return parse_entry(data, source="marker", line=None)
    except RegistryError as exc:
        raise _at(exc, where, issue_id) from None


def _at(exc: RegistryError, where: str, issue_id: str) -> RegistryError:
    """``exc`` of a marker's entry, said at the test (its node id) rather than at ``marker``."""
    text = str(exc)
    prefix = f"marker: known issue {issue_id!r}: "
    text = text[len(prefix):] if text.startswith(prefix) else text
    return RegistryError(f"{where}: @pytest.mark.xla_known_issue({issue_id!r}): {text}")


#: the session's backend names (aliases included) and model names, for a marker's ``backends``/``models``
Names = tuple[Sequence[str], Sequence[str]]


def match_item(registry: Registry, item: pytest.Item, policy: str, tier: str | None = None,
               names: Names | None = None) -> Applied | None:
    """The entry that applies to ``item`` at ``tier`` (markers first, then the registry): the first whose
    versions are affected, else the first that matches; and what ``policy`` makes of it. ``names``: check
    a marker's ``backends`` and ``models`` against them."""
    name = getattr(item, "originalname", None) or item.name
    callspec = getattr(item, "callspec", None)
    params: Mapping[str, Any] = callspec.params if callspec is not None else {}
    modes = test_modes(item)
    candidates: list[KnownIssue] = []
    for marker in item.iter_markers("xla_known_issue"):
        entry = marker_entry(registry, marker, base_nodeid(item))
        unknown = unknown_names([entry], *names) if names is not None else []
        if unknown:
            raise RegistryError(f"{base_nodeid(item)}: @pytest.mark.xla_known_issue({entry.id!r}): "
                                + unknown[0].split(f"known issue {entry.id!r}: ", 1)[-1])
        if entry.applies_to(name, params, modes, by_marker=True, tier=tier):
            candidates.append(entry)
    candidates += [e for e in registry.for_test(name) if e.applies_to(name, params, modes, tier=tier)]
    if not candidates:
        return None
    affected = [e for e in candidates if e.affected()]
    entry = affected[0] if affected else candidates[0]
    if policy == "run":
        action = "run"
    elif not affected:
        action = "regression"
    else:
        action = policy  # "xfail" | "skip"
    exc_type = builtin_exception(entry.raises) if action == "xfail" and entry.kind != "crash" else None
    return Applied(entry, bool(affected), action, exc_type)


def apply_to_items(registry: Registry, items: list[pytest.Item], policy: str,
                   tier: str | None = None, names: Names | None = None) -> list[str]:
    """Match (at the run's ``tier``) and mark every item (stash, user properties, xfail/skip/isolation markers); the
    registry errors met on the way (each once, sorted: the same message whatever the test order),
    for one usage error."""
    errors: list[str] = []
    for item in items:
        try:
            applied = match_item(registry, item, policy, tier, names)
        except RegistryError as exc:
            errors.append(str(exc))
            continue
        if applied is not None:
            _mark(item, applied)
    return sorted(set(errors))


def _mark(item: pytest.Item, applied: Applied) -> None:
    entry = applied.entry
    item.stash[applied_key] = applied
    info = {**entry.to_info(), "action": applied.action, "affected": applied.affected}
    item.user_properties.append((PROP_ID, entry.id))
    item.user_properties.append((PROP_INFO, json.dumps(info)))
    if applied.action == "xfail":
        raises: type[BaseException] | None = KnownCrash if entry.kind == "crash" else applied.exc_type
        kwargs: dict[str, Any] = {"strict": True, "reason": entry.reason}
        if raises is not None:
            kwargs["raises"] = raises
        item.add_marker(pytest.mark.xfail(**kwargs))
    elif applied.action == "skip":
        item.add_marker(pytest.mark.skip(reason=f"known issue {entry.reason} (--xla-known-issues=skip)"))
    if entry.kind == "crash" and applied.affected and applied.action != "skip" \
            and item.get_closest_marker("xla_isolated") is None:
        item.add_marker(pytest.mark.xla_isolated)  # a crash must not end the session
