"""config.py, unit tests: the one bool parser, the seed's environment variables, ranges of numbers,
precedence of the raw values. The pytester sessions are in test_options.py and test_faults.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_xla_dynamo import config as cfg
from pytest_xla_dynamo.options import BOOL_VALID, parse_bool
from pytest_xla_dynamo.timing import settings as timing_settings

BACKENDS = ["trace_once", "trace_everytime", "eager"]
TRUE = ["1", "true", "TRUE", "True", "yes", "Yes", "on", "ON", " on "]
FALSE = ["", "0", "false", "FALSE", "False", "no", "NO", "off", "Off", "  "]
NOT_BOOL = ["2", "maybe", "y", "n", "-1", "truee", "1.0", "nein"]


class Args:
    """What :func:`config.resolve` asks of a ``pytest.Config``: command-line and ini values."""

    def __init__(self, cli: Mapping[str, Any] | None = None, ini: Mapping[str, str] | None = None) -> None:
        self.cli = dict(cli or {})
        self.ini = dict(ini or {})

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.cli.get(name, default)

    def getini(self, name: str) -> Any:
        return self.ini.get(name)


def resolve(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
            ini: Mapping[str, str] | None = None) -> cfg.XlaConfig:
    return cfg.resolve(Args(cli, ini), backends=BACKENDS, backend_aliases={"openxla": "trace_once"},  # type: ignore[arg-type]
                       models=["resnet18", "resnet50"], patches=["maxpool_to_avgpool", "dropout_to_identity"],
                       environ=dict(env or {}))


def resolve_timing(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                   ini: Mapping[str, str] | None = None) -> timing_settings.TimingSettings:
    """The timing wing's settings of the same values (timing.settings.resolve)."""
    return timing_settings.resolve(Args(cli, ini), backends=BACKENDS,  # type: ignore[arg-type]
                                   backend_aliases={"openxla": "trace_once"}, environ=dict(env or {}))


def usage_error(**kwargs: Any) -> str:
    """The usage error of the values, the session's options' or the timing wing's."""
    with pytest.raises(pytest.UsageError) as info:
        resolve(**kwargs)
        resolve_timing(**kwargs)
    return str(info.value)


# --- the bool parser ------------------------------------------------------------------------------


def test_parse_bool() -> None:
    assert [parse_bool(v) for v in TRUE] == [True] * len(TRUE)
    assert [parse_bool(v) for v in FALSE] == [False] * len(FALSE)
    assert [parse_bool(v) for v in NOT_BOOL] == [None] * len(NOT_BOOL)


def test_flags_use_the_bool_parser() -> None:
    assert resolve(env={"PYTEST_XLA_ISOLATE": "On"}).isolate is True
    assert resolve(env={"PYTEST_XLA_ISOLATE": "off"}).isolate is False
    assert resolve(cli={"xla_isolate": True}).isolate is True
    msg = usage_error(env={"PYTEST_XLA_ISOLATE": "maybe"})
    assert msg == f"--xla-isolate (env PYTEST_XLA_ISOLATE): invalid value 'maybe'; valid: {BOOL_VALID}"
    assert usage_error(cli={"xla_isolate": "maybe"}) == f"--xla-isolate: invalid value 'maybe'; valid: {BOOL_VALID}"


def test_messages_say_where_a_bad_value_came_from() -> None:
    assert usage_error(ini={"xla_seed": "abc"}) == (
        "--xla-seed (ini): invalid value 'abc'; valid: an integer 0..4294967295")
    assert usage_error(env={"PYTEST_XLA_TIER": "huge"}) == (
        "--xla-tier (env PYTEST_XLA_TIER): invalid value 'huge'; valid: small, full")


def test_placements_are_step_run_once_fresh_or_huge(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_timing().placements == "once"
    assert resolve_timing(env={"PYTEST_XLA_PLACEMENTS": "step"}).placements == "step"
    assert usage_error(ini={"xla_placements": "always"}) == (
        "xla_placements (ini): invalid value 'always'; valid: step, run, once, fresh, huge")
    monkeypatch.setattr(timing_settings.platform, "libc_ver", lambda: ("glibc", "2.36"))
    assert resolve_timing(ini={"xla_placements": "fresh"}).placements == "fresh"
    monkeypatch.setattr(timing_settings.platform, "libc_ver", lambda: ("", ""))  # musl, macOS: no mallopt to fix
    assert usage_error(ini={"xla_placements": "fresh"}) == (
        "xla_placements=fresh: needs glibc's malloc (mallopt), which this platform does not have; valid here: "
        "step, run, once, huge")
    monkeypatch.setattr(timing_settings, "thp_mode", lambda: "madvise")
    assert resolve_timing(ini={"xla_placements": "huge"}).placements == "huge"
    for mode in ("never", None):  # THP off, or not Linux
        monkeypatch.setattr(timing_settings, "thp_mode", lambda mode=mode: mode)
        assert usage_error(env={"PYTEST_XLA_PLACEMENTS": "huge"}) == (
            "xla_placements=huge: needs the kernel's transparent huge pages (Linux, "
            f"/sys/kernel/mm/transparent_hugepage/enabled 'always' or 'madvise'; here: {mode or 'none'}); valid here: "
            "step, run, once, fresh")


# --- the seed's environment variables -------------------------------------------------------------


@pytest.mark.parametrize("value", TRUE)
def test_seed_variables_on(value: str) -> None:
    assert resolve(env={"REPLACE_MAXPOOL": value}).patches == ("maxpool_to_avgpool",)
    assert resolve(env={"USE_FAKE_TENSOR": value}).tensor_modes == ("fake",)


@pytest.mark.parametrize("value", FALSE)
def test_seed_variables_off(value: str) -> None:
    xcfg = resolve(env={"REPLACE_MAXPOOL": value, "USE_FAKE_TENSOR": value})
    assert xcfg.patches == ()
    assert xcfg.tensor_modes == ("eager",)
    assert xcfg.sources["xla_tensor_mode"] == "env USE_FAKE_TENSOR"
    assert xcfg.sources["xla_patch"] == "default"  # off: the ini or the default decides


@pytest.mark.parametrize("var", ["REPLACE_MAXPOOL", "USE_FAKE_TENSOR"])
@pytest.mark.parametrize("value", NOT_BOOL)
def test_seed_variables_bad_values(var: str, value: str) -> None:
    assert usage_error(env={var: value}) == (
        f"environment variable {var}: invalid value {value!r}; valid: 1, true, yes, on, 0, false, no, off "
        "(any case), or empty")


def test_bad_seed_variable_fails_even_where_the_command_line_overrides_it() -> None:
    msg = usage_error(cli={"xla_patch": "dropout_to_identity"}, env={"REPLACE_MAXPOOL": "maybe"})
    assert "REPLACE_MAXPOOL: invalid value 'maybe'" in msg


def test_seed_variables_under_the_plugin_variables() -> None:
    """PYTEST_XLA_* comes first; the seed's variable is the fallback."""
    xcfg = resolve(env={"PYTEST_XLA_TENSOR_MODE": "fake,eager", "USE_FAKE_TENSOR": "0"})
    assert xcfg.tensor_modes == ("fake", "eager")
    assert xcfg.sources["xla_tensor_mode"] == "env PYTEST_XLA_TENSOR_MODE"


# --- numbers --------------------------------------------------------------------------------------


def test_seed_range() -> None:
    assert resolve(cli={"xla_seed": "0"}).seed == 0
    assert resolve(cli={"xla_seed": str(2**32 - 1)}).seed == 2**32 - 1
    for bad in (str(2**32), "-1", "abc", "1.5", ""):
        assert usage_error(cli={"xla_seed": bad}) == (
            f"--xla-seed: invalid value {bad!r}; valid: an integer 0..4294967295")


def test_other_integers_keep_their_minimum() -> None:
    assert usage_error(cli={"xla_steps": "0"}) == "--xla-steps: invalid value '0'; valid: an integer >= 1"
    assert resolve(cli={"xla_steps": "100000000000"}).steps == 100000000000


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan", "NaN", "0", "-1", "abc", "1e400"])
def test_tolerance_is_finite_and_positive(bad: str) -> None:
    assert usage_error(cli={"xla_tolerance": bad}) == (
        f"--xla-tolerance: invalid value {bad!r}; valid: a finite positive number")


@pytest.mark.parametrize("bad", ["inf", "nan", "0", "-2"])
def test_min_speedup_ratio_is_finite_and_positive(bad: str, tmp_path: Any) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text("{}")
    msg = usage_error(cli={"xla_min_speedup_ratio": bad, "xla_timing_baseline": str(baseline)})
    assert msg == f"--xla-min-speedup-ratio: invalid value {bad!r}; valid: a finite positive number"


def test_good_floats() -> None:
    assert resolve(cli={"xla_tolerance": "1e-3"}).tolerance == 1e-3
    assert resolve(cli={"xla_tolerance": " 0.5 "}).tolerance == 0.5
    assert resolve().tolerance is None


def test_positive_float() -> None:
    assert cfg.positive_float(3) == 3.0
    assert cfg.positive_float("2.5") == 2.5
    assert cfg.positive_float(1e-9) == 1e-9
    for bad in (0, -1, math.inf, math.nan, "abc", "inf", True, None, [1], ""):
        assert cfg.positive_float(bad) is None, bad


def test_int_range_text() -> None:
    assert cfg.int_range(1) == "an integer >= 1"
    assert cfg.int_range(0, cfg.SEED_MAX) == "an integer 0..4294967295"


# --- precedence of raw values ---------------------------------------------------------------------


def test_precedence() -> None:
    ini = {"xla_seed": "7", "xla_backend": "eager"}
    assert resolve(ini=ini).seed == 7
    assert resolve(ini=ini, env={"PYTEST_XLA_SEED": "8"}).seed == 8
    xcfg = resolve(cli={"xla_seed": "9"}, ini=ini, env={"PYTEST_XLA_SEED": "8"})
    assert (xcfg.seed, xcfg.sources["xla_seed"]) == (9, "command line")
    assert (xcfg.backends, xcfg.sources["xla_backend"]) == (("eager",), "ini")
    assert resolve().sources["xla_seed"] == "default"


# --- zoo collections ---------------------------------------------------------------------------------------


def _zoo(cli: Mapping[str, Any]) -> cfg.XlaConfig:
    return cfg.resolve(Args(cli), backends=BACKENDS, backend_aliases={},  # type: ignore[arg-type]
                       models=["resnet18", "resnet50", "timm.convnext_atto", "transformers.gpt2"], patches=[],
                       collections={"seed": ["resnet18", "resnet50"], "timm": ["timm.convnext_atto"],
                                    "transformers": ["transformers.gpt2"]}, environ={})


def test_zoo_selects_collections_and_models_pick_across_them() -> None:
    assert _zoo({}).models == ("resnet18", "resnet50")  # default: the seed
    assert _zoo({"xla_zoo": "timm"}).models == ("timm.convnext_atto",)
    assert _zoo({"xla_zoo": "all"}).models == ("resnet18", "resnet50", "timm.convnext_atto", "transformers.gpt2")
    assert _zoo({"xla_zoo": "transformers,seed"}).zoo == ("transformers", "seed")
    # named models come from any collection, whatever --xla-zoo says
    assert _zoo({"xla_models": "transformers.gpt2,resnet18"}).models == ("transformers.gpt2", "resnet18")
    with pytest.raises(pytest.UsageError,
                       match=r"--xla-zoo: invalid value 'nope'; valid: seed, timm, transformers, all"):
        _zoo({"xla_zoo": "nope"})
