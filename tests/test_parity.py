"""The parity engine on a small model: comparison, messages, statuses, repro line, a deliberately broken
backend, the public xla_parity fixture, and shared prepared cases equal to fresh ones."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITES = Path(__file__).resolve().parents[1] / "suites"

CONFTEST = """
from dataclasses import dataclass

import torch

from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.zoo import ModelSpec


def _tiny(tier):
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


@dataclass(frozen=True)
class GradScalingBackend(Backend):
    \"\"\"Lazy XLA, but the gradient of the last layer's weight is scaled: a deliberately broken backend.\"\"\"

    def wrap(self, model):
        if isinstance(model, torch.nn.Sequential) and len(model) == 3:  # the zoo's "tiny"
            model[2].weight.register_hook(lambda grad: grad * 1.5)
        return super().wrap(model)


def pytest_xla_register_models(register):
    register(ModelSpec(name="tiny", source="user", build_model=_tiny,
                       build_inputs=lambda tier, bs: (torch.randn(bs, 8),), batch_size={"small": 4, "full": 4}))


def pytest_xla_register_backends(registry):
    registry.register(GradScalingBackend("broken_grad", "scales one gradient"))
"""

USER_TESTS = """
import torch

from pytest_xla_dynamo.core.cases import iter_trace
from pytest_xla_dynamo.core.metrics import snapshot
from pytest_xla_dynamo.session import get_session
from pytest_xla_dynamo.zoo import get_model


def test_user_model_training(xla_parity, xla_backend):
    result = xla_parity.training(lambda: torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()),
                                 [torch.randn(5, 3)], name="user_mlp")
    assert result.status == "pass"


def test_user_model_inference(xla_parity, xla_backend):
    assert xla_parity.inference(lambda: torch.nn.Linear(3, 2), [torch.randn(4, 3)]).ok


def test_shared_case_equals_fresh_compile(request, xla_backend):
    engine = get_session(request.config).engine
    spec = get_model("tiny")
    shared = engine.prepared(spec, xla_backend, "train")
    again = engine.prepared(spec, xla_backend, "train")
    assert again is shared
    first = list(iter_trace(shared, 2))
    before = snapshot()
    second = list(iter_trace(shared, 2))
    assert snapshot().delta(before).count("UncachedCompile") == 0  # reuse compiles nothing new
    torch._dynamo.reset()  # a fresh compile of the same case
    fresh = engine.fresh(spec, xla_backend, "train")
    fresh.warm_up()
    third = list(iter_trace(fresh, 2))
    for a, b, c in zip(first, second, third):
        for name in a:
            assert torch.equal(a[name], b[name]) and torch.equal(a[name], c[name]), name
    # the same graphs: as many dynamo graphs captured and XLA executions per warm-up step
    executed = lambda w: [s.count("ExecuteTime") for s in w.per_step]
    graphs = lambda w: [s.dynamo.get("stats", {}).get("unique_graphs", 0) for s in w.per_step]
    assert executed(fresh.warmup) == executed(shared.warmup)
    assert graphs(fresh.warmup) == graphs(shared.warmup)
"""


def test_parity_engine(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_user=USER_TESTS)
    for name in ("test_training_parity.py", "test_inference_parity.py"):
        (pytester.path / name).write_text((SUITES / name).read_text())
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:randomly", "-p", "no:cacheprovider", "--xla-models=tiny",
        "--xla-backend=trace_once,trace_everytime,broken_grad", "--junitxml=junit.xml", "-p", "no:xdist")
    out = result.stdout.str()
    # the broken backend: training fails naming the scaled gradient; inference is unaffected
    assert "test_training_parity.py::test_training_parity[tiny-broken_grad] FAILED" in out
    assert "test_inference_parity.py::test_inference_parity[tiny-broken_grad] PASSED" in out
    assert ("ParityError: fail_accuracy: step 1, grad 2.weight: max abs err" in out), out
    assert ("reproduce: pytest 'test_training_parity.py::test_training_parity[tiny-broken_grad]' "
            "--xla-backend=broken_grad --xla-tier=small") in out
    for backend in ("trace_once", "trace_everytime"):
        assert f"test_training_parity[tiny-{backend}] PASSED" in out
        assert f"test_inference_parity[tiny-{backend}] PASSED" in out
    # user models through the public fixture (2 backends x 2 modes minus broken ones) and sharing
    assert "test_shared_case_equals_fresh_compile[trace_once] PASSED" in out
    assert "test_shared_case_equals_fresh_compile[trace_everytime] PASSED" in out
    assert "test_user_model_training[broken_grad] PASSED" in out  # its hook only touches zoo Sequentials
    result.assert_outcomes(passed=14, failed=1)
    # statuses reach the JUnit XML through user_properties
    props = {}
    for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase"):
        for prop in case.iter("property"):
            if prop.get("name") == "xla_status":
                props[case.get("name")] = prop.get("value")
    assert props["test_training_parity[tiny-broken_grad]"] == "fail_accuracy"
    assert props["test_training_parity[tiny-trace_once]"] == "pass"


def test_bad_tolerance_marker(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.xla_tolerance(atol=1e-3)
        @pytest.mark.xla_mode("train")
        def test_t(xla_parity, xla_model, xla_backend):
            xla_parity.check_case(xla_model, xla_backend, "train")
    """)
    result = pytester.runpytest_subprocess("--xla-models=tiny", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR or "give both atol= and rtol=" in result.stdout.str() + \
        result.stderr.str()
