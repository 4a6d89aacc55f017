"""The map from module types and functional calls to OpInfo ids, and the op-level entries it finds (pure)."""

from __future__ import annotations

from pytest_xla_dynamo.known_issues.registry import KnownIssue
from pytest_xla_dynamo.triage.mechanisms import op_explanations, ops_of

ELU = KnownIssue(id="local:elu", title="ELU backward", kind="wrong_result", raises="AssertionError",
                 match="x", tests=("test_op",), ops=("nn.functional.elu", "nn.functional.celu"),
                 modes=("backward",), reproducer="test_elu")
FIXED = KnownIssue(id="local:old-elu", title="fixed", kind="wrong_result", raises="AssertionError", match="x",
                   ops=("nn.functional.elu",), affects={"torch": "<1.0"})
MODEL = KnownIssue(id="local:model", title="a model entry", kind="wrong_result", raises="AssertionError", match="x")


def test_module_types_and_functional_calls_map_to_op_ids() -> None:
    assert ops_of("module", "ELU") == ("nn.functional.elu",) and ops_of("call", "elu") == ("nn.functional.elu",)
    assert ops_of("module", "CELU") == ("nn.functional.celu",) and ops_of("call", "selu") == ("nn.functional.selu",)
    assert ops_of("module", "GATLayer") == () and ops_of("call", "linear") == ()


def test_an_entry_explains_only_its_op_in_its_direction_where_it_affects() -> None:
    entries = [MODEL, FIXED, ELU]
    found = op_explanations(entries, [("module", "LeakyReLU", "l1.leaky"), ("module", "ELU", "act")], "backward")
    assert [f.entry.id for f in found] == ["local:elu"] and found[0].where == "act"
    assert found[0].lines() == ["explained by local:elu: ELU backward",
                                "(act runs nn.functional.elu, whose backward the entry covers: test_elu)"]
    assert op_explanations(entries, [("call", "celu", "the model")], "backward")[0].op == "nn.functional.celu"
    assert op_explanations(entries, [("module", "ELU", "act")], "forward") == []  # the entry is backward only
    assert op_explanations(entries, [("module", "ReLU", "act")], "backward") == []
