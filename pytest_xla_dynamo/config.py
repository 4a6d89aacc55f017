"""The session's configuration: every option's raw value validated once into a typed, frozen :class:`XlaConfig`.

The options are declared in :mod:`pytest_xla_dynamo.options`. Precedence: marker > command line >
environment > ini > default. Values are validated at configure time; a bad value raises
:class:`pytest.UsageError` naming the option (and where its value came from), the bad value and the
valid ones. The typed parsers here (``to_int``, ``choice_list``, ...) are shared with the markers.
Nothing here imports torch.
"""

from __future__ import annotations

import difflib
import math
import os
import shlex
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo.core.constants import MODES, SEED_MAX, TENSOR_MODES
from pytest_xla_dynamo.options import (
    BOOL_VALID,
    DEFAULT_ISOLATE_TIMEOUT,
    DEFAULT_SEED,
    OPTIONS,
    Option,
    parse_bool,
    read_options,
)
from pytest_xla_dynamo.zoo.spec import ALL
from pytest_xla_dynamo.zoo.spec import SEED_COLLECTION as SEED

NATIVE = "native"
XLA_ISA_FLAG = "--xla_cpu_max_isa"  # an entry of XLA_FLAGS, not a variable of its own
#: --xla-cpu-isa: the settings each value caps (applied by pytest_xla_dynamo.workers.cpu_isa)
ISA_VARIABLES: Mapping[str, Mapping[str, str]] = {
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", XLA_ISA_FLAG: "AVX2"},
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx512", XLA_ISA_FLAG: "AVX512"},
    NATIVE: {},
}
CPU_ISAS: tuple[str, ...] = tuple(ISA_VARIABLES)
REPORT_FORMATS = ("table", "csv", "json", "png")
KNOWN_ISSUE_POLICIES = ("xfail", "run", "skip")
TRIAGE_POLICIES = ("auto", "full", "summary", "off")
DROPOUT_POLICIES = ("identity", "keep")
SHARDS_MAX = 1000  # --xla-shard=I/N: N beyond any CI matrix (the split keeps a list of N loads)


@dataclass(frozen=True)
class XlaConfig:
    """The resolved, validated options of one pytest session (``session.get_session(config).xcfg``)."""

    backends: tuple[str, ...] = ("trace_once",)
    tier: str = "small"
    zoo: tuple[str, ...] = ("seed",)
    models: tuple[str, ...] = ()
    modes: tuple[str, ...] = MODES
    tensor_modes: tuple[str, ...] = ("fake",)
    patches: tuple[str, ...] = ()
    dropout: str = "identity"
    seed: int = DEFAULT_SEED
    steps: int = 2
    tolerance: float | None = None
    randomize_input: bool = False
    cpu_isa: str = "avx2"  # --xla-cpu-isa (pytest_xla_dynamo.workers.cpu_isa)
    report: tuple[str, ...] = ("table",)
    report_dir: Path = Path("xla-report")
    known_issues: str = "xfail"
    known_issues_files: tuple[Path, ...] = ()
    triage: str = "auto"
    isolate: bool = False
    isolate_timeout: float = DEFAULT_ISOLATE_TIMEOUT
    expected: Path | None = None
    update_expected: bool = False
    strict_improved: bool = False
    accuracy_runs: int = 1
    summary: Path | None = None
    shard: tuple[int, int] | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # option dest -> where its value came from


def split_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [part.strip() for part in value.replace(" ", ",").split(",") if part.strip()]


def listing(valid: Sequence[str], width: int = 100) -> str:
    """``valid`` as a comma list: on the line where it is short, else wrapped onto indented lines of ``width``."""
    text = ", ".join(valid)
    if len(text) <= width:
        return text
    return "\n  " + "\n  ".join(textwrap.wrap(text, width, break_on_hyphens=False))


def did_you_mean(bad: Sequence[str], valid: Sequence[str]) -> str:
    """``" (did you mean 'a', 'b'?)"``: the names of ``valid`` closest to ``bad`` (any case), or ``""``."""
    lowered = {v.lower(): v for v in valid}
    close = [lowered[b.lower()] for b in bad if b.lower() in lowered]
    close += [c for b in bad for c in difflib.get_close_matches(b, valid, n=3, cutoff=0.6)]
    close = list(dict.fromkeys(close))
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def bad(opt: Option, value: str, valid: Sequence[str] | str, hint: str = "") -> pytest.UsageError:
    listed = valid if isinstance(valid, str) else listing(valid)
    return pytest.UsageError(f"{opt.label}: invalid value {value!r}{hint}; valid: {listed}")


def choice_list(opt: Option, value: str, valid: Sequence[str], *, allow_all: bool = True,
                allow_empty: bool = False, aliases: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Validate a comma list against ``valid``; ``all`` expands to every valid value."""
    names = split_list(value)
    if allow_all and names == ["all"]:
        return tuple(valid)
    if not names and not allow_empty:
        raise bad(opt, value, valid)
    out: list[str] = []
    unknown = []
    for name in names:
        name = (aliases or {}).get(name, name)
        if name not in valid:
            unknown.append(name)
        elif name not in out:
            out.append(name)
    if unknown:
        raise bad(opt, ",".join(unknown), list(valid) + (["all"] if allow_all else []), did_you_mean(unknown, valid))
    return tuple(out)


def choice(opt: Option, value: str, valid: Sequence[str]) -> str:
    value = value.strip()
    if value not in valid:
        raise bad(opt, value, valid)
    return value


def int_range(minimum: int, maximum: int | None = None) -> str:
    """The valid-values text of an integer option: ``an integer >= 1`` or ``an integer 0..4294967295``."""
    return f"an integer >= {minimum}" if maximum is None else f"an integer {minimum}..{maximum}"


def to_int(opt: Option, value: str, minimum: int = 1, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise bad(opt, value, int_range(minimum, maximum)) from None
    if number < minimum or (maximum is not None and number > maximum):
        raise bad(opt, value, int_range(minimum, maximum))
    return number


POSITIVE_FLOAT = "a finite positive number"


def positive_float(value: object) -> float | None:
    """``value`` (a number or its text) as a finite float > 0, or None if it is not one (bools are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number > 0 else None


def to_float(opt: Option, value: str) -> float | None:
    if value.strip() == "":
        return None
    number = positive_float(value)
    if number is None:
        raise bad(opt, value, POSITIVE_FLOAT)
    return number


def to_bool(opt: Option, value: str) -> bool:
    parsed = parse_bool(value)
    if parsed is None:
        raise bad(opt, value, BOOL_VALID)
    return parsed


def to_path(value: str) -> Path | None:
    return Path(value).expanduser() if value.strip() else None


def to_folder(opt: Option, value: str) -> Path:
    """A folder the plugin writes into (``--xla-report-dir``): empty is an error, not the working folder."""
    folder = to_path(value)
    if folder is None:
        raise bad(opt, value, "a folder path (an empty one would write the reports into the working folder)")
    return folder


SHARD_VALID = f"I/N with integers 1 <= I <= N <= {SHARDS_MAX}, e.g. 1/4"


def to_command(opt: Option, value: str) -> tuple[str, ...]:
    """A command split as a shell would (empty: none); its program must be found (a path, or on PATH)."""
    if not value.strip():
        return ()
    try:
        words = tuple(shlex.split(value))
    except ValueError as err:
        raise bad(opt, value, "a command a shell could split", f" ({err})") from None
    if not words or shutil.which(words[0]) is None:
        raise bad(opt, value, "a Python interpreter (a path, or a program on PATH), with any arguments",
                   f" ({(words[0] if words else value)!r} not found)")
    return words


def to_shard(opt: Option, value: str) -> tuple[int, int] | None:
    if not value.strip():
        return None
    try:
        index, total = (int(x) for x in value.split("/"))
    except ValueError:
        raise bad(opt, value, SHARD_VALID) from None
    if not 1 <= index <= total <= SHARDS_MAX:
        raise bad(opt, value, SHARD_VALID)
    return index, total


def _models(given: tuple[Option, str], models: Sequence[str], collections: Mapping[str, Sequence[str]],
            zoo: Sequence[str]) -> tuple[str, ...]:
    """``--xla-models``: unset or ``all`` = the models of the ``--xla-zoo`` collections; given empty (``--xla-models=``,
    a CI variable that was not set) is an error, as ``--xla-zoo=`` is, not every model."""
    opt, value = given
    if opt.source != "default" and not split_list(value):
        raise bad(opt, value, "model names (comma list), or all; leave the option out for the --xla-zoo models")
    if split_list(value) in ([], [ALL]):
        return tuple(m for m in models if any(m in collections[c] for c in zoo))
    return choice_list(opt, value, models)


def resolve(config: pytest.Config, *, backends: Sequence[str], backend_aliases: Mapping[str, str],
            models: Sequence[str], patches: Sequence[str],
            collections: Mapping[str, Sequence[str]] | None = None,
            environ: Mapping[str, str] | None = None) -> XlaConfig:
    """Read every option once and validate it into an :class:`XlaConfig` (UsageError on bad input).

    ``collections``: the zoo's collections and their models (default: every model in ``seed``);
    ``--xla-models=all`` means the models of the ``--xla-zoo`` collections, named models any model."""
    read = _read(config, environ)
    sources = {dest: opt.source for dest, (opt, _) in read.items()}

    def get(name: str) -> tuple[Option, str]:
        return read[name]

    collections = dict(collections) if collections is not None else {SEED: list(models)}
    zoo = choice_list(*get("xla_zoo"), list(collections))
    values: dict[str, Any] = dict(
        backends=choice_list(*get("xla_backend"), backends, aliases=backend_aliases),
        tier=choice(*get("xla_tier"), ("small", "full")),
        zoo=zoo,
        models=_models(get("xla_models"), models, collections, zoo),
        modes=choice_list(*get("xla_modes"), MODES),
        tensor_modes=choice_list(*get("xla_tensor_mode"), TENSOR_MODES),
        patches=choice_list(*get("xla_patch"), patches, allow_all=False, allow_empty=True),
        dropout=choice(*get("xla_dropout"), DROPOUT_POLICIES),
        seed=to_int(*get("xla_seed"), minimum=0, maximum=SEED_MAX),
        steps=to_int(*get("xla_steps")),
        tolerance=to_float(*get("xla_tolerance")),
        randomize_input=to_bool(*get("xla_randomize_input")),
        cpu_isa=choice(*get("xla_cpu_isa"), CPU_ISAS),
        report=choice_list(*get("xla_report"), REPORT_FORMATS, allow_empty=True),
        report_dir=to_folder(*get("xla_report_dir")),
        known_issues=choice(*get("xla_known_issues"), KNOWN_ISSUE_POLICIES),
        known_issues_files=tuple(Path(p) for p in split_list(get("xla_known_issues_file")[1])),
        triage=choice(*get("xla_triage"), TRIAGE_POLICIES),
        isolate=to_bool(*get("xla_isolate")),
        isolate_timeout=to_float(*get("xla_isolate_timeout")) or DEFAULT_ISOLATE_TIMEOUT,
        expected=to_path(get("xla_expected")[1]),
        update_expected=to_bool(*get("xla_update_expected")),
        strict_improved=to_bool(*get("xla_strict_improved")),
        accuracy_runs=to_int(*get("xla_accuracy_runs")),
        summary=to_path(get("xla_summary")[1]),
        shard=to_shard(*get("xla_shard")),
    )
    _check_together(values)
    return XlaConfig(**values, sources=sources)


def _read(config: pytest.Config, environ: Mapping[str, str] | None) -> dict[str, tuple[Option, str]]:
    """Every option read (:func:`~pytest_xla_dynamo.options.read_options`; the seed's variables are checked even
    where the command line overrides them)."""
    env = os.environ if environ is None else environ
    for opt in OPTIONS:
        for var in opt.env:
            if var in env and opt.env_map is not None:
                opt.env_map(var, env[var])
    return read_options(config, OPTIONS, environ)


def _check_together(values: Mapping[str, Any]) -> None:
    """The options that need a file, or another option (UsageError). The gate's files (``--xla-expected``,
    ``--xla-timing-baseline``, ``--xla-summary``) are checked by gating.paths."""
    for path in values["known_issues_files"]:
        if path.is_dir():
            raise pytest.UsageError(f"--xla-known-issues-file: {str(path)!r} is a directory; valid: a TOML file of "
                                    "[[issue]] entries")
        if not path.is_file():
            raise pytest.UsageError(f"--xla-known-issues-file: no such file {str(path)!r}")
    if values["update_expected"] and values["expected"] is None:
        raise pytest.UsageError("--xla-update-expected needs --xla-expected=FILE")
