"""Sharding (``--xla-shard=I/N``): which of the collected tests this CI shard runs.

A collection filter: tests are grouped (all tests of one model or of one op together, else all
parametrizations of one test function), the groups assigned to shards balanced by test count, from the group keys and
sizes alone, so every CI shard and every xdist worker that collects the same tests computes the same
split whatever the collection order (``-p randomly`` included). The counts are kept on the session
(:attr:`~pytest_xla_dynamo.session.XlaSession.shard_counts`; an xdist worker's reach the controller
through the session's xdist hook). No torch here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession


def shard_group_key(item: pytest.Item) -> str:
    """The sharding group of a test: its model (``xla_model`` parameter) or its op (``xla_op``: the op suite's cases
    of one op together) when it has one, else its module path and function name (all parametrizations of one test
    function stay together)."""
    callspec = getattr(item, "callspec", None)
    params = getattr(callspec, "params", None) or {}
    model = params.get("xla_model")
    if model is not None:
        return f"model:{getattr(model, 'name', model)}"
    if params.get("xla_op") is not None:
        return f"op:{params['xla_op']}"
    return "test:" + item.nodeid.split("[", 1)[0]


def assign_shards(group_sizes: Mapping[str, int], total: int) -> dict[str, int]:
    """Assign groups to ``total`` shards (0-based), balanced by test count, deterministically.

    Greedy longest-first: groups sorted by (size descending, key), each to the least loaded shard
    (lowest index on ties). Depends only on the group keys and sizes, so every xdist worker and
    every CI shard that collects the same tests computes the same split.
    """
    if total < 1:
        raise ValueError("total must be >= 1")
    loads = [0] * total
    out: dict[str, int] = {}
    for key in sorted(group_sizes, key=lambda k: (-group_sizes[k], k)):
        index = min(range(total), key=lambda s: (loads[s], s))
        out[key] = index
        loads[index] += group_sizes[key]
    return out


def shard_items(items: Sequence[pytest.Item], index: int, total: int) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """Split ``items`` for shard ``index`` of ``total`` (1-based, as ``--xla-shard=I/N``):
    ``(selected, deselected)``, both in collection order."""
    keys = [shard_group_key(item) for item in items]
    shards = assign_shards(Counter(keys), total)
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item, key in zip(items, keys, strict=True):
        (selected if shards[key] == index - 1 else deselected).append(item)
    return selected, deselected


def shard_line(shard: tuple[int, int] | None, counts: tuple[int, int] | None) -> str:
    """``shard I/N: S of C tests`` (``shard I/N`` before the counts are known; ``""`` without a shard)."""
    if shard is None:
        return ""
    index, total = shard
    if counts is None:
        return f"shard {index}/{total}"
    return f"shard {index}/{total}: {counts[0]} of {counts[1]} tests"


class ShardingPlugin:
    """``--xla-shard=I/N``: deselects the other shards' tests, last (after ``-k``/``-m``)."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.shard = session.xcfg.shard

    @property
    def line(self) -> str:
        return shard_line(self.shard, self.session.shard_counts)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [f"xla-dynamo: shard {self.shard[0]}/{self.shard[1]}"] if self.shard is not None else []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """Keep this shard's tests; the counts go to the session (sent back by an xdist worker)."""
        if self.shard is None:
            return
        selected, deselected = shard_items(items, *self.shard)
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = selected
        self.session.shard_counts = (len(selected), len(selected) + len(deselected))

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        return [self.line] if self.shard is not None and self.session.shard_counts is not None else []
