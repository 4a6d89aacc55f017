"""Tests of pytest_xla_dynamo.known_issues.apply: marker entries, and matching collected tests to entries
with the markers and properties they get (real pytest items, collected in process without the plugin)."""

from __future__ import annotations

import json
import re

import pytest

from pytest_xla_dynamo.known_issues.apply import (
    PROP_ID,
    PROP_INFO,
    Applied,
    KnownCrash,
    applied_issue,
    apply_to_items,
    marker_entry,
    match_item,
    test_modes,
)
from pytest_xla_dynamo.known_issues.exceptions import RegistryError
from pytest_xla_dynamo.known_issues.registry import KnownIssue, Registry, parse_entry

pytest_plugins = ["pytester"]


def entry(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"id": "local:x", "title": "t", "kind": "error", "raises": "ValueError"}
    base.update(kw)
    return base


def test_marker_entry_merges_over_the_registry() -> None:
    registry = Registry([parse_entry(entry(id="local:base", match="m", affects={"torch_xla": ">=2"}),
                                     source="r.toml", line=3)])
    merged = marker_entry(registry, pytest.mark.xla_known_issue("local:base", torch_xla="<1").mark, "t")
    assert merged.affects == {"torch_xla": "<1"} and merged.match == "m" and merged.source == "marker"
    filtered = marker_entry(registry, pytest.mark.xla_known_issue("local:base", models=["m1"]).mark, "t")
    assert filtered.models == ("m1",) and filtered.source == "r.toml" and filtered.line == 3
    assert isinstance(filtered, KnownIssue)
    by_tier = marker_entry(registry, pytest.mark.xla_known_issue("local:base", tiers=["full"]).mark, "t")
    assert by_tier.tiers == ("full",) and by_tier.source == "r.toml"


def test_marker_entry_errors() -> None:
    registry = Registry()
    with pytest.raises(RegistryError, match=r"t: @pytest.mark.xla_known_issue takes one positional argument"):
        marker_entry(registry, pytest.mark.xla_known_issue().mark, "t")
    with pytest.raises(RegistryError, match=re.escape(
            "t: @pytest.mark.xla_known_issue('local:y'): unknown keyword argument(s) colour; valid: affects, title, "
            "url, kind, raises, match, signal, reproducer, status, fixed_in, notes, signature, backends, modes, "
            "models, ops, tiers, cpus, related, diverging, torch, torch_xla")):
        marker_entry(registry, pytest.mark.xla_known_issue("local:y", colour="red").mark, "t")
    with pytest.raises(RegistryError, match="known issue 'local:y' is not in the registry"):
        marker_entry(registry, pytest.mark.xla_known_issue("local:y").mark, "t")
    crash = marker_entry(registry, pytest.mark.xla_known_issue("local:c", signal="SIGABRT").mark, "t")
    assert crash.kind == "crash" and crash.source == "marker"


TESTS = """
import pytest

def test_error():
    pass

def test_crash():
    pass

@pytest.mark.xla_mode("train")
@pytest.mark.parametrize("xla_backend", ["eager", "inductor"])
def test_backends(xla_backend):
    pass

@pytest.mark.xla_mode("infer")
def test_inference():
    pass

def test_fixed():
    pass

@pytest.mark.xla_known_issue("local:by-marker", raises="KeyError", torch_xla=">=0.1")
def test_marker():
    pass

def test_plain():
    pass
"""


def _registry() -> Registry:
    affected = {"torch_xla": ">=0.1"}
    return Registry([
        parse_entry(entry(id="local:error", reproducer="test_error", affects=affected, raises="KeyError"), source="r"),
        parse_entry(entry(id="local:crash", kind="crash", raises="", signal="SIGSEGV", reproducer="test_crash",
                          affects=affected), source="r"),
        parse_entry(entry(id="local:eager", tests=["test_backends", "test_inference"], backends=["eager"],
                          modes=["train"], affects=affected), source="r"),
        parse_entry(entry(id="local:fixed", reproducer="test_fixed", affects={"torch_xla": "<0.1"}), source="r"),
        parse_entry(entry(id="local:plain-full", reproducer="test_plain", tiers=["full"], affects=affected),
                    source="r"),
    ])


@pytest.fixture
def items(pytester: pytest.Pytester) -> dict[str, pytest.Item]:
    pytester.makepyfile(test_demo=TESTS)
    found, _ = pytester.inline_genitems("-p", "no:xla_dynamo", "-p", "no:randomly", "-W", "ignore")
    return {item.name: item for item in found}


def test_match_item_and_policies(items: dict[str, pytest.Item]) -> None:
    registry = _registry()
    assert test_modes(items["test_backends[eager]"]) == ["train"]
    actions = {name: (a.entry.id, a.action, a.affected) if (a := match_item(registry, item, "xfail", "small")) else None
               for name, item in items.items()}
    assert actions == {
        "test_error": ("local:error", "xfail", True),
        "test_crash": ("local:crash", "xfail", True),
        "test_backends[eager]": ("local:eager", "xfail", True),
        "test_backends[inductor]": None,  # filtered out by its backend
        "test_inference": None,  # filtered out by its mode
        "test_fixed": ("local:fixed", "regression", False),
        "test_marker": ("local:by-marker", "xfail", True),
        "test_plain": None,  # its entry holds at the full tier only
    }
    at_full = match_item(registry, items["test_plain"], "xfail", "full")
    assert at_full is not None and at_full.entry.id == "local:plain-full"
    assert match_item(registry, items["test_error"], "xfail", "full") is not None  # no tiers: any tier
    error = match_item(registry, items["test_error"], "xfail")
    assert error is not None and error.exc_type is KeyError
    crash = match_item(registry, items["test_crash"], "xfail")
    assert crash is not None and crash.exc_type is None  # a crash has no exception
    for policy, affected_action in (("run", "run"), ("skip", "skip")):
        assert [match_item(registry, items[n], policy).action for n in ("test_error", "test_fixed")] == [  # type: ignore[union-attr]
            affected_action, "run" if policy == "run" else "regression"]


def test_apply_to_items_marks_them(items: dict[str, pytest.Item]) -> None:
    errors = apply_to_items(_registry(), list(items.values()), "xfail", "small")
    assert errors == []
    error = items["test_error"]
    xfail = error.get_closest_marker("xfail")
    assert xfail is not None and xfail.kwargs == {"strict": True, "reason": "local:error: t", "raises": KeyError}
    props = dict(error.user_properties)
    assert props[PROP_ID] == "local:error"
    info = json.loads(str(props[PROP_INFO]))
    assert info["action"] == "xfail" and info["affected"] is True and info["source"] == "r"
    crash = items["test_crash"]
    crash_xfail = crash.get_closest_marker("xfail")
    assert crash_xfail is not None and crash_xfail.kwargs["raises"] is KnownCrash
    assert crash.get_closest_marker("xla_isolated") is not None  # a known crash must not end the session
    assert items["test_fixed"].get_closest_marker("xfail") is None
    fixed = applied_issue(items["test_fixed"])
    assert fixed is not None and fixed.action == "regression"
    assert applied_issue(items["test_plain"]) is None and items["test_plain"].user_properties == []


def test_apply_to_items_skip_policy(items: dict[str, pytest.Item]) -> None:
    assert apply_to_items(_registry(), list(items.values()), "skip") == []
    skip = items["test_error"].get_closest_marker("skip")
    assert skip is not None and skip.kwargs["reason"] == "known issue local:error: t (--xla-known-issues=skip)"
    assert items["test_crash"].get_closest_marker("xla_isolated") is None  # skipped: nothing to isolate


def test_apply_to_items_collects_errors_once(items: dict[str, pytest.Item]) -> None:
    registry = Registry([parse_entry(entry(id="local:bad", reproducer="test_error", raises="json.NoSuchThing",
                                           affects={"torch_xla": ">=0.1"}), source="r.toml")])
    # a dotted raises= is no longer imported at collection (a registry file must not pick code to run): a name
    # that resolves to nothing is not a collection error but a failure when the test fails (test_faults_registry)
    errors = apply_to_items(registry, [items["test_error"], items["test_error"]], "xfail")
    assert errors == []
    xfail = items["test_error"].get_closest_marker("xfail")
    assert xfail is not None and "raises" not in xfail.kwargs  # never widened: the judge matches the class by name
    markers = [items["test_marker"], items["test_plain"]]
    bad = pytest.mark.xla_known_issue("local:unknown")
    for item in markers:
        item.add_marker(bad)
    errors = apply_to_items(Registry(), markers[::-1], "xfail")
    assert errors == apply_to_items(Registry(), markers, "xfail")  # the same whatever the test order
    assert [e.split(":")[2] for e in errors] == ["test_marker", "test_plain"]


def test_applied_explains_only_the_recorded_failure() -> None:
    """The record of a declared case names its entry only for the failure the entry records."""

    class Diverged(ValueError):
        diverging = ("buffer bn.running_var", "grad conv.weight")

    known = parse_entry(entry(id="local:k", match="step 1, buffer", diverging=["buffer *running_var"]), source="r")
    applied = Applied(known, True, "xfail", ValueError)
    assert applied.explains(ValueError("fail_accuracy: step 1, buffer bn.running_var: ..."))
    assert not applied.explains(ValueError("fail_accuracy: step 1, grad conv.weight: ..."))  # another message
    assert not applied.explains(KeyError("step 1, buffer bn.running_var"))  # another class
    assert not applied.explains(Diverged("step 1, buffer bn.running_var"))  # a tensor beyond its diverging
