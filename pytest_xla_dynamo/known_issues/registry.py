"""The known-issue registry: its entries (schema and validation), loading TOML files, and version matching.

The packaged registry is ``registry.toml`` next to this module, one ``[[issue]]`` per problem::

    [[issue]]
    id = "pytorch/xla#4174"            # upstream "owner/repo#N", or "local:<slug>" where none exists
    title = "..."
    url = "https://github.com/pytorch/xla/issues/4174"
    kind = "error"                     # crash | wrong_result | error | cpu_fallback | graph_break
    affects = { torch_xla = ">=1.13" } # version specifiers per distribution; all must hold; {} = any
    raises = "RuntimeError"            # exception type: builtin name or dotted path (not for crashes)
    match = 'INTERNAL ASSERT FAILED'   # regex searched in str(exception) (or a crash's output)
    signal = ""                        # crash only: the expected signal name, e.g. "SIGABRT"
    reproducer = "test_..."            # its reproducer in suites/test_known_issues.py
    tests = []                         # other test functions it applies to (e.g. "test_parity")
    backends = []; modes = []; models = []   # filters on the test's parameters; empty = any
    ops = ["nn.functional.elu"]        # the op suite: globs of OpInfo ids (test_op's xla_op); modes: directions
    tiers = ["small"]                  # the model tiers (--xla-tier) where it holds; empty = any
    cpus = ["AMD EPYC*"]               # globs of the CPU model names where it holds; empty = any
    diverging = ["buffer *running_var"]      # accuracy entries: globs every diverging tensor must match
    signature = "running_var_ratio"    # accuracy entries: an exact test of the mechanism (:data:`SIGNATURES`)
    status = "..."; fixed_in = "..."; notes = "..."; related = ["https://..."]

A later source replaces an entry of the same id (packaged < files < hook < marker); see
:func:`load_registry` (and ``apply.marker_entry`` for the marker). One id twice in a file, or in two
``--xla-known-issues-file`` files, is an error. Loading validates every field: ``affects`` names known
distributions (:data:`KNOWN_DISTRIBUTIONS` or an installed one), ``modes`` and ``tiers`` their names,
``signal`` a signal of this platform, ``raises`` its form (matched by name, never imported:
:mod:`.exceptions`); :func:`unknown_names` checks ``backends`` and ``models`` against a session's. No
torch here.
"""

from __future__ import annotations

import fnmatch
import re
import signal as _signal
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from pytest_xla_dynamo import versions as _versions
from pytest_xla_dynamo.config import MODES, did_you_mean
from pytest_xla_dynamo.core.constants import DIRECTIONS
from pytest_xla_dynamo.fileio import MAX_DEPTH, TextFileError, check_nesting, read_text
from pytest_xla_dynamo.known_issues.exceptions import RegistryError, check_exception_name, resolve_exception
from pytest_xla_dynamo.zoo.spec import TIERS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the tomli backport (a dependency there)
    import tomli as tomllib

KINDS = ("crash", "wrong_result", "error", "cpu_fallback", "graph_break")
BUILTIN_FILE = Path(__file__).with_name("registry.toml")
DISTRIBUTIONS = _versions.STACK
#: the distributions ``affects`` may name without their being installed: the stack and the zoo's libraries
KNOWN_DISTRIBUTIONS = (*DISTRIBUTIONS, "torchvision", "timm", "transformers")
SIGNALS = tuple(sorted(s.name for s in _signal.Signals))

_STR_FIELDS = ("title", "url", "kind", "raises", "match", "signal", "reproducer", "status", "fixed_in",
               "notes", "signature")
_LIST_FIELDS = ("tests", "backends", "modes", "models", "ops", "tiers", "cpus", "related", "diverging")
FILTERS = ("backends", "modes", "models", "ops", "tiers")  # the fields a marker may narrow an entry by
FIELDS = ("id", "affects", *_STR_FIELDS, *_LIST_FIELDS)
#: the exact signatures an accuracy entry may name (``signature``): a test of a parity run's tensors that holds where
#: the entry's mechanism is at work however small its effect, so that a pass below tolerance still names it
#: (checked by :mod:`pytest_xla_dynamo.parity.signatures`, one function per name)
SIGNATURES = ("running_var_ratio",)


@dataclass(frozen=True)
class KnownIssue:
    """One registry entry."""

    id: str
    title: str
    kind: str
    url: str = ""
    affects: Mapping[str, str] = field(default_factory=dict)
    raises: str = ""
    match: str = ""
    signal: str = ""
    reproducer: str = ""
    tests: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()  # fnmatch globs of OpInfo ids (the op suite's ``xla_op``): where the entry holds
    tiers: tuple[str, ...] = ()  # the tiers (``--xla-tier``) where it holds: a failure measured at one tier
    # (an accuracy drift, an out-of-memory) need not be the failure at another
    cpus: tuple[str, ...] = ()  # fnmatch globs of the CPU model names (``/proc/cpuinfo``) where it holds: an
    # ill-conditioned result can hold on one CPU and not on another under the same instruction-set cap
    status: str = ""
    fixed_in: str = ""
    notes: str = ""
    related: tuple[str, ...] = ()
    diverging: tuple[str, ...] = ()  # fnmatch globs (or exact names, ``output[0]``): an accuracy failure is this
    # issue only if every diverging tensor (``grad fc.weight``, ``buffer bn1.running_var``) matches one of them
    signature: str = ""  # an exact test of the mechanism (:data:`SIGNATURES`): a passing case where it holds says
    # the issue is present below tolerance
    source: str = ""  # a file path, "hook", or "marker"
    line: int | None = None  # line of ``id = ...`` in the source file (or of the marker)
    affects_line: int | None = None  # line of ``affects = ...`` in the source file

    @property
    def reason(self) -> str:
        return f"{self.id}: {self.title}" + (f" ({self.url})" if self.url else "")

    @property
    def test_names(self) -> tuple[str, ...]:
        return ((self.reproducer,) if self.reproducer else ()) + self.tests

    def applies_to(self, name: str, params: Mapping[str, Any], modes: Sequence[str],
                   *, by_marker: bool = False, tier: str | None = None, cpu: str | None = None) -> bool:
        """Whether this entry targets the test ``name`` with these parameters and modes, at ``tier``, on the CPU
        model ``cpu`` (None: this machine's; an entry with ``cpus`` that none matches does not apply).

        A filter on a parameter the test does not have (or on the tier, where none is given) does not
        exclude it, except ``models`` on the zoo tests it names (``tests``): those are the zoo's cases, and a
        test of that name without an ``xla_model`` parameter (a user's own ``test_training_parity``) is not
        one of them. The reproducer, and a test whose marker names the entry, are not filtered so.
        """
        if not by_marker and name not in self.test_names:
            return False
        if self.models and not by_marker and name != self.reproducer and params.get("xla_model") is None:
            return False
        if self.tiers and tier is not None and tier not in self.tiers:
            return False
        if not self.on_cpu(cpu):
            return False
        for values, key in ((self.models, "xla_model"), (self.backends, "xla_backend")):
            value = params.get(key)
            if values and value is not None and _param_name(value) not in values:
                return False
        op = params.get("xla_op")
        if self.ops and op is not None and not any(fnmatch.fnmatchcase(str(op), glob) for glob in self.ops):
            return False
        return not (self.modes and modes and not set(modes) & set(self.modes))

    def admits(self, backend: str, mode: str) -> bool:
        """Whether the entry's ``backends`` and ``modes`` admit a case of ``backend`` and ``mode`` (one not known,
        "", is admitted)."""
        return not ((self.backends and backend and backend not in self.backends)
                    or (self.modes and mode and mode not in self.modes))

    def on_cpu(self, cpu: str | None = None) -> bool:
        """Whether the CPU model ``cpu`` (None: this machine's) is one where it holds (any, without ``cpus``)."""
        model = _versions.cpu_description()["model"] if cpu is None else cpu
        return not self.cpus or any(fnmatch.fnmatchcase(model, glob) for glob in self.cpus)

    def affected(self, versions: Mapping[str, str | None] | None = None) -> bool:
        """Whether the installed versions (or ``versions``) are affected."""
        return affects_versions(self.affects, _versions.installed_versions() if versions is None else versions)

    def exception_type(self) -> type[BaseException] | None:
        """The exception class ``raises`` names (None: not given, or its module is not installed)."""
        return resolve_exception(self.raises) if self.raises else None

    def matches(self, text: str) -> bool:
        """Whether ``text`` (an exception's message, a crash's output) agrees with ``match`` (always, without one)."""
        return not self.match or re.search(self.match, text) is not None

    def unexplained(self, tensors: Iterable[str]) -> list[str]:
        """The ``tensors`` (diverging tensor names) that ``diverging`` does not cover (none without globs). A glob
        equal to a name covers it as written: ``output[0]`` is that output, not fnmatch's class ``[0]``."""
        if not self.diverging:
            return []
        return [t for t in tensors if not any(t == glob or fnmatch.fnmatchcase(t, glob) for glob in self.diverging)]

    def to_info(self) -> dict[str, Any]:
        """What travels with the reports: enough for the controller's summary."""
        return {"id": self.id, "title": self.title, "url": self.url, "kind": self.kind,
                "affects": dict(self.affects), "source": self.source, "line": self.line}


def _param_name(value: Any) -> str:
    return value if isinstance(value, str) else str(getattr(value, "name", value))


def affects_versions(affects: Mapping[str, str], versions: Mapping[str, str | None]) -> bool:
    """Whether every ``dist: specifier`` of ``affects`` holds for ``versions`` (pre-releases count;
    local labels like ``+cpu`` are ignored; a distribution not installed is not affected)."""
    for dist, spec in affects.items():
        version = versions[dist] if dist in versions else _versions.installed(dist)
        if version is None:
            return False
        try:
            if not SpecifierSet(spec).contains(_versions.public_version(version), prereleases=True):
                return False
        except InvalidVersion:
            return False
    return True


def parse_entry(data: Mapping[str, Any], *, source: str, line: int | None = None,
                affects_line: int | None = None) -> KnownIssue:
    """Validate one entry (a dict of the registry's fields) into a :class:`KnownIssue`."""
    where = f"{source}{f':{line}' if line else ''}: known issue {data.get('id', '<no id>')!r}"  # errors name the line
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RegistryError(f"{where}: unknown field(s) {', '.join(unknown)}; valid: {', '.join(FIELDS)}")
    issue_id = data.get("id")
    if not isinstance(issue_id, str) or not issue_id.strip():
        raise RegistryError(f"{where}: 'id' is required (e.g. 'pytorch/xla#4174' or 'local:name')")
    values: dict[str, Any] = {"id": issue_id.strip()}
    for name in _STR_FIELDS:
        value = data.get(name, "")
        if not isinstance(value, str):
            raise RegistryError(f"{where}: {name!r} must be a string, got {value!r}")
        values[name] = value
    for name in _LIST_FIELDS:
        value = data.get(name, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise RegistryError(f"{where}: {name!r} must be a list of strings, got {value!r}")
        values[name] = tuple(value)
    values["affects"] = _parse_affects(data.get("affects", {}), where)
    values["title"] = values["title"] or values["id"]
    if values["kind"] not in KINDS:
        raise RegistryError(f"{where}: kind={values['kind']!r} is invalid; valid: {', '.join(KINDS)}")
    if values["kind"] == "crash":
        if values["raises"]:
            raise RegistryError(f"{where}: a crash has no exception: use 'signal' and 'match' "
                                "(searched in the crash's output), not 'raises'")
    elif not values["raises"]:
        raise RegistryError(f"{where}: 'raises' is required for kind {values['kind']!r} "
                            "(the exception type that shows the problem, e.g. 'AssertionError')")
    bad_modes = [m for m in values["modes"] if m not in (*MODES, *DIRECTIONS)]
    if bad_modes:
        raise RegistryError(f"{where}: modes={list(values['modes'])!r}: {', '.join(map(repr, bad_modes))} is not a "
                            f"mode; valid: {', '.join((*MODES, *DIRECTIONS))}")
    bad_tiers = [t for t in values["tiers"] if t not in TIERS]
    if bad_tiers:
        raise RegistryError(f"{where}: tiers={list(values['tiers'])!r}: {', '.join(map(repr, bad_tiers))} is not a "
                            f"tier; valid: {', '.join(TIERS)}")
    _check_signal_and_signature(values, where)
    if values["match"]:
        try:
            re.compile(values["match"])
        except re.error as exc:
            raise RegistryError(f"{where}: match={values['match']!r} is not a regex: {exc}") from None
    if values["raises"]:
        check_exception_name(values["raises"], where)
    return KnownIssue(**values, source=source, line=line, affects_line=affects_line)


def _check_signal_and_signature(values: Mapping[str, Any], where: str) -> None:
    """An entry's ``signal`` (a crash's) and ``signature`` (a wrong result's, checked on a passing run): named ones,
    on the kind that uses them."""
    if values["signal"] and values["kind"] != "crash":
        raise RegistryError(f"{where}: signal={values['signal']!r} is given for kind {values['kind']!r}, where it "
                            "would be ignored: only a crash has a signal; valid: kind = \"crash\", or no 'signal'")
    if values["signal"] and values["signal"] not in SIGNALS:
        raise RegistryError(f"{where}: signal={values['signal']!r} is not a signal name; valid: "
                            f"{', '.join(s for s in SIGNALS if s.startswith('SIG') and not s.startswith('SIG_'))}")
    if values["signature"] and values["signature"] not in SIGNATURES:
        raise RegistryError(f"{where}: signature={values['signature']!r} is not a signature the harness checks; "
                            f"valid: {', '.join(SIGNATURES)}{did_you_mean([values['signature']], SIGNATURES)}")
    if values["signature"] and values["kind"] != "wrong_result":
        raise RegistryError(f"{where}: signature={values['signature']!r} is given for kind {values['kind']!r}, where "
                            "it would never be checked: a signature is checked on a parity run's tensors; valid: "
                            "kind = \"wrong_result\", or no 'signature'")


def _parse_affects(affects: Any, where: str) -> dict[str, str]:
    if not isinstance(affects, Mapping):
        raise RegistryError(f"{where}: 'affects' must be a table of version specifiers, "
                            "e.g. { torch_xla = \">=2.9\" }")
    for dist, spec in affects.items():
        if not known_distribution(dist):
            raise RegistryError(f"{where}: affects.{dist}: not a known distribution (an entry for it would never "
                                f"apply); valid: {', '.join(KNOWN_DISTRIBUTIONS)}, or an installed distribution")
        if not isinstance(spec, str):
            raise RegistryError(f"{where}: affects.{dist} must be a string, got {spec!r}")
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise RegistryError(f"{where}: affects.{dist} = {spec!r} is not a version specifier "
                                "(e.g. '>=2.9', '<2.10,>=2.8')") from None
    return dict(affects)


def known_distribution(dist: str) -> bool:
    """Whether ``affects`` may name ``dist``: one of :data:`KNOWN_DISTRIBUTIONS` (any spelling: ``torch-xla``),
    or an installed distribution."""
    canonical = re.sub(r"[-_.]+", "_", dist).lower()
    return canonical in KNOWN_DISTRIBUTIONS or _versions.installed(dist) is not None


def unknown_names(entries: Iterable[KnownIssue], backends: Sequence[str], models: Sequence[str]) -> list[str]:
    """One error line per entry whose ``backends`` or ``models`` name what this session does not know
    (a filter that can never match would quietly make its strict xfail a plain test)."""
    errors = []
    for entry in entries:
        where = f"{entry.source}:{entry.line}" if entry.line else entry.source
        for name, values, valid in (("backends", entry.backends, backends), ("models", entry.models, models)):
            bad = [v for v in values if v not in valid]
            if bad:
                errors.append(f"{where}: known issue {entry.id!r}: {name}: unknown {', '.join(map(repr, bad))}"
                              f"{did_you_mean(bad, valid)}")
    return errors


_ID_LINE = re.compile(r"""^\s*id\s*=\s*(["'])(.*)\1\s*(#.*)?$""")
_AFFECTS_LINE = re.compile(r"^\s*(affects\s*=|\[\s*issue\.affects\s*\])")
_TABLE_LINE = re.compile(r"^\s*\[\[")


def _entry_lines(text: str) -> dict[str, list[tuple[int | None, int | None]]]:
    """For each ``id = "<id>"`` of a TOML text, in order: the line (1-based) of the id and of its entry's
    ``affects`` (None: none before the next ``[[...]]``). One pass over the text, so that a registry loads in
    time linear in its size."""
    found: dict[str, list[list[int | None]]] = {}
    current: list[int | None] | None = None  # [id line, affects line] of the entry being read
    for number, line in enumerate(text.splitlines(), start=1):
        if _TABLE_LINE.match(line):
            current = None
        elif (match := _ID_LINE.match(line)) is not None:
            current = [number, None]
            found.setdefault(match.group(2), []).append(current)
        elif current is not None and current[1] is None and _AFFECTS_LINE.match(line):
            current[1] = number
    return {issue_id: [(first, affects) for first, affects in lines] for issue_id, lines in found.items()}


def _parse_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The text and the TOML data of ``path``, read within :mod:`pytest_xla_dynamo.fileio`'s bounds (size,
    nesting); :class:`RegistryError` naming the file (and line) otherwise."""
    try:
        text = read_text(path)
        check_nesting(text, str(path), "toml")
        return text, tomllib.loads(text)
    except TextFileError as exc:
        raise RegistryError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise RegistryError(f"{path}: nested too deeply to read; valid: at most {MAX_DEPTH} levels") from None


def load_file(path: Path) -> list[KnownIssue]:
    """The entries of one registry TOML file (``[[issue]]`` tables)."""
    text, data = _parse_toml(path)
    unknown = sorted(set(data) - {"issue"})
    if unknown:
        raise RegistryError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; entries are "
                            "[[issue]] tables")
    entries = data.get("issue", [])
    if not isinstance(entries, list):
        raise RegistryError(f"{path}: 'issue' must be an array of tables ([[issue]])")
    lines = _entry_lines(text)
    taken: Counter[str] = Counter()  # the lines of each id used so far (an id twice is an error, said below)
    out: list[KnownIssue] = []
    seen: dict[str, KnownIssue] = {}
    for index, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise RegistryError(f"{path}: [[issue]] number {index} is not a table: {entry!r}")
        issue_id = str(entry.get("id", ""))
        candidates = lines.get(issue_id, [])
        line, affects_line = candidates[taken[issue_id]] if taken[issue_id] < len(candidates) else (None, None)
        taken[issue_id] += 1
        parsed = parse_entry(entry, source=str(path), line=line, affects_line=affects_line)
        first = seen.get(parsed.id)
        if first is not None:
            raise RegistryError(f"{path}:{line or '?'}: known issue {parsed.id!r} is defined twice in this file "
                                f"(first at line {first.line or '?'}); each id once")
        seen[parsed.id] = parsed
        out.append(parsed)
    return out


class Registry:
    """The session's entries by id, in the order first added (a later source replaces an entry of the
    same id in place)."""

    def __init__(self, entries: Iterable[KnownIssue] = ()) -> None:
        self._entries: dict[str, KnownIssue] = {}
        self.add(entries)

    def add(self, entries: Iterable[KnownIssue]) -> None:
        for entry in entries:
            self._entries[entry.id] = entry

    def get(self, issue_id: str) -> KnownIssue | None:
        return self._entries.get(issue_id)

    def __iter__(self) -> Iterator[KnownIssue]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def for_test(self, name: str) -> list[KnownIssue]:
        """The entries that name the test function ``name`` (as reproducer or in ``tests``)."""
        return [e for e in self._entries.values() if name in e.test_names]


HOOK_SOURCE = "pytest_xla_known_issues hook"


def hook_entries(results: Iterable[Any]) -> list[Any]:
    """The entries of the ``pytest_xla_known_issues`` implementations' ``results`` (each a list or None)."""
    entries: list[Any] = []
    for result in results:
        if result is None:
            continue
        if isinstance(result, Mapping | KnownIssue | str | bytes) or not isinstance(result, Iterable):
            raise RegistryError(f"{HOOK_SOURCE}: return a list of entries (dicts), got {result!r}")
        entries.extend(result)
    return entries


def load_registry(files: Iterable[Path] = (), hook_entries: Iterable[Any] = (), *,
                  builtin: bool = True) -> Registry:
    """The packaged registry, then the entries of ``files`` (``--xla-known-issues-file``), then
    ``hook_entries`` (what ``pytest_xla_known_issues`` implementations returned: dicts or entries)."""
    registry = Registry(load_file(BUILTIN_FILE) if builtin else ())
    from_files: dict[str, KnownIssue] = {}
    for path in files:
        entries = load_file(Path(path))
        for entry in entries:
            other = from_files.setdefault(entry.id, entry)
            if other is not entry:
                raise RegistryError(f"{entry.source}:{entry.line or '?'}: known issue {entry.id!r} is also defined in "
                                    f"{other.source}:{other.line or '?'}; which one holds would depend on the "
                                    "order of --xla-known-issues-file: keep one")
        registry.add(entries)
    for entry in hook_entries:
        if isinstance(entry, KnownIssue):
            registry.add([entry])
        elif isinstance(entry, Mapping):
            registry.add([parse_entry(entry, source=HOOK_SOURCE)])
        else:
            raise RegistryError(f"{HOOK_SOURCE}: an entry must be a dict, got {entry!r}")
    return registry
