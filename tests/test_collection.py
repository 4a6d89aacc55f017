"""The order of the shared-case tests: model by model (the largest first), mode by mode, parity first and timing
last in a mode, so that a process holds one (model, mode)'s cases and never a parity reference's runs beside them
nor what it kept of the models before under the largest; the other tests after them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITES = Path(__file__).resolve().parents[1] / "suites"
FILES = ("test_timing.py", "test_graphs.py", "test_training_parity.py", "test_inference_parity.py")


def test_shared_cases_run_by_model_mode_and_check(pytester: pytest.Pytester) -> None:
    for name in FILES:
        (pytester.path / name).write_text((SUITES / name).read_text())
    pytester.makepyfile(test_other="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                                           "--xla-models=alexnet,resnet18", "--xla-backend=trace_once", *FILES,
                                           "test_other.py")
    ids = [line.strip() for line in result.stdout.lines if "::" in line]
    assert "torch already chose" not in result.stdout.str()  # the models are sized after the CPU cap is set
    expected = []
    for model in ("alexnet", "resnet18"):  # the largest first (57M and 11M parameters), not the command line's
        case = f"[{model}-trace_once]"
        expected += [f"test_training_parity.py::test_training_parity{case}",
                     f"test_graphs.py::test_graph_signature_train{case}",
                     f"test_timing.py::test_timing_train{case}",
                     f"test_inference_parity.py::test_inference_parity{case}",
                     f"test_graphs.py::test_graph_signature_infer{case}",
                     f"test_timing.py::test_timing_infer{case}"]
    expected.append("test_other.py::test_plain")  # not a shared case: after the models, in its order
    assert ids == expected, "\n".join(ids)
