"""Amplification of earlier rounding (issue 46): a step-k divergence that the rerun of step k from eager's weights
does not show, with nothing diverging before it, is classified as amplified rounding (the step, the state's error,
the flips), never "a new problem?" nor a proposed upstream entry. The classification on recorded figures, the
partial match's wording, and on the real stack a 3-D CNN whose ill-conditioned loss amplifies its step-1 rounding."""

from __future__ import annotations

import json

import pytest

from pytest_xla_dynamo.known_issues.registry import parse_entry
from pytest_xla_dynamo.triage.matching import Match
from pytest_xla_dynamo.triage.report import Triage

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")

from pytest_xla_dynamo.parity.amplification import CLASSIFICATION, Amplification  # noqa: E402  (needs torch)


def _recorded(**changes: object) -> Amplification:
    """The figures of a 3-D CNN's step-2 gradient divergence on trace_everytime (as recorded)."""
    found = Amplification(2, [], [], "param 13.bias", 2.9e-06, [], 0, 20736, ["grad 10.weight"], ["grad 10.weight"])
    for name, value in changes.items():
        setattr(found, name, value)
    return found


def test_recorded_figures_classify_as_amplification() -> None:
    found = _recorded()
    assert found.holds
    assert found.lines("trace_everytime") == [
        "amplification of earlier rounding: step 2 diverges only from the backend's own step 1 state (within "
        "tolerance at step 1: err 2.9e-06, param 13.bias); 0 activation sign flips (of 20736 inputs)",
        "(trace_everytime computes step 2 from eager's step-1 weights within tolerance on every tensor that diverged; "
        "its own rerun diverges again at 1 of 1): not a backend bug, and no new issue"]
    assert "3 activation sign flips (of 10 inputs)" in _recorded(flips=3, activations=10).lines("b")[0]
    assert "1 activation sign flip (of" in _recorded(flips=1).lines("b")[0]
    assert "no ReLU-like activation to flip" in _recorded(flips=None).lines("b")[0]


@pytest.mark.parametrize(("changes", "why"), [
    ({"rerun_diverging": ["grad 10.weight"]}, "the rerun from eager's weights diverges too (grad 10.weight)"),
    ({"earlier": ["grad 1.weight"]}, "divergences before step 2 (grad 1.weight)"),
    ({"state_beyond": ["param 0.weight"]}, "the backend's own state after step 1 is beyond the tolerance "
                                           "(param 0.weight)"),
    ({"step": 1}, "step 1"),
])
def test_other_figures_are_not_amplification(changes: dict[str, object], why: str) -> None:
    found = _recorded(**changes)
    assert not found.holds
    assert found.lines("b") == [f"amplification of earlier rounding checked at step {found.step}: not it: {why}"]


def test_an_unrun_or_failed_check_decides_nothing() -> None:
    assert not _recorded(rerun_diverging=None).holds  # the conditioning check did not compare
    failed = _recorded(note="diagnosis failed: amplification check at step 2: RuntimeError: boom")
    assert failed.failed and not failed.holds
    assert failed.lines("b") == ["diagnosis failed: amplification check at step 2: RuntimeError: boom"]


def test_a_partial_match_beside_the_verdict_is_not_called_a_new_problem() -> None:
    entry = parse_entry({"id": "local:bn", "title": "biased running_var", "kind": "wrong_result",
                         "raises": "AssertionError", "diverging": ["buffer *running_var"]}, source="s")
    match = Match(entry, unexplained=("grad 10.weight",))
    assert match.line().endswith("not grad 10.weight (a new problem?)")
    triage = Triage(test="t", status="fail_accuracy", diverging=("buffer bn.running_var", "grad 10.weight"),
                    exc_names=("AssertionError",), message="fail_accuracy: step 1, buffer bn.running_var: x")
    triage.matches = [match]
    assert "(a new problem?)" in "\n".join(triage.known_lines())
    triage.verdict = _recorded().lines("b")
    triage.classification, triage.no_proposal = CLASSIFICATION, "amplification of earlier rounding"
    text = "\n".join(triage.known_lines())
    assert "new problem" not in text
    assert "not grad 10.weight (explained by the verdict: amplified rounding)" in text


CNN3D = """
import pytest
import torch
from torch import nn


def make_cnn():
    \"\"\"A small 3-D CNN (6 Conv3d + ReLU); its loss, scaled by 1e4, makes step 1's update amplify rounding.\"\"\"
    torch.manual_seed(0)
    layers = [nn.Conv3d(1, 8, 3, padding=1), nn.ReLU()]
    for _ in range(5):
        layers += [nn.Conv3d(8, 8, 3, padding=1), nn.ReLU()]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(8 * 6 * 6 * 6, 4))


torch.manual_seed(100)
X = torch.randn(2, 1, 6, 6, 6)


@pytest.mark.parametrize("backend", ["trace_everytime", "trace_once"])
def test_cnn3d(xla_parity, backend):
    xla_parity.training(make_cnn, [X], loss=lambda out: out.pow(2).sum() * 1e4, backend=backend, name="cnn3d",
                        steps=2)
"""


def test_a_3d_cnn_amplifying_its_step_1_rounding_is_classified_so_on_the_real_stack(
        pytester: pytest.Pytester) -> None:
    """Step 2's gradient diverges (1.6e+01) on both backends, while step 1 matches and the rerun of step 2 from
    eager's step-1 weights matches: the verdict is amplification of earlier rounding, with the step, step 1's error
    and the flips; no entry is proposed and nothing says "a new problem"."""
    pytest.importorskip("torch_xla")
    pytester.makepyfile(test_cnn=CNN3D)
    result = pytester.runpytest_subprocess("-p", "xla_dynamo", "-p", "no:cacheprovider", "test_cnn.py",
                                           "--xla-report=table,json", "--xla-report-dir=out")
    out = result.stdout.str()
    result.assert_outcomes(failed=2)  # honestly a failure, with its verdict
    assert "new problem" not in out and "a new entry" not in out, out
    records = [json.loads(line) for line in (pytester.path / "out" / "xla-dynamo.jsonl").read_text().splitlines()]
    assert sorted(r["backend"] for r in records) == ["trace_everytime", "trace_once"]
    for record in records:
        triage = record["extra"]["triage"]
        assert triage["classification"] == CLASSIFICATION, triage
        assert triage["verdict"][0].startswith(
            "amplification of earlier rounding: step 2 diverges only from the backend's own step 1 state (within "
            "tolerance at step 1: err "), triage["verdict"]
        assert "activation sign flip" in triage["verdict"][0], triage["verdict"]
        assert triage["snippet"] == [] and triage["no_proposal"].startswith("amplification of earlier rounding")
        assert record["extra"]["step"] == 2 and record["extra"]["tensor"].startswith("grad "), record["extra"]
