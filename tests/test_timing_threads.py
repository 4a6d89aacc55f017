"""Tests of pytest_xla_dynamo.timing.threads and of the two timing options it goes with: ``xla_threads``
(validated, resolved, applied to torch and to XLA:CPU's ``PJRT_NPROC``) and ``--xla-baseline-backend=auto``
(resolved from ``PJRT_DEVICE`` at configure time). In process; one test imports torch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_xla_dynamo import config as xconfig
from pytest_xla_dynamo.core import devices
from pytest_xla_dynamo.core.backends import default_registry
from pytest_xla_dynamo.session import XlaSession
from pytest_xla_dynamo.timing import plugin as timing_plugin
from pytest_xla_dynamo.timing import settings as timing_settings
from pytest_xla_dynamo.timing import threads
from pytest_xla_dynamo.timing.plugin import TimingPlugin, session_budget
from pytest_xla_dynamo.timing.settings import TimingSettings
from pytest_xla_dynamo.timing.threads import (
    AUTO,
    XLA_THREADS_ENV,
    auto_threads,
    budget_for,
    set_xla_threads,
)


class FakeConfig:
    """Just what ``config.resolve`` reads: command-line values and ini values, by dest."""

    def __init__(self, options: Mapping[str, str] | None = None, ini: Mapping[str, str] | None = None) -> None:
        self.options = dict(options or {})
        self.ini = dict(ini or {})
        self.stash = pytest.Stash()

    def getoption(self, dest: str, default: Any = None) -> Any:
        return self.options.get(dest, default)

    def getini(self, dest: str) -> Any:
        return self.ini.get(dest)


def resolve(options: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None,
            ini: Mapping[str, str] | None = None) -> TimingSettings:
    registry = default_registry()
    return timing_settings.resolve(FakeConfig(options, ini), backends=registry.names(),  # type: ignore[arg-type]
                                   backend_aliases=registry.aliases, environ=dict(environ or {}))


# --- the budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (3, 1), (4, 2), (8, 4), (64, 32)])
def test_auto_is_one_thread_on_two_cores_or_fewer_else_half(cores: int, expected: int) -> None:
    assert auto_threads(cores) == expected


def test_budget_for_auto_and_a_number() -> None:
    auto = budget_for(None, cores=2)
    assert (auto.threads, auto.choice, auto.cores) == (1, AUTO, 2)
    given = budget_for(3, cores=2, xla="PJRT_NPROC=3")
    assert given.to_dict() == {"threads": 3, "choice": "3", "cores": 2, "xla": "PJRT_NPROC=3"}
    assert budget_for(None).cores == threads.available_cores() >= 1


def test_xla_threads_go_to_pjrt_nproc_before_the_runtime_only_on_the_cpu() -> None:
    env: dict[str, str] = {"PJRT_DEVICE": "CPU"}
    assert set_xla_threads(1, env, runtime_up=False) == "PJRT_NPROC=1"
    assert env[XLA_THREADS_ENV] == "1"
    unset: dict[str, str] = {}  # PJRT_DEVICE unset: the plugin's default, the CPU
    assert set_xla_threads(2, unset, runtime_up=False) == "PJRT_NPROC=2" and unset[XLA_THREADS_ENV] == "2"
    tpu = {"PJRT_DEVICE": "TPU"}
    assert set_xla_threads(1, tpu, runtime_up=False).startswith("not set: PJRT_DEVICE=TPU")
    assert XLA_THREADS_ENV not in tpu
    late = {"PJRT_DEVICE": "CPU", XLA_THREADS_ENV: "4"}
    assert set_xla_threads(1, late, runtime_up=True) == "not set: the XLA runtime was already up (PJRT_NPROC=4)"
    assert late[XLA_THREADS_ENV] == "4"


def test_the_plugin_sets_pjrt_nproc_only_for_a_timing_session_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "runtime_up", lambda: False)
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    monkeypatch.setenv(XLA_THREADS_ENV, "7")
    config = FakeConfig()
    session = XlaSession(config, xconfig.XlaConfig(), default_registry())  # type: ignore[arg-type]
    timing_item: Any = SimpleNamespace(fixturenames=["xla_timing", "xla_model"])
    parity_item: Any = SimpleNamespace(fixturenames=["xla_parity", "xla_model"])
    # a session without timing tests: XLA:CPU keeps its threads, and nothing is restored at the end
    plugin = TimingPlugin(session, TimingSettings(threads=2))
    plugin.pytest_collection_modifyitems(None, config, [parity_item])  # type: ignore[arg-type]
    assert os.environ[XLA_THREADS_ENV] == "7" and plugin.budget.xla.startswith("not set (no timing test")
    assert plugin.pytest_report_collectionfinish(config) is None  # type: ignore[arg-type]
    plugin.pytest_unconfigure(config)  # type: ignore[arg-type]
    assert os.environ[XLA_THREADS_ENV] == "7"
    # a timing session: set once collection selected a timing test, restored at unconfigure
    plugin = TimingPlugin(session, TimingSettings(threads=2))
    plugin.pytest_collection_modifyitems(None, config, [parity_item, timing_item])  # type: ignore[arg-type]
    assert os.environ[XLA_THREADS_ENV] == "2"
    assert session_budget(session) is plugin.budget
    assert plugin.budget.threads == 2 and plugin.budget.xla == "PJRT_NPROC=2"
    assert "threads: 2 (2, " in (plugin.pytest_report_collectionfinish(config) or "")  # type: ignore[arg-type]
    plugin.pytest_unconfigure(config)  # type: ignore[arg-type]
    assert os.environ[XLA_THREADS_ENV] == "7"
    monkeypatch.delenv(XLA_THREADS_ENV)
    plugin = TimingPlugin(session, TimingSettings(threads=2))
    plugin.apply()
    plugin.pytest_unconfigure(config)  # type: ignore[arg-type]
    assert XLA_THREADS_ENV not in os.environ


def test_the_plugin_fixes_mallocs_pages_with_fresh_placements_in_a_timing_session_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """xla_placements=fresh: fresh_pages once, when collection selected a timing test (before any model is built);
    not for a session without one, nor for another setting. The malloc effect itself: test_timing_placement."""
    monkeypatch.setattr(devices, "runtime_up", lambda: False)
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    fixed: list[str] = []
    monkeypatch.setattr(timing_plugin, "fresh_pages", lambda: fixed.append("fixed"))
    config = FakeConfig()
    timing_item: Any = SimpleNamespace(fixturenames=["xla_timing"])
    parity_item: Any = SimpleNamespace(fixturenames=["xla_parity"])
    for placements, items, calls in (("fresh", [parity_item], []), ("once", [timing_item], []),
                                     ("fresh", [parity_item, timing_item], ["fixed"])):
        fixed.clear()
        session = XlaSession(config, xconfig.XlaConfig(), default_registry())  # type: ignore[arg-type]
        plugin = TimingPlugin(session, TimingSettings(threads=1, placements=placements))
        for _ in range(2):  # idempotent
            plugin.pytest_collection_modifyitems(None, config, items)  # type: ignore[arg-type]
        assert fixed == calls, (placements, items)
        line = plugin.pytest_report_collectionfinish(config) or ""  # type: ignore[arg-type]
        assert ("malloc: fresh pages" in line) == bool(calls)
        plugin.pytest_unconfigure(config)  # type: ignore[arg-type]


def test_the_reports_environment_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(XLA_THREADS_ENV, "1")
    entry = threads.budget_environment(None)
    assert entry == {"threads": auto_threads(threads.available_cores()), "choice": "auto",
                     "cores": threads.available_cores(), "PJRT_NPROC": "1"}
    monkeypatch.delenv(XLA_THREADS_ENV)
    assert threads.budget_environment(3)["threads"] == 3 and threads.budget_environment(3)["PJRT_NPROC"] is None


def test_without_the_plugin_the_budget_says_xla_was_not_set() -> None:
    config = FakeConfig()
    config.stash[timing_settings.KEY] = TimingSettings(threads=3)
    budget = session_budget(XlaSession(config, xconfig.XlaConfig(), default_registry()))  # type: ignore[arg-type]
    assert budget.threads == 3 and budget.xla.startswith("not set")


def test_torch_threads_are_set() -> None:
    import torch

    before = torch.get_num_threads()
    try:
        assert threads.apply_torch_threads(1) == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


# --- the options --------------------------------------------------------------------------------------


def test_threads_option_resolves_auto_numbers_and_its_sources() -> None:
    assert resolve().threads is None  # auto
    assert resolve().sources["xla_threads"] == "default"
    assert resolve(ini={"xla_threads": "2"}).threads == 2
    assert resolve(ini={"xla_threads": "AUTO"}).threads is None
    env = resolve(environ={"PYTEST_XLA_THREADS": "3"})
    assert env.threads == 3 and env.sources["xla_threads"] == "env PYTEST_XLA_THREADS"
    assert resolve(ini={"xla_threads": "4"}).threads == 4


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "", "4097", "100000000000000000000"])
def test_bad_thread_values_are_usage_errors(value: str) -> None:
    """Issue 28: a huge count is refused at start-up (it passed, and failed in the timing test); the valid range
    is said (was "an integer >= 1, or auto")."""
    with pytest.raises(pytest.UsageError) as err:
        resolve(environ={"PYTEST_XLA_THREADS": value})
    assert str(err.value) == (f"xla_threads (env PYTEST_XLA_THREADS): invalid value {value!r}; valid: an integer "
                              "1..4096, or auto")


@pytest.mark.parametrize(("device", "expected"), [("CPU", "eager"), ("cpu", "eager"), ("", "eager"),
                                                  ("TPU", "trace_everytime"), ("CUDA", "trace_everytime")])
def test_auto_baseline_follows_the_device(device: str, expected: str) -> None:
    assert timing_settings.auto_baseline({"PJRT_DEVICE": device}) == expected
    resolved = resolve(environ={"PJRT_DEVICE": device})
    assert resolved.baseline_backend == expected and resolved.baseline_auto
    assert resolved.sources["xla_baseline_backend"] == "default"


def test_an_explicit_baseline_wins_and_auto_is_a_valid_value() -> None:
    chosen = resolve({"xla_baseline_backend": "trace_once"}, environ={"PJRT_DEVICE": "CPU"})
    assert chosen.baseline_backend == "trace_once" and not chosen.baseline_auto
    assert resolve({"xla_baseline_backend": "auto"}, environ={"PJRT_DEVICE": "TPU"}).baseline_backend == \
        "trace_everytime"
    with pytest.raises(pytest.UsageError) as err:
        resolve({"xla_baseline_backend": "warp"})
    assert "--xla-baseline-backend: invalid value 'warp'; valid: trace_once" in str(err.value)
    assert str(err.value).endswith(", auto")


def test_remeasure_setting_its_range_and_repro() -> None:
    """``xla_remeasure`` (a lab setting): 0..5 re-measurements of a disturbed case, default 1; named by the repro."""
    assert resolve().remeasure == 1 and "xla_remeasure" not in TimingSettings().repro_args()
    assert resolve(ini={"xla_remeasure": "0"}).remeasure == 0
    assert resolve(environ={"PYTEST_XLA_REMEASURE": "5"}).repro_args()[-2:] == ["-o", "xla_remeasure=5"]
    for bad in ("6", "-1", "once"):
        with pytest.raises(pytest.UsageError) as err:
            resolve(ini={"xla_remeasure": bad})
        assert str(err.value) == f"xla_remeasure (ini): invalid value {bad!r}; valid: an integer 0..5"
