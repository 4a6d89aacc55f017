"""The options' declarations: every ``--xla-...`` flag, its ini key and environment variables, and how a
raw value is read (command line > environment > ini > default).

Every option is a ``--xla-...`` flag in the ``xla-dynamo`` group (a wing's in its own group: the timing wing's
in :mod:`pytest_xla_dynamo.timing.settings`), mirrored as an ini key (``xla_backend``) and as an environment
variable (``PYTEST_XLA_BACKEND``; the seed's ``REPLACE_MAXPOOL`` and ``USE_FAKE_TENSOR`` too, read with the
plugin's one boolean parser). A setting few runs change (a lab setting, ``on_cli=False``) has no flag: its ini
key (``-o xla_dropout=keep``) and environment variables alone. Raw values stay plain strings (pytest-xdist
pickles them); :mod:`pytest_xla_dynamo.config` validates them into the frozen ``XlaConfig``. Nothing here
imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import pytest

GROUP = "xla-dynamo"
DESCRIPTION = "dynamo + torch_xla conformance (pytest-xla-dynamo)"
DEFAULT_SEED = 1337
DEFAULT_ISOLATE_TIMEOUT = 1800.0  # seconds an isolated test may run (xla_isolate_timeout)
BOOL_TRUE = ("1", "true", "yes", "on")
BOOL_FALSE = ("", "0", "false", "no", "off")
#: the valid values of every boolean the plugin reads (flags, environment variables), for messages
BOOL_VALID = "1, true, yes, on, 0, false, no, off (any case), or empty"


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
    # where the value being validated came from ("env PYTEST_XLA_SEED", "ini"): set while resolving
    source: str = ""
    # False: a lab setting, an ini key and environment variables only (no flag in ``pytest --help``)
    on_cli: bool = True

    @property
    def shown(self) -> str:
        """How messages name it: the flag, or a lab setting's ini key."""
        return self.cli if self.on_cli else self.dest

    @property
    def label(self) -> str:
        """The flag (or ini key), and where its value came from unless that is the command line: for messages."""
        return self.shown if self.source in ("", "command line", "default") else f"{self.shown} ({self.source})"

    def arg(self, value: str | None = None) -> list[str]:
        """The command-line words that give this option ``value`` (None: a flag, on): ``--xla-<name>=VALUE``, or
        for a lab setting (no flag) ``-o xla_<name>=VALUE``."""
        if self.on_cli:
            return [self.cli if value is None else f"{self.cli}={value}"]
        return ["-o", f"{self.dest}={'true' if value is None else value}"]

    @property
    def dest(self) -> str:
        return "xla_" + self.name.replace("-", "_")

    @property
    def cli(self) -> str:
        return "--xla-" + self.name

    @property
    def envvars(self) -> tuple[str, ...]:
        return ("PYTEST_" + self.dest.upper(), *self.env)


def parse_bool(value: str) -> bool | None:
    """THE boolean parser of the plugin: ``1/true/yes/on`` -> True, ``0/false/no/off``/empty -> False
    (case-insensitive, surrounding blanks ignored), anything else -> None (the caller reports it)."""
    low = value.strip().lower()
    if low in BOOL_TRUE:
        return True
    if low in BOOL_FALSE:
        return False
    return None


def _env_bool(name: str, value: str) -> bool:
    parsed = parse_bool(value)
    if parsed is None:
        raise pytest.UsageError(f"environment variable {name}: invalid value {value!r}; valid: {BOOL_VALID}")
    return parsed


def _replace_maxpool(name: str, value: str) -> str | None:
    return "maxpool_to_avgpool" if _env_bool(name, value) else None


def _use_fake_tensor(name: str, value: str) -> str | None:
    return "fake" if _env_bool(name, value) else "eager"


OPTIONS: tuple[Option, ...] = (
    Option("backend", "backends under test: a name, a comma list, or 'all' ({backends})", "trace_once",
           metavar="NAMES"),
    Option("tier", "model sizes: 'small' (CI-sized, default) or 'full' (torchbench-like)", "small",
           metavar="TIER"),
    Option("zoo", "model collections: a name or comma list ({collections}), or 'all'", "seed", metavar="NAMES"),
    Option("models", "models to run, comma list (any collection) or 'all' (every model of --xla-zoo; the seed's "
           "--only)", "all", metavar="NAMES"),
    Option("modes", "modes to run: comma list of train,infer", "train,infer", metavar="MODES"),
    Option("tensor-mode", "tensor modes for the tensor_mode fixture: comma list of eager,fake "
           "(env USE_FAKE_TENSOR=0/1)", "fake", metavar="MODES", env=("USE_FAKE_TENSOR",),
           env_map=_use_fake_tensor),
    Option("patch", "op patches applied to every test: comma list ({patches}; env REPLACE_MAXPOOL=1)", "",
           metavar="NAMES", env=("REPLACE_MAXPOOL",), env_map=_replace_maxpool),
    Option("dropout", "dropout in the parity suites: 'identity' (patched out, default) or 'keep'",
           "identity", metavar="POLICY", on_cli=False),
    Option("seed", "seed for torch, numpy, random and torch_xla before each test (0..4294967295)", str(DEFAULT_SEED),
           metavar="INT"),
    Option("steps", "training steps compared per parity case", "2", metavar="INT"),
    Option("tolerance", "tolerance for torch._dynamo.utils.same, overriding the per-model one", "",
           metavar="FLOAT"),
    Option("randomize-input", "replace float example inputs by randn_like (as the harness's "
           "--randomize-input)", "false", flag=True, on_cli=False),
    Option("cpu-isa", "instruction set CPU kernels may use (oneDNN's ONEDNN_MAX_CPU_ISA, ATen's "
           "ATEN_CPU_CAPABILITY and XLA:CPU's --xla_cpu_max_isa, set before torch runs): {cpu_isas}; 'avx2' "
           "(default) runs the kernels the expected files were recorded with, 'native' leaves the machine's "
           "fastest kernels",
           "avx2", metavar="ISA"),
    Option("report", "reports written at the end: comma list of table,csv,json,png", "table",
           metavar="FORMATS"),
    Option("report-dir", "folder for the csv/json/png reports", "xla-report", metavar="DIR"),
    Option("known-issues", "known-issue registry: 'xfail' (strict xfails, default), 'run' (ignore it), "
           "'skip'", "xfail", metavar="POLICY"),
    Option("known-issues-file", "extra known-issue TOML files, comma list", "", metavar="FILES"),
    Option("triage", "what a failure says on top of its traceback: 'auto' (stage, matching known issue, "
           "and for an accuracy failure not declared in the registry the diverging module and the graph-split "
           "check), 'full' (those for declared failures too), 'summary' (no reruns), 'off'", "auto",
           metavar="POLICY"),
    Option("isolate", "run every test in a fresh interpreter", "false", flag=True),
    Option("isolate-timeout", "seconds an isolated test may run before its child is ended and the test fails "
           "with its Python stack (marker xla_isolated(timeout=S) overrides)", "1800", metavar="SECONDS",
           on_cli=False),
    Option("expected", "expected-results CSV to gate against", "", metavar="FILE"),
    Option("update-expected", "rewrite the expected-results CSV from this run", "false", flag=True),
    Option("strict-improved", "fail the session on IMPROVED cases too", "false", flag=True, on_cli=False),
    Option("accuracy-runs", "parity runs per case; majority vote, disagreement marks the case flaky",
           "1", metavar="INT", on_cli=False),
    Option("summary", "write a Markdown summary (CI job summary) to FILE", "", metavar="FILE"),
    Option("shard", "run shard I of N of the cases (I in 1..N)", "", metavar="I/N"),
    Option("ops", "OpInfo ops of the op suite (suites/test_ops.py): 'smoke', 'all', 'none', or a comma list of op "
           "ids or globs (nn.functional.*)", "smoke", metavar="OPS"),
    Option("write-repro", "write a standalone reproducer (torch and torch_xla only) of each failing op sample to "
           "DIR", "", metavar="DIR"),
)
OPTIONS_BY_DEST: Mapping[str, Option] = {o.dest: o for o in OPTIONS}


def help_texts(opt: Option, help_values: Mapping[str, str]) -> tuple[str, str]:
    """The help of the option's flag and of its ini key, the lists of valid values filled in."""
    text = opt.help.format(**help_values)
    envs = ", ".join(opt.envvars)
    flag = f"{text} [env {envs}]" if opt.flag else f"{text} (default: {opt.default or 'none'}) [env {envs}]"
    if not opt.on_cli:
        return flag, f"lab setting (ini and environment only): {flag}"
    return flag, f"{text} (--xla-{opt.name})"


#: every option declared in this process, by dest: the plugin's own and each wing's (:func:`add_options`)
_DECLARED: dict[str, Option] = {}


def declared() -> tuple[Option, ...]:
    """Every option of the plugin: :data:`OPTIONS` and the options its wings declared (the timing wing's)."""
    return tuple({**OPTIONS_BY_DEST, **_DECLARED}.values())


def add_options(parser: pytest.Parser, help_values: Mapping[str, str], options: Sequence[Option] = OPTIONS,
                group: tuple[str, str] = (GROUP, DESCRIPTION)) -> None:
    """Declare ``options`` in one group (name, description), each mirrored as an ini key (a lab setting: the ini
    key alone)."""
    found = parser.getgroup(*group)
    for opt in options:
        _DECLARED[opt.dest] = opt
        flag_help, ini_help = help_texts(opt, help_values)
        if opt.on_cli and opt.flag:
            found.addoption(opt.cli, *opt.aliases, action="store_true", default=None, dest=opt.dest,
                            help=flag_help)
        elif opt.on_cli:
            found.addoption(opt.cli, *opt.aliases, action="store", default=None, dest=opt.dest,
                            metavar=opt.metavar, help=flag_help)
        parser.addini(opt.dest, ini_help, default=None)


def fill_help(config: pytest.Config, help_values: Mapping[str, str]) -> None:
    """Rewrite the options' help with ``help_values`` before ``--help`` prints it (the values are costly to
    list, so :func:`add_options` got placeholders). Reaches into pytest's parser; where it is not there,
    the placeholders stay."""
    parser = getattr(config, "_parser", None)
    actions = getattr(getattr(parser, "optparser", None), "_actions", [])
    inidict = getattr(parser, "_inidict", {})
    for opt in declared():
        flag_help, ini_help = help_texts(opt, help_values)
        for action in actions:
            if action.dest == opt.dest:
                action.help = flag_help
        if opt.dest in inidict:
            inidict[opt.dest] = (ini_help, *inidict[opt.dest][1:])


def read_options(config: pytest.Config, opts: Iterable[Option],
                 environ: Mapping[str, str] | None = None) -> dict[str, tuple[Option, str]]:
    """Every option of ``opts`` read once, by dest: the option marked with where its value came from
    (``source``), and its raw string (:func:`raw_value`)."""
    read: dict[str, tuple[Option, str]] = {}
    for opt in opts:
        value, source = raw_value(config, opt, environ)
        read[opt.dest] = (replace(opt, source=source), value)
    return read


def raw_value(config: pytest.Config, opt: Option, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The option's raw string and its source: command line > environment > ini > default (a lab setting:
    environment > ini > default)."""
    env = os.environ if environ is None else environ
    cli = config.getoption(opt.dest, default=None) if opt.on_cli else None
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
