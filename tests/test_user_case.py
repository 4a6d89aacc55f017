"""A model owner's case (user_case.py, issue 27): keyword inputs and targets as parts of the case, the same case for
parity and the graph check; and the worked example of docs/fixtures.md run as written (real torch_xla), its
snapshots under the project's rootdir."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")

DOC = Path(__file__).resolve().parents[1] / "docs" / "fixtures.md"


class KeywordModel(torch.nn.Module):  # type: ignore[name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x: Any, *, scale: Any) -> Any:
        return self.fc(x) * scale


def test_keywords_ride_as_inputs_and_keep_the_models_names() -> None:
    from pytest_xla_dynamo.core.user_case import user_spec

    x, scale = torch.randn(4, 3), torch.tensor(2.0)
    spec = user_spec(KeywordModel, [x], kwargs={"scale": scale}, name="kw")
    model, inputs = spec.build_model("small"), spec.build_inputs("small", 4)
    assert len(inputs) == 2 and torch.equal(inputs[1], scale) and inputs[1] is not scale  # a frozen copy
    assert [n for n, _ in model.named_parameters()] == ["fc.weight", "fc.bias"]  # no wrapper prefix
    torch.testing.assert_close(model(*inputs), model(x, scale=scale))
    assert spec.batch("small") == 4 and spec.name == "kw"


def test_targets_reach_the_loss_on_the_outputs_device_and_dtype() -> None:
    from pytest_xla_dynamo.core.user_case import user_spec

    seen: list[Any] = []

    def loss(out: Any, targets: Any) -> Any:
        seen.append(targets)
        return torch.nn.functional.mse_loss(out, targets["y"])

    y = torch.randn(4, 2)
    spec = user_spec(lambda: torch.nn.Linear(3, 2), [torch.randn(4, 3)], targets={"y": y}, loss=loss)
    spec.loss(torch.zeros(4, 2, dtype=torch.float64))
    spec.loss(torch.zeros(4, 2, dtype=torch.float64))
    assert seen[0]["y"].dtype == torch.float64 and seen[0] is seen[1]  # one copy per device and dtype
    assert torch.equal(seen[0]["y"].float(), y)
    with pytest.raises(ValueError, match="targets need a loss"):
        user_spec(lambda: torch.nn.Linear(3, 2), [torch.randn(4, 3)], targets=y)


def _example() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## A model owner's example"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "docs/fixtures.md: the model owner's example has no python block"
    return match.group(1)


@pytest.mark.xla
def test_model_owners_example_from_the_docs(pytester: pytest.Pytester) -> None:
    """The example as written: parity on both XLA backends passes, the graph check writes its snapshots under the
    project's rootdir (the test file is at the project's top) and then passes against them."""
    pytester.makepyfile(test_example=_example())
    args = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", "--xla-backend=trace_once,trace_everytime")
    first = pytester.runpytest_subprocess(*args, "--snapshot-update", "--xla-report=json", "--xla-report-dir=rep",
                                          timeout=900)
    first.assert_outcomes(passed=4)
    records = [json.loads(line) for line in (pytester.path / "rep" / "xla-dynamo.jsonl").read_text().splitlines()]
    parity = {r["backend"]: r for r in records if r["suite"] == "parity"}
    assert parity["trace_once"]["status"] == parity["trace_everytime"]["status"] == "pass", parity
    capture = parity["trace_once"]["extra"]["capture"]  # the keyword hook is traced with the model, whole
    assert capture["verdict"] == "captured" and capture["unique_graphs"] >= 1, capture
    snaps = sorted(p.name for p in (pytester.path / "snapshots" / "test_example").iterdir())
    assert snaps == ["test_my_model_graphs[trace_everytime].json", "test_my_model_graphs[trace_once].json"], snaps
    assert not (pytester.path.parent / "snapshots" / "test_example").exists()
    again = pytester.runpytest_subprocess(*args, timeout=900)
    again.assert_outcomes(passed=4)
