"""Known-issue matching of undeclared failures (pure): exception class and message, kind, backend and mode
filters, diverging-tensor globs (full and partial matches), fixed entries, and snippets that parse back
into valid registry entries."""

from __future__ import annotations

import re
import sys

import pytest

from pytest_xla_dynamo.known_issues.registry import BUILTIN_FILE, KnownIssue, load_file, parse_entry
from pytest_xla_dynamo.triage.matching import (
    Failure,
    declare_snippet,
    diverging_globs,
    kind_of,
    match_failure,
    message_pattern,
    new_entry_snippet,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BN_MESSAGE = "step 1, buffer bn1.running_var: max abs err 1.2e-03 > atol 1e-04 (rtol 1e-04)"


def entry(**fields: object) -> KnownIssue:
    data: dict[str, object] = {"id": "local:x", "title": "x", "kind": "error", "raises": "RuntimeError",
                               "match": "boom"}
    data.update(fields)
    return parse_entry(data, source="test")


def failure(**fields: object) -> Failure:
    data: dict[str, object] = {"exc_names": ("RuntimeError", "builtins.RuntimeError", "Exception"),
                               "message": "boom at layer 3", "kind": "error", "backend": "trace_once",
                               "mode": "train", "model": "mine", "test": "test_mine", "stage": "backward"}
    data.update(fields)
    return Failure(**data)  # type: ignore[arg-type]


def test_matches_on_class_and_message_not_on_test_or_model() -> None:
    e = entry(tests=["test_other"], models=["resnet18"])
    (m,) = match_failure([e], failure())
    assert m.entry is e and m.full and m.affected
    assert "matches known issue local:x: x" in m.line()


@pytest.mark.parametrize("fields", [
    {"exc_names": ("ValueError", "builtins.ValueError")},  # another class
    {"message": "something else"},  # the regex does not match
    {"backend": "trace_everytime"},  # filtered out by backends
    {"mode": "infer"},  # filtered out by modes
    {"kind": "wrong_result"},  # another kind
])
def test_no_match(fields: dict[str, object]) -> None:
    e = entry(backends=["trace_once"], modes=["train"])
    assert match_failure([e], failure(**fields)) == []


def test_entries_without_pattern_or_crashes_never_match() -> None:
    no_pattern = entry(match="")
    crash = parse_entry({"id": "local:c", "title": "c", "kind": "crash", "match": "boom"}, source="t")
    assert match_failure([no_pattern, crash], failure()) == []


def test_unknown_kind_matches_any_kind() -> None:
    e = entry(kind="cpu_fallback", raises="AssertionError")
    f = failure(exc_names=("AssertionError",), kind="")
    assert [m.entry for m in match_failure([e], f)] == [e]


def test_diverging_globs_full_and_partial() -> None:
    bn = entry(kind="wrong_result", raises="AssertionError", match="running_var", diverging=["buffer *running_var"])
    only_bn = failure(exc_names=("ParityError", "AssertionError"), message=BN_MESSAGE, kind="wrong_result",
                      diverging=("buffer bn1.running_var", "buffer layer1.0.bn1.running_var"))
    (m,) = match_failure([bn], only_bn)
    assert m.full
    more = failure(exc_names=("ParityError", "AssertionError"), message=BN_MESSAGE, kind="wrong_result",
                   diverging=("buffer bn1.running_var", "grad fc.weight"))
    (m,) = match_failure([bn], more)
    assert not m.full and m.unexplained == ("grad fc.weight",)
    assert "only in part" in m.line() and "grad fc.weight" in m.line()


def test_diverging_name_with_brackets_matches_as_written() -> None:
    """``output[0]`` (what diverging_globs suggests for a model's first output) covers that output; as an
    fnmatch glob alone its ``[0]`` would be a character class and cover nothing."""
    e = entry(kind="wrong_result", raises="AssertionError", match="x", diverging=["grad *", "output[0]"])
    assert e.unexplained(["grad fc.weight", "output[0]", "output[1]"]) == ["output[1]"]
    assert diverging_globs(["output[0]"]) == ["output[0]"]


def test_order_full_before_partial_and_affected_before_fixed() -> None:
    fixed = entry(id="local:fixed", affects={"torch": "<1.0"})
    partial = entry(id="local:partial", kind="wrong_result", raises="AssertionError", match="running_var",
                    diverging=["buffer *"])
    full = entry(id="local:full", kind="wrong_result", raises="AssertionError", match="running_var")
    f = failure(exc_names=("AssertionError",), message=BN_MESSAGE, kind="wrong_result", diverging=("grad w",))
    assert [m.entry.id for m in match_failure([partial, full], f)] == ["local:full", "local:partial"]
    g = failure()
    (m,) = match_failure([fixed], g)
    assert not m.affected and "back again?" in m.line()


def test_entry_matches_only_through_the_tensors_that_distinguish_it() -> None:
    """A running_var-only failure is the running_var entry's; the entry for running_var plus a step-2 gradient
    (the built-in pair: biased-running-var:zoo and small-map-step2-drift:zoo) matches only where that gradient
    diverges too."""
    builtin = {e.id: e for e in load_file(BUILTIN_FILE)}
    bn = builtin["local:xla-batchnorm-biased-running-var:zoo"]
    drift = builtin["local:xla-batchnorm-small-map-step2-drift:zoo"]
    parity = ("pytest_xla_dynamo.parity.ParityError", "AssertionError", "builtins.AssertionError")
    message = "fail_accuracy: step 1, buffer layer1.0.bn1.running_var: max abs err 3.3e-04 > atol 1e-04"
    only_bn = failure(exc_names=parity, message=message, kind="wrong_result",
                      diverging=("buffer layer1.0.bn1.running_var", "buffer layer2.0.bn1.running_var"))
    assert [m.entry.id for m in match_failure([drift, bn], only_bn)] == [bn.id]
    both = failure(exc_names=parity, message=message, kind="wrong_result",
                   diverging=("buffer layer1.0.bn1.running_var", "grad features.2.conv.0.1.weight"))
    found = match_failure([drift, bn], both)
    assert [m.entry.id for m in found] == [drift.id, bn.id] and found[0].full and not found[1].full


def _toml_entry(lines: list[str]) -> KnownIssue:
    data = tomllib.loads("\n".join(lines[1:]))
    (raw,) = data["issue"]
    return parse_entry(raw, source="snippet")


def test_declare_snippet_parses_and_adds_the_test() -> None:
    e = entry(tests=["test_other"], models=["resnet18"], match='INTERNAL ASSERT FAILED at "[^"]*engine\\.cpp"')
    f = failure(message='x INTERNAL ASSERT FAILED at "/a/engine.cpp":1539')
    (m,) = match_failure([e], f)
    lines = declare_snippet(m, f)
    assert lines[0].startswith("declare it: @pytest.mark.xla_known_issue('local:x') on test_mine")
    parsed = _toml_entry(lines)
    assert parsed.match == e.match and parsed.tests == ("test_mine", "test_other")
    assert parsed.models == ("mine", "resnet18")


def test_new_entry_snippet_is_a_valid_entry_matching_the_failure() -> None:
    f = failure(message="Expected XLA tensor. Got: XLALongType at 0x7f3a2c 12 times, 3.5e-04 off")
    lines = new_entry_snippet(f, {"torch": "2.9.0+cpu", "torch_xla": "2.9.0", "torchvision": "0.24.0"})
    assert lines[0].startswith("a new entry for a --xla-known-issues-file")
    parsed = _toml_entry(lines)
    assert parsed.id == "local:mine-backward-runtimeerror"
    assert dict(parsed.affects) == {"torch": ">=2.9.0", "torch_xla": ">=2.9.0"}
    assert parsed.raises == "RuntimeError" and parsed.kind == "error"
    assert (parsed.tests, parsed.backends, parsed.modes, parsed.models) == (
        ("test_mine",), ("trace_once",), ("train",), ("mine",))
    other = failure(message="Expected XLA tensor. Got: XLALongType at 0x99 7 times, 1e-2 off")
    assert [m.entry.id for m in match_failure([parsed], other)] == [parsed.id]


def test_message_pattern_generalizes_numbers() -> None:
    pattern = message_pattern('size 4 vs 0 at "x.cpp":12 (1.5e-03)')
    assert re.search(pattern, 'size 8 vs 1 at "x.cpp":99 (2.0e-01)')
    assert not re.search(pattern, "size x vs 1")


def test_message_pattern_and_title_hold_no_machine_paths() -> None:
    line = "m / b / train: no snapshot at /home/me/proj/snapshots/test_g/test_x[m-b].json here"
    pattern = message_pattern(line, limit=200)
    assert "home" not in pattern and "proj" not in pattern and pattern.endswith(r"\S+ here")
    assert re.search(pattern, line.replace("/home/me/proj", "/ci/work"))
    snippet = "\n".join(new_entry_snippet(Failure(("OSError",), line, kind="error", model="m"), {}))
    assert "/home" not in snippet and "no snapshot at …" in snippet


def test_diverging_globs_and_kinds() -> None:
    assert diverging_globs(["buffer a.running_var"]) == ["buffer a.running_var"]
    many = [f"buffer l{i}.running_var" for i in range(6)] + ["grad fc.weight"]
    assert diverging_globs(many) == ["buffer *.running_var", "grad *.weight"]
    assert kind_of("fail_accuracy") == "wrong_result" and kind_of("fail_to_run") == "error"


def test_builtin_zoo_entry_covers_only_running_var() -> None:
    (zoo_entry,) = [e for e in load_file(BUILTIN_FILE) if e.id == "local:xla-batchnorm-biased-running-var:zoo"]
    assert zoo_entry.unexplained(["buffer bn1.running_var", "buffer layer1.0.bn2.running_var"]) == []
    assert zoo_entry.unexplained(["buffer bn1.running_var", "grad conv1.weight"]) == ["grad conv1.weight"]


def test_an_entry_of_other_models_needs_its_mechanism_in_the_case() -> None:
    """A wrong result or a graph failure of a model the entry does not list matches only through a specific
    diverging glob or a CPU fallback the entry names and the case ran, never by the message's shape (issue 46)."""
    flips = entry(kind="wrong_result", raises="AssertionError", match="step 1, grad", models=["timm.cspresnet50"],
                  diverging=["grad *", "loss"])
    bn = entry(id="local:bn", kind="wrong_result", raises="AssertionError", match="step 1, ", models=["resnet18"],
               diverging=["buffer *running_var"])
    wrong = dict(exc_names=("AssertionError",), kind="wrong_result", message="step 1, grad l1.w: max abs err")
    assert match_failure([flips], failure(**wrong, diverging=("grad l1.w",))) == []
    assert match_failure([flips], failure(**wrong, model="timm.cspresnet50", diverging=("grad l1.w",)))
    assert match_failure([bn], failure(**wrong, diverging=("buffer bn.running_var",)))
    lazy = entry(id="local:pad", kind="graph_break", raises="AssertionError", match="executed [1-9]",
                 models=["transformers.deberta_v2"])
    bag = entry(id="pytorch/xla#2403", kind="cpu_fallback", raises="AssertionError", match="executed [1-9]",
                models=["dlrm"], title="EmbeddingBag", status="aten::_embedding_bag counters after one step")
    graph = dict(exc_names=("AssertionError",), kind="graph_break", message="it executed 4")
    assert match_failure([lazy, bag], failure(**graph)) == []
    (m,) = match_failure([lazy, bag], failure(**graph, evidence=("aten::_embedding_bag",)))
    assert m.entry is bag
