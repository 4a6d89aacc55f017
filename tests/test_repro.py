"""Tests of pytest_xla_dynamo.repro: the one builder of repro commands (pure)."""

from __future__ import annotations

from pathlib import Path

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.repro import nodeid_command, repro_command, with_prefix
from pytest_xla_dynamo.timing.settings import TimingSettings

NODE = "suites/test_training_parity.py::test_training_parity[resnet18-trace_once]"


def test_defaults_name_only_the_node_backend_and_tier() -> None:
    assert repro_command(NODE, XlaConfig(), "trace_once") == (
        f"pytest '{NODE}' --xla-backend=trace_once --xla-tier=small")


def test_every_option_that_shapes_a_case_is_repeated() -> None:
    xcfg = XlaConfig(seed=7, steps=3, dropout="keep", randomize_input=True, tolerance=1e-3,
                     patches=("maxpool_to_avgpool",), tier="full")
    assert repro_command(NODE, xcfg, "trace_everytime", registry_off=True, prefix="python -m pytest_xla_dynamo") == (
        f"python -m pytest_xla_dynamo '{NODE}' --xla-backend=trace_everytime --xla-tier=full --xla-seed=7 "
        "--xla-steps=3 -o xla_dropout=keep -o xla_randomize_input=true --xla-tolerance=0.001 "
        "--xla-patch=maxpool_to_avgpool --xla-known-issues=run")


def test_timing_adds_its_options_and_leaves_xdist_out() -> None:
    def timed(settings: TimingSettings) -> str:
        return repro_command(NODE, XlaConfig(), "trace_once", timing=settings.repro_args())

    assert timed(TimingSettings(iterations_per_run=10, repeat=3, baseline_auto=True)).endswith(
        "--xla-iterations-per-run=10 --xla-repeat=3 -p no:xdist")
    assert timed(TimingSettings(baseline_backend="trace_everytime", threads=2)).endswith(
        "--xla-repeat=5 --xla-baseline-backend=trace_everytime -o xla_threads=2 -p no:xdist")
    assert timed(TimingSettings(placements="step", timing_processes=3)).endswith(
        "--xla-repeat=5 --xla-timing-processes=3 --xla-baseline-backend=eager -o xla_placements=step -p no:xdist")
    # the gate's options judge the record; they do not shape it
    assert "speedup" not in timed(TimingSettings(min_speedup_ratio=0.9, timing_baseline=Path("b.json")))


def test_nodeid_command_and_prefix() -> None:
    assert nodeid_command(NODE, "eager") == f"pytest '{NODE}' --xla-backend=eager"
    assert with_prefix("pytest x --y", "python -m pytest_xla_dynamo") == "python -m pytest_xla_dynamo x --y"
    assert with_prefix("pytest x", "pytest") == "pytest x"
    assert with_prefix("", "python -m pytest_xla_dynamo") == ""
