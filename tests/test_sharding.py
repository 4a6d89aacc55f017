"""Sharding (``--xla-shard=I/N``): a deterministic, order-independent partition that keeps a model's tests together.

The split is tested as pure functions, then in pytester sessions: three shards of one collection,
and one shard under pytest-xdist (every worker must select the same tests).
"""

from __future__ import annotations

import random
import re
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_xla_dynamo.workers.sharding import assign_shards, shard_group_key, shard_items, shard_line

pytest_plugins = ["pytester"]


def _item(nodeid: str, model: str | None = None) -> Any:
    callspec = SimpleNamespace(params={"xla_model": model}) if model else None
    return SimpleNamespace(nodeid=nodeid, callspec=callspec)


def _items() -> list[Any]:
    items = [_item(f"suites/{suite}.py::t[{m}-{b}]", m) for suite in ("train", "infer", "graphs")
             for m in ("resnet18", "alexnet", "vgg16", "BERT_pytorch", "mobilenet_v2") for b in ("once", "every")]
    items += [_item(f"tests/x.py::test_{i}[{j}]") for i in range(4) for j in range(i + 1)]
    return items


def test_shard_group_key() -> None:
    assert shard_group_key(_item("suites/t.py::test_x[resnet18-trace_once]", "resnet18")) == "model:resnet18"
    assert shard_group_key(_item("tests/t.py::C::test_y[3]")) == "test:tests/t.py::C::test_y"
    assert shard_group_key(_item("tests/t.py::test_z")) == "test:tests/t.py::test_z"
    op_case = SimpleNamespace(nodeid="suites/test_ops.py::test_op[add-trace_once-forward]",
                              callspec=SimpleNamespace(params={"xla_op": "add", "xla_direction": "forward"}))
    assert shard_group_key(op_case) == "op:add"  # type: ignore[arg-type]  # an op's cases together, the ops spread over the shards


def test_shards_are_a_deterministic_partition_that_keeps_groups() -> None:
    items = _items()
    for total in (1, 2, 3, 4, 7):
        shards = [shard_items(items, i, total) for i in range(1, total + 1)]
        selected = [sel for sel, _ in shards]
        assert sum(len(s) for s in selected) == len(items)  # disjoint ...
        assert {id(x) for s in selected for x in s} == {id(x) for x in items}  # ... and complete
        for sel, desel in shards:
            assert len(sel) + len(desel) == len(items)
            assert [x for x in items if x in sel] == sel  # collection order kept
        groups = [{shard_group_key(x) for x in s} for s in selected]
        for a in range(total):
            for b in range(a + 1, total):
                assert not groups[a] & groups[b]  # a model's tests are never split
        assert shards == [shard_items(list(items), i, total) for i in range(1, total + 1)]  # deterministic
    loads = [len(s) for s, _ in (shard_items(items, i, 3) for i in (1, 2, 3))]
    assert max(loads) - min(loads) <= 6  # balanced to within one model (6 tests)


def test_shards_do_not_depend_on_collection_order() -> None:
    """pytest-randomly (or any reordering plugin) may shuffle the items before the shard filter runs:
    each test must still land in the same shard, and each shard keep the order it was given."""
    items = _items()
    expected = [{x.nodeid for x in shard_items(items, i, 3)[0]} for i in (1, 2, 3)]
    for seed in range(5):
        shuffled = list(items)
        random.Random(seed).shuffle(shuffled)
        for i in (1, 2, 3):
            selected, _ = shard_items(shuffled, i, 3)
            assert {x.nodeid for x in selected} == expected[i - 1]
            assert selected == [x for x in shuffled if x in selected]
    sizes = {"a": 3, "b": 3, "c": 1, "d": 5}
    assert assign_shards(sizes, 2) == assign_shards(dict(reversed(list(sizes.items()))), 2) == {
        "d": 0, "a": 1, "b": 1, "c": 0}


def test_assign_shards_needs_a_shard() -> None:
    with pytest.raises(ValueError, match="total must be >= 1"):
        assign_shards({"a": 1}, 0)


def test_shard_line() -> None:
    assert shard_line(None, (1, 2)) == ""
    assert shard_line((2, 3), None) == "shard 2/3"
    assert shard_line((2, 3), (4, 10)) == "shard 2/3: 4 of 10 tests"


# --- in sessions (pytester subprocesses) ----------------------------------------------------------------

SHARD_TESTS = '''
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_a(i):
    pass

@pytest.mark.parametrize("i", range(2))
def test_b(i):
    pass

def test_c():
    pass

class TestD:
    @pytest.mark.parametrize("i", range(3))
    def test_d(self, i):
        pass
'''

MODEL_TESTS = '''
def test_train(xla_model, xla_backend):
    pass

def test_infer(xla_model):
    pass

def test_plain():
    pass
'''


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::" in line and not line.startswith(" ")]


def test_shards_in_sessions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_shard=SHARD_TESTS.format(n=4), test_models=MODEL_TESTS)
    # the order of two sessions is compared: a reordering plugin (pytest-randomly) would shuffle each
    # differently; the shards themselves do not depend on the order (test above)
    fixed = ("-p", "no:randomly")
    models = "--xla-models=resnet18,alexnet,vgg16,mobilenet_v2"
    everything = _collected(pytester.runpytest_subprocess(*fixed, "--collect-only", "-q", models,
                                                          "--xla-backend=trace_once,trace_everytime"))
    assert len(everything) == 4 + 2 + 1 + 3 + 4 * 2 + 4 + 1
    shards = []
    for index in (1, 2, 3):
        result = pytester.runpytest_subprocess(*fixed, "--collect-only", "-q", models,
                                               "--xla-backend=trace_once,trace_everytime", f"--xla-shard={index}/3")
        ids = _collected(result)
        result.stdout.fnmatch_lines([f"shard {index}/3: {len(ids)} of {len(everything)} tests"])
        shards.append(ids)
    assert sorted(i for s in shards for i in s) == sorted(everything)  # disjoint and complete
    for ids in shards:
        assert ids == [i for i in everything if i in ids]  # collection order kept
    owner: dict[str, int] = {}
    for index, ids in enumerate(shards):
        for nodeid in ids:
            match = re.search(r"\[(\w+)", nodeid)
            group = match.group(1) if "test_models.py" in nodeid and match else nodeid.split("[")[0]
            assert owner.setdefault(group, index) == index, f"{group} split across shards"
    assert {"resnet18", "alexnet", "vgg16", "mobilenet_v2"} <= set(owner)
    # run one shard under xdist: both workers must select the same tests (else xdist aborts)
    # (the shard split applies after -k, so it is computed over the 10 tests left)
    plain = _collected(pytester.runpytest_subprocess(*fixed, "--collect-only", "-q", "--xla-shard=2/3",
                                                     "-k", "not test_models"))
    assert 0 < len(plain) < 10
    run = pytester.runpytest_subprocess("-n", "2", "--xla-shard=2/3", "-k", "not test_models", "-v")
    run.assert_outcomes(passed=len(plain))
    assert sorted(re.findall(r"PASSED (\S+)", run.stdout.str())) == sorted(plain)
    run.stdout.fnmatch_lines([f"shard 2/3: {len(plain)} of 10 tests"])
    run.stdout.fnmatch_lines(["xla-dynamo: shard 2/3"])  # the header
