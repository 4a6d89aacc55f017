"""The comparison (in process, CPU tensors): every diverging tensor of a step is kept, in the harness's order,
and the grouped lines name each group's worst first, the steps, and the groups that match."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from pytest_xla_dynamo.parity.compare import (  # noqa: E402
    Divergence,
    Tolerance,
    compare_step,
    divergence_lines,
    group_of,
)


def _step() -> dict[str, object]:
    return {"loss": torch.tensor(1.0), "output[0]": torch.ones(3), "grad fc.weight": torch.ones(2, 2),
            "param fc.weight": torch.ones(2, 2), "buffer bn.running_var": torch.ones(4),
            "buffer bn.num_batches_tracked": torch.tensor(1)}


def test_compare_step_keeps_every_divergence_in_order() -> None:
    ref = _step()
    res = {k: v.clone() for k, v in ref.items()}  # type: ignore[attr-defined]
    res["grad fc.weight"] = res["grad fc.weight"] * 1.1
    res["buffer bn.running_var"] = res["buffer bn.running_var"] + 0.5
    res["buffer bn.num_batches_tracked"] = torch.tensor(2)
    del res["output[0]"]
    found = compare_step(2, ref, res, None, Tolerance())  # type: ignore[arg-type]
    assert [d.tensor for d in found] == ["output[0]", "grad fc.weight", "buffer bn.running_var",
                                         "buffer bn.num_batches_tracked"]
    assert found[0].problem == "output[0]: missing in the backend's results" and math.isnan(found[0].max_abs_err)
    assert found[1].max_abs_err == pytest.approx(0.1, rel=1e-5)
    assert found[3].problem == "buffer bn.num_batches_tracked: 1 of 1 integer elements differ"
    assert compare_step(1, ref, ref, None, Tolerance()) == []  # type: ignore[arg-type]


def test_divergence_lines_grouped() -> None:
    divs = [Divergence(1, "buffer a.running_var", "x", 1e-3), Divergence(1, "buffer b.running_var", "x", 5e-3),
            Divergence(2, "buffer a.running_var", "x", 2e-3), Divergence(2, "grad fc.weight", "x", 0.5)]
    lines = divergence_lines(divs, compared=9)
    assert lines[0] == "diverging tensors: 4 (steps 1, 2; 9 compared per step); first: step 1, buffer a.running_var"
    assert lines[1] == "  grads    1 at step 2: grad fc.weight (5.0e-01)"
    assert lines[2] == "  buffers  3 at step 1, 2: buffer b.running_var (5.0e-03), buffer a.running_var (2.0e-03)"
    assert lines[3] == "  match    loss, outputs, params"
    assert divergence_lines([]) == []
    assert [group_of(n) for n in ("loss", "output[1]", "grad x", "param x", "buffer x")] == [
        "loss", "outputs", "grads", "params", "buffers"]
