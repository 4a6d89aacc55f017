"""Rendering the gate (gating.render): the headline, the Markdown summary and the terminal lines."""

from __future__ import annotations

from pathlib import Path

from sample_data import gating_record as rec

from pytest_xla_dynamo.gating import labels as lb
from pytest_xla_dynamo.gating.expected import COLUMNS, parse_expected
from pytest_xla_dynamo.gating.render import headline, render_markdown, terminal_lines, verdict_line
from pytest_xla_dynamo.gating.rules import compare
from pytest_xla_dynamo.gating.run import cases_from_records
from pytest_xla_dynamo.records import ParityFigures

HEADER = ",".join(COLUMNS)



def expected_text(*rows: str) -> str:
    return "\n".join([HEADER, *rows]) + "\n"


def test_markdown_lists_regressions_first_with_repro() -> None:
    expected = parse_expected(expected_text("a,b,train,pass,,,,,,", "z,b,train,fail_to_run,,,,,,",
                                            "gone,b,infer,pass,,,,,,"))
    run = cases_from_records([
        rec("parity", "a", backend="b", status="fail_accuracy", repro="pytest suites/t.py::t[a-b] --xla-backend=b",
            message="step 1, grad fc.weight: max abs err 3e-2 > atol 1e-4\nSECOND-LINE"),
        rec("parity", "z", backend="b", status="pass", flaky=True,
            parity=ParityFigures(runs=["pass", "pass", "fail_to_run"])),
    ])
    result = compare(expected, run)
    text = render_markdown(result, run, expected_path=Path("e.csv"), repro_prefix="python -m pytest_xla_dynamo")
    assert text.startswith("## ❌ xla-dynamo: FAILED: 1 regression")
    order = [text.index(h) for h in ("### Regressions (1)", "### Missing (1)", "### Flaky (1)", "### All cases")]
    assert order == sorted(order)
    assert "python -m pytest_xla_dynamo suites/t.py::t[a-b] --xla-backend=b" in text
    assert "- **a · b · train**: status pass -> fail_accuracy — step 1, grad fc.weight: max abs err 3e-2" in text
    assert "SECOND-LINE" not in text
    assert "runs: pass, pass, fail_to_run" in text
    assert "| gone | b | infer | (pass) |" in text
    ok = render_markdown(compare(expected, {}), {})
    assert ok.startswith("## ✅ xla-dynamo: PASSED")


def test_markdown_when_updating_lists_changes_without_a_verdict() -> None:
    expected = parse_expected(expected_text("a,b,train,pass,,,,,,"))
    run = cases_from_records([rec("parity", "a", backend="b", status="fail_accuracy")])
    text = render_markdown(compare(expected, run), run, update_line="xla-dynamo: updated 1 rows", gating=False,
                           shard_line="shard 1/2: 1 of 2 tests")
    assert text.startswith("## ✅ xla-dynamo: PASSED\n")
    assert "1 cases run · shard 1/2: 1 of 2 tests" in text and "xla-dynamo: updated 1 rows" in text
    assert "Not gating (`--xla-update-expected`)" in text and "### Regressions (1)" in text
    assert render_markdown(None, run, failed_tests=2).startswith("## ❌ xla-dynamo: FAILED: 2 failed tests")


def test_headline_tells_test_failures_from_gate_failures() -> None:
    expected = parse_expected(expected_text("a,b,train,pass,,,,,,", "c,b,train,fail_accuracy,,,,,,"))
    same = cases_from_records([rec("parity", "a", backend="b", status="pass"),
                               rec("parity", "c", backend="b", status="fail_accuracy")])
    ok = compare(expected, same)
    assert headline(ok, failed_tests=0, strict_improved=False) == (True, "PASSED: 2 cases as expected")
    assert headline(ok, failed_tests=1, strict_improved=False) == (
        False, "FAILED: 1 failed test; gate: 2 cases as expected")
    worse = compare(expected, cases_from_records([rec("parity", "a", backend="b", status="fail_to_run")]))
    assert headline(worse, failed_tests=2, strict_improved=False) == (
        False, "FAILED: 1 regression, 2 failed tests")
    assert headline(None, failed_tests=0, strict_improved=False) == (True, "PASSED")


def test_terminal_lines() -> None:
    expected = parse_expected(expected_text("a,b,train,pass,,,,,,", "i,b,train,fail_to_run,,,,,,",
                                            *(f"gone{n},b,train,pass,,,,,," for n in range(6))))
    run = cases_from_records([rec("parity", "a", backend="b", status="fail_accuracy", repro="pytest A"),
                              rec("parity", "i", backend="b", status="pass")])
    result = compare(expected, run)
    lines = terminal_lines(result, updating=False, strict_improved=False, repro_prefix="python -m pytest_xla_dynamo")
    assert [text for text, _ in lines] == [
        "cases: 1 REGRESSION, 1 IMPROVED, 6 MISSING",
        "REGRESSION      a · b · train: status pass -> fail_accuracy",
        "    reproduce: python -m pytest_xla_dynamo A",
        "IMPROVED        i · b · train: status fail_to_run -> pass",
        "MISSING         6 cases (gone0 · b · train, gone1 · b · train, gone2 · b · train, gone3 · b · train, "
        "gone4 · b · train and 1 more); reported, not failing",
    ]
    assert lines[1][1]["red"] and lines[3][1]["green"]
    assert verdict_line(result, updating=False, strict_improved=False) == (
        "xla-dynamo gate FAILED: 1 regression (exit status 1)", {"red": True, "bold": True})
    updating = [text for text, _ in terminal_lines(result, updating=True, strict_improved=False)]
    assert updating[0] == "changes against the previous expected file (written, not gating):"
    assert not any(t.startswith(("cases:", "MISSING")) for t in updating)
    assert verdict_line(result, updating=True, strict_improved=False) == (
        "xla-dynamo gate: not gating (--xla-update-expected)", {})
    same = compare(expected, {k: v for k, v in run.items() if k[0] == "i"})
    assert verdict_line(same, updating=False, strict_improved=True)[0].startswith(  # type: ignore[index]
        "xla-dynamo gate FAILED: 1 improved (xla_strict_improved)")
    assert terminal_lines(None, updating=False, strict_improved=False) == []
    assert verdict_line(None, updating=False, strict_improved=False) is None
    assert lb.case_name(("m", "b", "train")) == "m · b · train"
