"""Fixtures and markers in a test file outside this repo: xla_device, xla_backend, tensor_mode,
xla_patch / xla_patches, per-test isolation (patches, seeds, dynamo, pending lazy work); with -n 0, -n 2
and -p no:xdist."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
import os
from pytest_xla_dynamo.core import devices

def pytest_collection_finish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"collected-{worker}.txt", "w") as f:
        f.write(f"runtime_up={devices.runtime_up()} items={[i.nodeid for i in session.items]}")
"""

TESTS = """
import pytest
import torch
from torch.nn.modules import dropout, pooling


def test_device(xla_device):
    assert xla_device.type == "xla"
    assert (torch.ones(2, device=xla_device) * 2).sum().item() == 4.0


def test_backend(xla_backend, xla_device):
    model = torch.nn.Linear(4, 2).to(xla_backend.device())
    out = xla_backend.wrap(model)(torch.ones(3, 4, device=xla_backend.device()))
    xla_backend.sync()
    assert out.shape == (3, 2) and out.device == xla_device


def test_tensor_mode(tensor_mode, xla_device):
    from pytest_xla_dynamo.core.tensor_modes import check_model

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 5))
    problems = check_model(model, (torch.randn(2, 3, 6, 6),), lambda out: out.sum(), tensor_mode, xla_device)
    assert problems == []


@pytest.mark.xla_patch("maxpool_to_avgpool", "dropout_to_identity")
def test_patched_by_marker():
    m = torch.nn.Sequential(torch.nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), torch.nn.Dropout(0.5))
    assert isinstance(m[0], pooling.AvgPool2d) and not isinstance(m[0], pooling.MaxPool2d)
    assert (m[0].kernel_size, m[0].stride, m[0].padding, m[0].ceil_mode) == (3, 2, 1, True)
    assert isinstance(m[1], torch.nn.Identity) and m[1].p == 0.0


def test_patch_instance_and_context(xla_patches):
    m = torch.nn.Sequential(torch.nn.MaxPool1d(2), torch.nn.Dropout2d(0.1))
    with xla_patches.apply("maxpool_to_avgpool", "dropout_to_identity", model=m):
        assert isinstance(m[0], pooling.AvgPool1d) and isinstance(m[1], torch.nn.Identity)
        assert isinstance(torch.nn.MaxPool3d(2), pooling.AvgPool3d)
    assert type(m[0]) is pooling.MaxPool1d and type(m[1]) is dropout.Dropout2d
    assert torch.nn.MaxPool3d is pooling.MaxPool3d
    xla_patches.patch_model(m, "dropout_to_identity")
    assert isinstance(m[1], torch.nn.Identity)


@pytest.mark.xla_patch("maxpool_to_avgpool", "dropout_to_identity")
def test_patched_then_fails():
    assert torch.nn.MaxPool2d is not pooling.MaxPool2d
    raise RuntimeError("deliberate failure inside a patched test")


def test_nothing_leaks_into_the_next_test():
    m = torch.nn.Sequential(torch.nn.MaxPool2d(2), torch.nn.Dropout(0.5))
    assert type(m[0]) is pooling.MaxPool2d and type(m[1]) is dropout.Dropout
    assert torch.nn.MaxPool2d is pooling.MaxPool2d and torch.nn.Dropout is dropout.Dropout


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_is_seeded(xla_device, run):
    import torch_xla
    print(f"SEEDED run={run} cpu={torch.rand(1).item():.6f} xla={torch.rand(1, device=xla_device).item():.6f}")


PENDING = []


@pytest.mark.xdist_group("pending")
def test_fails_with_lazy_work_pending(xla_device):
    PENDING.append(torch.full((3,), 7.0, device=xla_device) * 3 + 1)  # a lazy graph, never synced
    raise RuntimeError("deliberate failure with lazy work pending")


@pytest.mark.xdist_group("pending")
def test_starts_with_nothing_pending(xla_device):
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    torch_xla.sync()
    xm.wait_device_ops()
    assert met.metric_data("ExecuteTime") is None, "ran a graph an earlier test left pending"


def test_dynamo_is_reset_per_test(xla_device):
    from torch._dynamo.utils import counters
    assert not counters["stats"], dict(counters["stats"])
    torch.compile(lambda x: x + 1, backend="openxla")(torch.ones(2, device=xla_device))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scenario=TESTS)
    return pytester.runpytest_subprocess("-v", "-s", "-p", "no:randomly", "-p", "no:cacheprovider",
                                         "--xla-backend=trace_once,trace_everytime",
                                         "--xla-tensor-mode=eager,fake", *args)


def _check(result: pytest.RunResult, pytester: pytest.Pytester) -> None:
    out = result.stdout.str()
    # exactly two deliberate failures; everything else passes (a failed test's pending lazy work is not the next's)
    result.assert_outcomes(passed=12, failed=2)
    assert "RuntimeError: deliberate failure inside a patched test" in out
    assert "RuntimeError: deliberate failure with lazy work pending" in out
    for node in ("test_backend[trace_once]", "test_backend[trace_everytime]", "test_tensor_mode[eager]",
                 "test_tensor_mode[fake]"):
        assert node in out, node
    # no device was touched during collection, and every worker collected the same tests
    collected = [p.read_text() for p in pytester.path.glob("collected-*.txt")]
    assert collected and all(c.startswith("runtime_up=False ") for c in collected), collected
    assert len({c.split(" ", 1)[1] for c in collected}) == 1


def test_fixtures_without_xdist(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-p", "no:xdist")
    _check(result, pytester)
    seeded = [line.split("SEEDED ")[1].split(" ", 1)[1] for line in result.stdout.lines if "SEEDED " in line]
    assert len(seeded) == 2 and seeded[0] == seeded[1], seeded  # same seed, same numbers, CPU and XLA


@pytest.mark.parametrize("workers", ["0", "2"])
def test_fixtures_with_xdist(pytester: pytest.Pytester, workers: str) -> None:
    result = _run(pytester, "-n", workers)
    _check(result, pytester)
    if workers == "2":
        assert len(list(pytester.path.glob("collected-gw*.txt"))) == 2
