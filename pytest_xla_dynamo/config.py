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
import platform
import shlex
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_xla_dynamo.core.constants import MODES, SEED_MAX, TENSOR_MODES
from pytest_xla_dynamo.core.machine import THP_SETTING, can_pin, cpu_list, parse_cpus, thp_mode, usable_cpus
from pytest_xla_dynamo.options import (
    BOOL_VALID,
    DEFAULT_ISOLATE_TIMEOUT,
    DEFAULT_MIN_RUN_TIME,
    DEFAULT_SEED,
    MIN_RUN_TIME_MAX,
    OPTIONS,
    OPTIONS_BY_DEST,
    Option,
    parse_bool,
    raw_value,
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
PLACEMENTS = ("step", "run", "once", "fresh", "huge")  # --xla-placements (pytest_xla_dynamo.timing.placement)
SHARDS_MAX = 1000  # --xla-shard=I/N: N beyond any CI matrix (the split keeps a list of N loads)
THREADS_MAX = 4096  # --xla-threads: beyond any machine's cores (torch takes a C int)
MIN_AB_PAIRS = 3  # --xla-timing-base-python: the fewest pairs whose spread gives a noise (timing.noise)
THP_MODES = ("always", "madvise")  # the kernel's modes in which an madvise(MADV_HUGEPAGE) gets huge pages
MAX_TIMING_PROCESSES = 15  # --xla-timing-processes: a typo guard (each process compiles the case again)


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
    iterations_per_run: int = 1
    repeat: int = 5
    min_run_time: float = DEFAULT_MIN_RUN_TIME  # --xla-min-run-time, seconds (0: runs not calibrated)
    timing_processes: int = 1  # --xla-timing-processes (pytest_xla_dynamo.timing.across)
    placements: str = "once"  # --xla-placements (timing.placement): once, anew per timed step or run, fresh or huge
    timing_cpus: tuple[int, ...] = ()  # --xla-timing-cpus (timing.affinity): the timed runs' CPUs; (): the OS's
    baseline_backend: str = "eager"
    baseline_auto: bool = False  # baseline_backend came from 'auto' (see auto_baseline)
    threads: int | None = None  # --xla-threads; None: auto (pytest_xla_dynamo.timing.threads.auto_threads)
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
    min_speedup_ratio: float | None = None
    timing_baseline: Path | None = None
    timing_base_python: tuple[str, ...] = ()  # --xla-timing-base-python, split as a shell would (timing.across)
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


def _bad(opt: Option, value: str, valid: Sequence[str] | str, hint: str = "") -> pytest.UsageError:
    listed = valid if isinstance(valid, str) else listing(valid)
    return pytest.UsageError(f"{opt.label}: invalid value {value!r}{hint}; valid: {listed}")


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
        raise _bad(opt, ",".join(bad), list(valid) + (["all"] if allow_all else []), did_you_mean(bad, valid))
    return tuple(out)


def choice(opt: Option, value: str, valid: Sequence[str]) -> str:
    value = value.strip()
    if value not in valid:
        raise _bad(opt, value, valid)
    return value


def int_range(minimum: int, maximum: int | None = None) -> str:
    """The valid-values text of an integer option: ``an integer >= 1`` or ``an integer 0..4294967295``."""
    return f"an integer >= {minimum}" if maximum is None else f"an integer {minimum}..{maximum}"


def to_int(opt: Option, value: str, minimum: int = 1, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _bad(opt, value, int_range(minimum, maximum)) from None
    if number < minimum or (maximum is not None and number > maximum):
        raise _bad(opt, value, int_range(minimum, maximum))
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
        raise _bad(opt, value, POSITIVE_FLOAT)
    return number


MIN_RUN_TIME_VALID = f"a number of seconds 0..{MIN_RUN_TIME_MAX:g} (0: off, runs of exactly --xla-iterations-per-run)"


def to_seconds(opt: Option, value: str) -> float:
    """``--xla-min-run-time``: a finite number of seconds 0..:data:`MIN_RUN_TIME_MAX`."""
    try:
        number = float(value)
    except ValueError:
        raise _bad(opt, value, MIN_RUN_TIME_VALID) from None
    if not (math.isfinite(number) and 0 <= number <= MIN_RUN_TIME_MAX):
        raise _bad(opt, value, MIN_RUN_TIME_VALID)
    return number


def to_bool(opt: Option, value: str) -> bool:
    parsed = parse_bool(value)
    if parsed is None:
        raise _bad(opt, value, BOOL_VALID)
    return parsed


def to_path(value: str) -> Path | None:
    return Path(value).expanduser() if value.strip() else None


def to_folder(opt: Option, value: str) -> Path:
    """A folder the plugin writes into (``--xla-report-dir``): empty is an error, not the working folder."""
    folder = to_path(value)
    if folder is None:
        raise _bad(opt, value, "a folder path (an empty one would write the reports into the working folder)")
    return folder


SHARD_VALID = f"I/N with integers 1 <= I <= N <= {SHARDS_MAX}, e.g. 1/4"


def to_command(opt: Option, value: str) -> tuple[str, ...]:
    """A command split as a shell would (empty: none); its program must be found (a path, or on PATH)."""
    if not value.strip():
        return ()
    try:
        words = tuple(shlex.split(value))
    except ValueError as err:
        raise _bad(opt, value, "a command a shell could split", f" ({err})") from None
    if not words or shutil.which(words[0]) is None:
        raise _bad(opt, value, "a Python interpreter (a path, or a program on PATH), with any arguments",
                   f" ({(words[0] if words else value)!r} not found)")
    return words


CPUS_VALID = "a CPU list as taskset -c takes it (1, 0-1, 0,2) of the CPUs this process may run on: {usable}"


def to_cpus(opt: Option, value: str) -> tuple[int, ...]:
    """``--xla-timing-cpus`` (:mod:`pytest_xla_dynamo.timing.affinity`): a CPU list of CPUs this process may run on
    (empty: none)."""
    if not value.strip():
        return ()
    if not can_pin():
        raise _bad(opt, value, "empty (this platform cannot pin threads: Linux's sched_setaffinity is needed)")
    usable = sorted(usable_cpus())
    valid = CPUS_VALID.format(usable=cpu_list(usable) or "unknown")
    try:
        cpus = parse_cpus(value)
    except ValueError:
        raise _bad(opt, value, valid) from None
    if missing := [c for c in cpus if c not in usable]:
        raise _bad(opt, value, valid, f" (CPU {cpu_list(missing)} not available)")
    return cpus


def to_shard(opt: Option, value: str) -> tuple[int, int] | None:
    if not value.strip():
        return None
    try:
        index, total = (int(x) for x in value.split("/"))
    except ValueError:
        raise _bad(opt, value, SHARD_VALID) from None
    if not 1 <= index <= total <= SHARDS_MAX:
        raise _bad(opt, value, SHARD_VALID)
    return index, total


THREADS_VALID = f"an integer 1..{THREADS_MAX}, or auto"


def to_threads(opt: Option, value: str) -> int | None:
    """``--xla-threads``: an integer 1..:data:`THREADS_MAX`, or ``auto`` (None)."""
    if value.strip().lower() == "auto":
        return None
    try:
        return to_int(opt, value.strip(), maximum=THREADS_MAX)
    except pytest.UsageError:
        raise _bad(opt, value, THREADS_VALID) from None


def auto_baseline(environ: Mapping[str, str]) -> str:
    """``--xla-baseline-backend=auto``: CPU eager where the XLA device is the CPU (``PJRT_DEVICE``, CPU when
    unset), else ``trace_everytime`` (the seed's comparison on the same device). Touches no device."""
    device = environ.get("PJRT_DEVICE", "").strip().upper() or "CPU"
    return "eager" if device == "CPU" else "trace_everytime"


def _models(given: tuple[Option, str], models: Sequence[str], collections: Mapping[str, Sequence[str]],
            zoo: Sequence[str]) -> tuple[str, ...]:
    """``--xla-models``: unset or ``all`` = the models of the ``--xla-zoo`` collections; given empty (``--xla-models=``,
    a CI variable that was not set) is an error, as ``--xla-zoo=`` is, not every model."""
    opt, value = given
    if opt.source != "default" and not split_list(value):
        raise _bad(opt, value, "model names (comma list), or all; leave the option out for the --xla-zoo models")
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
    env = os.environ if environ is None else environ
    raw, sources = _raw_values(config, environ)
    o = OPTIONS_BY_DEST

    def get(name: str) -> tuple[Option, str]:
        return replace(o[name], source=sources[name]), raw[name]

    collections = dict(collections) if collections is not None else {SEED: list(models)}
    zoo = choice_list(*get("xla_zoo"), list(collections))
    baseline = _baseline(get("xla_baseline_backend"), backends, backend_aliases)
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
        iterations_per_run=to_int(*get("xla_iterations_per_run")),
        repeat=to_int(*get("xla_repeat")),
        min_run_time=to_seconds(*get("xla_min_run_time")),
        timing_processes=to_int(*get("xla_timing_processes"), maximum=MAX_TIMING_PROCESSES),
        placements=choice(*get("xla_placements"), PLACEMENTS),
        timing_cpus=to_cpus(*get("xla_timing_cpus")),
        baseline_backend=auto_baseline(env) if baseline == "auto" else baseline,
        baseline_auto=baseline == "auto",
        threads=to_threads(*get("xla_threads")),
        cpu_isa=choice(*get("xla_cpu_isa"), CPU_ISAS),
        report=choice_list(*get("xla_report"), REPORT_FORMATS, allow_empty=True),
        report_dir=to_folder(*get("xla_report_dir")),
        known_issues=choice(*get("xla_known_issues"), KNOWN_ISSUE_POLICIES),
        known_issues_files=tuple(Path(p) for p in split_list(raw["xla_known_issues_file"])),
        triage=choice(*get("xla_triage"), TRIAGE_POLICIES),
        isolate=to_bool(*get("xla_isolate")),
        isolate_timeout=to_float(*get("xla_isolate_timeout")) or DEFAULT_ISOLATE_TIMEOUT,
        expected=to_path(raw["xla_expected"]),
        update_expected=to_bool(*get("xla_update_expected")),
        strict_improved=to_bool(*get("xla_strict_improved")),
        min_speedup_ratio=to_float(*get("xla_min_speedup_ratio")),
        timing_baseline=to_path(raw["xla_timing_baseline"]),
        timing_base_python=to_command(*get("xla_timing_base_python")),
        accuracy_runs=to_int(*get("xla_accuracy_runs")),
        summary=to_path(raw["xla_summary"]),
        shard=to_shard(*get("xla_shard")),
    )
    _check_together(values)
    return XlaConfig(**values, sources=sources)


def _baseline(got: tuple[Option, str], backends: Sequence[str], aliases: Mapping[str, str]) -> str:
    """``--xla-baseline-backend``: one backend name, or 'auto'."""
    valid = [*backends, "auto"]
    baseline = choice_list(*got, valid, allow_all=False, aliases=aliases)
    if len(baseline) != 1:
        raise _bad(got[0], got[1], valid)
    return baseline[0]


def _raw_values(config: pytest.Config, environ: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """Every option's raw value and where it came from, by dest (the seed's variables are checked even where the
    command line overrides them)."""
    env = os.environ if environ is None else environ
    for opt in OPTIONS:
        for var in opt.env:
            if var in env and opt.env_map is not None:
                opt.env_map(var, env[var])
    raw: dict[str, str] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        raw[opt.dest], sources[opt.dest] = raw_value(config, opt, environ)
    return raw, sources


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
    if values["min_speedup_ratio"] is not None and values["timing_baseline"] is None \
            and not values["timing_base_python"]:
        raise pytest.UsageError("--xla-min-speedup-ratio needs --xla-timing-baseline=FILE (a stored baseline) or "
                                "--xla-timing-base-python=COMMAND (the base build measured beside this one)")
    if values["timing_base_python"]:
        if values["timing_baseline"] is not None:
            raise pytest.UsageError("--xla-timing-base-python and --xla-timing-baseline: give one (the base build "
                                    "measured in this job, or a stored baseline), not both")
        if values["timing_processes"] < MIN_AB_PAIRS:
            raise pytest.UsageError(f"--xla-timing-base-python needs --xla-timing-processes >= {MIN_AB_PAIRS} (the "
                                    f"pairs of base and candidate processes; their spread is the gate's noise), not "
                                    f"{values['timing_processes']}")
    if values["placements"] == "fresh" and platform.libc_ver()[0] != "glibc":
        raise pytest.UsageError("--xla-placements=fresh: needs glibc's malloc (mallopt), which this platform does "
                                f"not have; valid here: {', '.join(p for p in PLACEMENTS if p != 'fresh')}")
    if values["placements"] == "huge" and (mode := thp_mode()) not in THP_MODES:
        raise pytest.UsageError("--xla-placements=huge: needs the kernel's transparent huge pages (Linux, "
                                f"{THP_SETTING} 'always' or 'madvise'; here: {mode or 'none'}); valid here: "
                                f"{', '.join(p for p in PLACEMENTS if p != 'huge')}")
