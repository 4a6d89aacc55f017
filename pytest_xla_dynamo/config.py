"""Options of the plugin: declared once, resolved once into a typed, frozen :class:`XlaConfig`.

Every option is a ``--xla-...`` flag in the ``xla-dynamo`` group, mirrored as an ini key
(``xla_backend``) and as an environment variable (``PYTEST_XLA_BACKEND``; the seed's
``REPLACE_MAXPOOL`` and ``USE_FAKE_TENSOR`` too). Precedence: marker > command line >
environment > ini > default. Raw values stay plain strings (pytest-xdist pickles them); they are
validated at configure time and bad values raise :class:`pytest.UsageError` naming the bad value
and the valid ones. Nothing here imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

GROUP = "xla-dynamo"

TENSOR_MODES = ("eager", "fake")
MODES = ("train", "infer")
REPORT_FORMATS = ("table", "csv", "json", "png")
KNOWN_ISSUE_POLICIES = ("xfail", "run", "skip")
DROPOUT_POLICIES = ("identity", "keep")
DEFAULT_SEED = 1337


@dataclass(frozen=True)
class Option:
    """One plugin option: flag ``--xla-<name>``, ini key ``xla_<name>``, env ``PYTEST_XLA_<NAME>``."""

    name: str
    help: str
    default: str
    flag: bool = False
    metavar: str | None = None
    aliases: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    # maps the raw value of a seed environment variable (e.g. REPLACE_MAXPOOL=1) to an option value
    env_map: Callable[[str, str], str | None] | None = None

    @property
    def dest(self) -> str:
        return "xla_" + self.name.replace("-", "_")

    @property
    def cli(self) -> str:
        return "--xla-" + self.name

    @property
    def envvars(self) -> tuple[str, ...]:
        return ("PYTEST_" + self.dest.upper(), *self.env)


def _replace_maxpool(name: str, value: str) -> str | None:
    return "maxpool_to_avgpool" if value.strip() not in ("", "0", "false", "False") else None


def _use_fake_tensor(name: str, value: str) -> str | None:
    return "fake" if value.strip() not in ("", "0", "false", "False") else "eager"


OPTIONS: tuple[Option, ...] = (
    Option("backend", "backends under test: a name, a comma list, or 'all' ({backends})", "trace_once",
           metavar="NAMES"),
    Option("tier", "model sizes: 'small' (CI-sized, default) or 'full' (torchbench-like)", "small",
           metavar="TIER"),
    Option("models", "models to run, comma list or 'all' (the seed's --only)", "all", metavar="NAMES"),
    Option("modes", "modes to run: comma list of train,infer", "train,infer", metavar="MODES"),
    Option("tensor-mode", "tensor modes for the tensor_mode fixture: comma list of eager,fake "
           "(env USE_FAKE_TENSOR=0/1)", "fake", metavar="MODES", env=("USE_FAKE_TENSOR",),
           env_map=_use_fake_tensor),
    Option("patch", "op patches applied to every test: comma list ({patches}; env REPLACE_MAXPOOL=1)", "",
           metavar="NAMES", env=("REPLACE_MAXPOOL",), env_map=_replace_maxpool),
    Option("dropout", "dropout in the parity suites: 'identity' (patched out, default) or 'keep'",
           "identity", metavar="POLICY"),
    Option("seed", "seed for torch, numpy, random and torch_xla before each test", str(DEFAULT_SEED),
           metavar="INT"),
    Option("steps", "training steps compared per parity case", "2", metavar="INT"),
    Option("tolerance", "tolerance for torch._dynamo.utils.same, overriding the per-model one", "",
           metavar="FLOAT"),
    Option("randomize-input", "replace float example inputs by randn_like (as the harness's "
           "--randomize-input)", "false", flag=True),
    Option("iterations-per-run", "iterations per timed run, each ending in torch_xla.sync() "
           "(the seed's --iterations-per-run)", "1", metavar="INT", aliases=("--iterations-per-run",)),
    Option("repeat", "timed runs per case; baseline and backend runs interleave", "5", metavar="INT"),
    Option("baseline-backend", "backend the speedup is measured against", "eager", metavar="NAME"),
    Option("report", "reports written at the end: comma list of table,csv,json,png", "table",
           metavar="FORMATS"),
    Option("report-dir", "folder for the csv/json/png reports", "xla-report", metavar="DIR"),
    Option("known-issues", "known-issue registry: 'xfail' (strict xfails, default), 'run' (ignore it), "
           "'skip'", "xfail", metavar="POLICY"),
    Option("known-issues-file", "extra known-issue TOML files, comma list", "", metavar="FILES"),
    Option("isolate", "run every test in a fresh interpreter", "false", flag=True),
    Option("expected", "expected-results CSV to gate against", "", metavar="FILE"),
    Option("update-expected", "rewrite the expected-results CSV from this run", "false", flag=True),
    Option("strict-improved", "fail the session on IMPROVED cases too", "false", flag=True),
    Option("min-speedup-ratio", "fail when a speedup falls below RATIO x the stored timing baseline",
           "", metavar="RATIO"),
    Option("timing-baseline", "stored timing baseline (a JSON report) for --xla-min-speedup-ratio", "",
           metavar="FILE"),
    Option("accuracy-runs", "parity runs per case; majority vote, disagreement marks the case flaky",
           "1", metavar="INT"),
    Option("summary", "write a Markdown summary (CI job summary) to FILE", "", metavar="FILE"),
    Option("shard", "run shard I of N of the cases (I in 1..N)", "", metavar="I/N"),
)
OPTIONS_BY_DEST: Mapping[str, Option] = {o.dest: o for o in OPTIONS}


@dataclass(frozen=True)
class XlaConfig:
    """The resolved, validated options of one pytest session (kept in ``config.stash``)."""

    backends: tuple[str, ...] = ("trace_once",)
    tier: str = "small"
    models: tuple[str, ...] = ()
    modes: tuple[str, ...] = MODES
    tensor_modes: tuple[str, ...] = ("fake",)
    patches: tuple[str, ...] = ()
    dropout: str = "identity"
    seed: int = DEFAULT_SEED
    steps: int = 2
    tolerance: float | None = None
    randomize_input: bool = False
    iterations_per_run: int = 1
    repeat: int = 5
    baseline_backend: str = "eager"
    report: tuple[str, ...] = ("table",)
    report_dir: Path = Path("xla-report")
    known_issues: str = "xfail"
    known_issues_files: tuple[Path, ...] = ()
    isolate: bool = False
    expected: Path | None = None
    update_expected: bool = False
    strict_improved: bool = False
    min_speedup_ratio: float | None = None
    timing_baseline: Path | None = None
    accuracy_runs: int = 1
    summary: Path | None = None
    shard: tuple[int, int] | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # option dest -> where its value came from


xla_config_key = pytest.StashKey[XlaConfig]()


def add_options(parser: pytest.Parser, help_values: Mapping[str, str]) -> None:
    """Declare every option in one group, each mirrored as an ini key."""
    group = parser.getgroup(GROUP, "dynamo + torch_xla conformance (pytest-xla-dynamo)")
    for opt in OPTIONS:
        text = opt.help.format(**help_values)
        envs = ", ".join(opt.envvars)
        if opt.flag:
            group.addoption(opt.cli, *opt.aliases, action="store_true", default=None, dest=opt.dest,
                            help=f"{text} [env {envs}]")
        else:
            group.addoption(opt.cli, *opt.aliases, action="store", default=None, dest=opt.dest,
                            metavar=opt.metavar, help=f"{text} (default: {opt.default or 'none'}) [env {envs}]")
        parser.addini(opt.dest, f"{text} (--xla-{opt.name})", default=None)


def raw_value(config: pytest.Config, opt: Option, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The option's raw string and its source: command line > environment > ini > default."""
    env = os.environ if environ is None else environ
    cli = config.getoption(opt.dest, default=None)
    if cli is not None:
        return ("true" if cli is True else str(cli)), "command line"
    for var in opt.envvars:
        if var in env:
            value: str | None = env[var]
            if opt.env_map is not None and var in opt.env:
                value = opt.env_map(var, env[var])
            if value is not None:
                return value, f"env {var}"
    ini = config.getini(opt.dest)
    if ini not in (None, "", []):
        return (" ".join(ini) if isinstance(ini, list) else str(ini)), "ini"
    return opt.default, "default"


def split_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [part.strip() for part in value.replace(" ", ",").split(",") if part.strip()]


def _bad(opt: Option, value: str, valid: Sequence[str] | str) -> pytest.UsageError:
    listed = valid if isinstance(valid, str) else ", ".join(valid)
    return pytest.UsageError(f"{opt.cli}: invalid value {value!r}; valid: {listed}")


def choice_list(opt: Option, value: str, valid: Sequence[str], *, allow_all: bool = True,
                allow_empty: bool = False, aliases: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Validate a comma list against ``valid``; ``all`` expands to every valid value."""
    names = split_list(value)
    if allow_all and names == ["all"]:
        return tuple(valid)
    if not names and not allow_empty:
        raise _bad(opt, value, valid)
    out: list[str] = []
    bad = []
    for name in names:
        name = (aliases or {}).get(name, name)
        if name not in valid:
            bad.append(name)
        elif name not in out:
            out.append(name)
    if bad:
        raise _bad(opt, ",".join(bad), list(valid) + (["all"] if allow_all else []))
    return tuple(out)


def choice(opt: Option, value: str, valid: Sequence[str]) -> str:
    value = value.strip()
    if value not in valid:
        raise _bad(opt, value, valid)
    return value


def to_int(opt: Option, value: str, minimum: int = 1) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _bad(opt, value, f"an integer >= {minimum}") from None
    if number < minimum:
        raise _bad(opt, value, f"an integer >= {minimum}")
    return number


def to_float(opt: Option, value: str) -> float | None:
    if value.strip() == "":
        return None
    try:
        number = float(value)
    except ValueError:
        raise _bad(opt, value, "a positive number") from None
    if not number > 0:
        raise _bad(opt, value, "a positive number")
    return number


def to_bool(opt: Option, value: str) -> bool:
    low = value.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("", "0", "false", "no", "off"):
        return False
    raise _bad(opt, value, "true, false, 1, 0")


def to_path(value: str) -> Path | None:
    return Path(value).expanduser() if value.strip() else None


def to_shard(opt: Option, value: str) -> tuple[int, int] | None:
    if not value.strip():
        return None
    try:
        index, total = (int(x) for x in value.split("/"))
    except ValueError:
        raise _bad(opt, value, "I/N with integers 1 <= I <= N, e.g. 1/4") from None
    if not 1 <= index <= total:
        raise _bad(opt, value, "I/N with integers 1 <= I <= N, e.g. 1/4")
    return index, total


def resolve(config: pytest.Config, *, backends: Sequence[str], backend_aliases: Mapping[str, str],
            models: Sequence[str], patches: Sequence[str],
            environ: Mapping[str, str] | None = None) -> XlaConfig:
    """Read every option once and validate it into an :class:`XlaConfig` (UsageError on bad input)."""
    raw: dict[str, str] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        raw[opt.dest], sources[opt.dest] = raw_value(config, opt, environ)
    o = OPTIONS_BY_DEST

    def get(name: str) -> tuple[Option, str]:
        return o[name], raw[name]

    baseline = choice_list(*get("xla_baseline_backend"), backends, allow_all=False, aliases=backend_aliases)
    if len(baseline) != 1:
        raise _bad(o["xla_baseline_backend"], raw["xla_baseline_backend"], backends)
    values: dict[str, Any] = dict(
        backends=choice_list(*get("xla_backend"), backends, aliases=backend_aliases),
        tier=choice(*get("xla_tier"), ("small", "full")),
        models=choice_list(*get("xla_models"), models),
        modes=choice_list(*get("xla_modes"), MODES),
        tensor_modes=choice_list(*get("xla_tensor_mode"), TENSOR_MODES),
        patches=choice_list(*get("xla_patch"), patches, allow_all=False, allow_empty=True),
        dropout=choice(*get("xla_dropout"), DROPOUT_POLICIES),
        seed=to_int(*get("xla_seed"), minimum=0),
        steps=to_int(*get("xla_steps")),
        tolerance=to_float(*get("xla_tolerance")),
        randomize_input=to_bool(*get("xla_randomize_input")),
        iterations_per_run=to_int(*get("xla_iterations_per_run")),
        repeat=to_int(*get("xla_repeat")),
        baseline_backend=baseline[0],
        report=choice_list(*get("xla_report"), REPORT_FORMATS, allow_empty=True),
        report_dir=to_path(raw["xla_report_dir"]) or Path("xla-report"),
        known_issues=choice(*get("xla_known_issues"), KNOWN_ISSUE_POLICIES),
        known_issues_files=tuple(Path(p) for p in split_list(raw["xla_known_issues_file"])),
        isolate=to_bool(*get("xla_isolate")),
        expected=to_path(raw["xla_expected"]),
        update_expected=to_bool(*get("xla_update_expected")),
        strict_improved=to_bool(*get("xla_strict_improved")),
        min_speedup_ratio=to_float(*get("xla_min_speedup_ratio")),
        timing_baseline=to_path(raw["xla_timing_baseline"]),
        accuracy_runs=to_int(*get("xla_accuracy_runs")),
        summary=to_path(raw["xla_summary"]),
        shard=to_shard(*get("xla_shard")),
    )
    for path in values["known_issues_files"]:
        if not path.is_file():
            raise pytest.UsageError(f"--xla-known-issues-file: no such file {str(path)!r}")
    if values["expected"] is not None and not values["update_expected"] and not values["expected"].is_file():
        raise pytest.UsageError(f"--xla-expected: no such file {str(values['expected'])!r} "
                                "(use --xla-update-expected to create it)")
    if values["update_expected"] and values["expected"] is None:
        raise pytest.UsageError("--xla-update-expected needs --xla-expected=FILE")
    if values["min_speedup_ratio"] is not None and values["timing_baseline"] is None:
        raise pytest.UsageError("--xla-min-speedup-ratio needs --xla-timing-baseline=FILE")
    if values["timing_baseline"] is not None and not values["timing_baseline"].is_file():
        raise pytest.UsageError(f"--xla-timing-baseline: no such file {str(values['timing_baseline'])!r}")
    return XlaConfig(**values, sources=sources)


def get_config(config: pytest.Config) -> XlaConfig:
    """The session's resolved :class:`XlaConfig` (defaults if the plugin did not configure)."""
    return config.stash.get(xla_config_key, XlaConfig())
