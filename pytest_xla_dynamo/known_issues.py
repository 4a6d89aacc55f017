"""Known issues as strict xfails: a registry (data), matched on test names and parameters.

The registry is TOML (``known_issues.toml`` next to this module), one ``[[issue]]`` per problem::

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
    status = "..."; fixed_in = "..."; notes = "..."; related = ["https://..."]

Downstream entries come from ``--xla-known-issues-file`` (ini ``xla_known_issues_file``), the
``pytest_xla_known_issues`` hook, or the keyword arguments of
``@pytest.mark.xla_known_issue("local:x", raises="ValueError", match="...", torch_xla=">=2.9")``;
a later source replaces an entry of the same id (packaged < files < hook < marker).

:class:`KnownIssuesPlugin` applies it in a ``tryfirst`` ``pytest_collection_modifyitems``. A test
matches an entry by its function name (``item.originalname``) and its parameters (``xla_model``,
``xla_backend``, the ``xla_mode`` marker). Where the installed versions are affected it gets
``xfail(strict=True, raises=...)``; a ``pytest_runtest_makereport`` wrapper also enforces ``match``
and explains every mismatch. Where they are not affected the test is a regression test and must
pass. ``--xla-known-issues=run`` ignores the registry, ``skip`` skips affected tests. The controller
prints the end-of-session summary from the reports (also under pytest-xdist). No torch here.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import importlib.util
import json
import re
import sys
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from pytest_xla_dynamo.config import get_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the tomli backport
    import tomli as tomllib

KINDS = ("crash", "wrong_result", "error", "cpu_fallback", "graph_break")
BUILTIN_FILE = Path(__file__).with_name("known_issues.toml")
DISTRIBUTIONS = ("torch", "torch_xla")

# user_properties keys: they travel with the reports (xdist workers, isolated children)
PROP_ID = "xla_known_issue"
PROP_INFO = "xla_known_issue_info"
PROP_OUTCOME = "xla_known_issue_outcome"
PROP_HINT = "xla_known_issue_hint"

# outcomes, worst first (a test's outcome is the worst of its phases)
OUTCOMES = (
    "other_failure",  # affected, but it failed another way than recorded
    "regression_failed",  # not affected (fixed), but its test fails
    "no_longer_reproduces",  # affected, but it passed: strict XPASS
    "reproduced",  # affected, and it failed as recorded: xfailed
    "run_failed",  # --xla-known-issues=run: raw failure
    "skipped",  # --xla-known-issues=skip
    "run_passed",  # --xla-known-issues=run: raw pass
    "passed",  # not affected, and it passes: a regression test
)

_STR_FIELDS = ("title", "url", "kind", "raises", "match", "signal", "reproducer", "status", "fixed_in",
               "notes")
_LIST_FIELDS = ("tests", "backends", "modes", "models", "related")
FIELDS = ("id", "affects", *_STR_FIELDS, *_LIST_FIELDS)
# the marker's keyword arguments: the fields, plus one shorthand per distribution (torch_xla=">=2.9")
MARKER_KWARGS = tuple(f for f in FIELDS if f not in ("id", "tests")) + DISTRIBUTIONS


class RegistryError(ValueError):
    """A bad registry entry (reported as a usage error naming the entry and its source)."""


class KnownCrash(Exception):  # never raised: a crash entry's xfail accepts no exception
    """Placeholder ``raises=`` of a crash entry's xfail: an ordinary exception is not the crash."""


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
    status: str = ""
    fixed_in: str = ""
    notes: str = ""
    related: tuple[str, ...] = ()
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
                   *, by_marker: bool = False) -> bool:
        """Whether this entry targets the test ``name`` with these parameters and modes.

        A filter on a parameter the test does not have does not exclude it.
        """
        if not by_marker and name not in self.test_names:
            return False
        for values, key in ((self.models, "xla_model"), (self.backends, "xla_backend")):
            value = params.get(key)
            if values and value is not None and _param_name(value) not in values:
                return False
        return not (self.modes and modes and not set(modes) & set(self.modes))

    def affected(self, versions: Mapping[str, str | None] | None = None) -> bool:
        """Whether the installed versions (or ``versions``) are affected."""
        return affects_versions(self.affects, installed_versions() if versions is None else versions)

    def exception_type(self) -> type[BaseException] | None:
        """The exception class ``raises`` names (None: not given, or its module is not installed)."""
        return resolve_exception(self.raises) if self.raises else None

    def to_info(self) -> dict[str, Any]:
        """What travels with the reports: enough for the controller's summary."""
        return {"id": self.id, "title": self.title, "url": self.url, "kind": self.kind,
                "affects": dict(self.affects), "source": self.source, "line": self.line}


def _param_name(value: Any) -> str:
    return value if isinstance(value, str) else str(getattr(value, "name", value))


# --- versions ----------------------------------------------------------------------------------------


@cache
def _installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def installed_versions(dists: Iterable[str] = DISTRIBUTIONS) -> dict[str, str | None]:
    """Installed versions, read from package metadata (no import of torch)."""
    return {d: _installed(d) for d in dists}


def public_version(version: str) -> str:
    """``"2.9.0+cpu"`` -> ``"2.9.0"``."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def affects_versions(affects: Mapping[str, str], versions: Mapping[str, str | None]) -> bool:
    """Whether every ``dist: specifier`` of ``affects`` holds for ``versions`` (pre-releases count;
    local labels like ``+cpu`` are ignored; a distribution not installed is not affected)."""
    for dist, spec in affects.items():
        version = versions[dist] if dist in versions else _installed(dist)
        if version is None:
            return False
        try:
            if not SpecifierSet(spec).contains(public_version(version), prereleases=True):
                return False
        except InvalidVersion:
            return False
    return True


# --- exceptions ----------------------------------------------------------------------------------


def resolve_exception(spec: str) -> type[BaseException] | None:
    """``"RuntimeError"`` (a builtin) or a dotted path (``"torch._dynamo.exc.Unsupported"``) -> class.

    None where the dotted path's top-level package is not installed (its tests are skipped);
    RegistryError where it names nothing or no exception class.
    """
    spec = spec.strip()
    if "." not in spec:
        obj = getattr(builtins, spec, None)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return obj
        raise RegistryError(f"raises={spec!r} is not a builtin exception (use a dotted path, "
                            "e.g. 'torch._dynamo.exc.Unsupported')")
    parts = spec.split(".")
    if importlib.util.find_spec(parts[0]) is None:
        return None
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                found = getattr(found, attr)
        except AttributeError:
            break
        if isinstance(found, type) and issubclass(found, BaseException):
            return found
        raise RegistryError(f"raises={spec!r} is not an exception class")
    raise RegistryError(f"raises={spec!r}: cannot import it")


def check_exception_name(spec: str, where: str = "") -> None:
    """Validate ``raises`` without importing anything: a builtin exception, or a dotted path (resolved
    when a test it applies to is collected)."""
    prefix = f"{where}: " if where else ""
    if "." not in spec:
        _check_builtin(spec, prefix)
        return
    if not all(part.isidentifier() for part in spec.split(".")):
        raise RegistryError(f"{prefix}raises={spec!r} is not a dotted path to an exception class")


def _check_builtin(spec: str, prefix: str) -> None:
    try:
        resolve_exception(spec)
    except RegistryError as exc:
        raise RegistryError(f"{prefix}{exc}") from None


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _short(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


# --- parsing --------------------------------------------------------------------------------------


def parse_entry(data: Mapping[str, Any], *, source: str, line: int | None = None,
                affects_line: int | None = None) -> KnownIssue:
    """Validate one entry (a dict of the registry's fields) into a :class:`KnownIssue`."""
    where = f"{source}: known issue {data.get('id', '<no id>')!r}"
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
    affects = data.get("affects", {})
    if not isinstance(affects, Mapping):
        raise RegistryError(f"{where}: 'affects' must be a table of version specifiers, "
                            "e.g. {{ torch_xla = \">=2.9\" }}")
    for dist, spec in affects.items():
        if not isinstance(spec, str):
            raise RegistryError(f"{where}: affects.{dist} must be a string, got {spec!r}")
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise RegistryError(f"{where}: affects.{dist} = {spec!r} is not a version specifier "
                                "(e.g. '>=2.9', '<2.10,>=2.8')") from None
    values["affects"] = dict(affects)
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
    if values["signal"] and not values["signal"].startswith("SIG"):
        raise RegistryError(f"{where}: signal={values['signal']!r} is not a signal name (e.g. 'SIGABRT')")
    if values["match"]:
        try:
            re.compile(values["match"])
        except re.error as exc:
            raise RegistryError(f"{where}: match={values['match']!r} is not a regex: {exc}") from None
    if values["raises"]:
        check_exception_name(values["raises"], where)
    return KnownIssue(**values, source=source, line=line, affects_line=affects_line)


def _entry_lines(text: str, issue_id: str) -> tuple[int | None, int | None]:
    """Lines (1-based) of ``id = "<issue_id>"`` and of its entry's ``affects`` in a TOML text."""
    lines = text.splitlines()
    id_re = re.compile(r"""^\s*id\s*=\s*(["'])""" + re.escape(issue_id) + r"""\1\s*(#.*)?$""")
    for index, line in enumerate(lines):
        if id_re.match(line):
            for j in range(index + 1, len(lines)):
                if re.match(r"^\s*\[\[", lines[j]):
                    break
                if re.match(r"^\s*(affects\s*=|\[\s*issue\.affects\s*\])", lines[j]):
                    return index + 1, j + 1
            return index + 1, None
    return None, None


def load_file(path: Path) -> list[KnownIssue]:
    """The entries of one registry TOML file (``[[issue]]`` tables)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read it: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"issue"})
    if unknown:
        raise RegistryError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; entries are "
                            "[[issue]] tables")
    entries = data.get("issue", [])
    if not isinstance(entries, list):
        raise RegistryError(f"{path}: 'issue' must be an array of tables ([[issue]])")
    out = []
    for entry in entries:
        line, affects_line = _entry_lines(text, str(entry.get("id", "")))
        out.append(parse_entry(entry, source=str(path), line=line, affects_line=affects_line))
    return out


class Registry:
    """The session's entries by id (a later source replaces an entry of the same id)."""

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
        return [e for e in self._entries.values() if name in e.test_names]


def load_registry(config: pytest.Config | None = None, *, builtin: bool = True) -> Registry:
    """The packaged registry, then ``--xla-known-issues-file`` files, then hook entries."""
    registry = Registry(load_file(BUILTIN_FILE) if builtin else ())
    if config is None:
        return registry
    for path in get_config(config).known_issues_files:
        registry.add(load_file(path))
    for result in config.hook.pytest_xla_known_issues():
        for entry in result or ():
            if isinstance(entry, KnownIssue):
                registry.add([entry])
            elif isinstance(entry, Mapping):
                registry.add([parse_entry(entry, source="pytest_xla_known_issues hook")])
            else:
                raise RegistryError(f"pytest_xla_known_issues hook: an entry must be a dict, got {entry!r}")
    return registry


def marker_entry(registry: Registry, marker: pytest.Mark, where: str) -> KnownIssue:
    """The entry of ``@pytest.mark.xla_known_issue(id, **fields)``: a registry entry with the
    keyword arguments laid over it, or a new entry defined by them."""
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise RegistryError(f"{where}: @pytest.mark.xla_known_issue takes one positional argument, "
                            "the issue id, e.g. xla_known_issue('pytorch/xla#4174')")
    issue_id = marker.args[0]
    unknown = sorted(set(marker.kwargs) - set(MARKER_KWARGS))
    if unknown:
        raise RegistryError(f"{where}: @pytest.mark.xla_known_issue({issue_id!r}): unknown keyword "
                            f"argument(s) {', '.join(unknown)}; valid: {', '.join(MARKER_KWARGS)}")
    base = registry.get(issue_id)
    if base is None and not marker.kwargs:
        raise RegistryError(f"{where}: known issue {issue_id!r} is not in the registry: give its fields "
                            "as keyword arguments (raises=..., match=..., torch_xla=...) or add it to "
                            "a --xla-known-issues-file")
    data: dict[str, Any] = {}
    if base is not None:
        data = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.name in FIELDS}
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
    data["id"] = issue_id
    affects = dict(data.get("affects", {}))
    affects.update(marker.kwargs.get("affects", {}))
    for dist in DISTRIBUTIONS:
        if dist in marker.kwargs:
            affects[dist] = marker.kwargs[dist]
    data.update({k: v for k, v in marker.kwargs.items() if k not in DISTRIBUTIONS and k != "affects"})
    data["affects"] = affects
    if base is None:
        data.setdefault("kind", "crash" if data.get("signal") else "error")
    data.pop("tests", None)
    if base is not None and not (set(marker.kwargs) - {"backends", "modes", "models"}):
        return dataclasses.replace(base, backends=tuple(data.get("backends", ())),
                                   modes=tuple(data.get("modes", ())), models=tuple(data.get("models", ())))
    return parse_entry(data, source="marker", line=None)


# --- applying it ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """What the plugin did with a test: the entry, whether the versions are affected, the action
    ("xfail", "skip", "regression", "run")."""

    entry: KnownIssue
    affected: bool
    action: str
    exc_type: type[BaseException] | None = None


applied_key = pytest.StashKey[Applied]()


def applied_issue(item: pytest.Item) -> Applied | None:
    """The known issue applied to ``item`` at collection (None: no entry matches it)."""
    return item.stash.get(applied_key, None)


def test_modes(item: pytest.Item) -> list[str]:
    modes: list[str] = []
    for marker in item.iter_markers("xla_mode"):
        modes.extend(a for a in marker.args if isinstance(a, str))
    callspec = getattr(item, "callspec", None)
    if callspec is not None and isinstance(callspec.params.get("xla_mode"), str):
        modes.append(callspec.params["xla_mode"])
    return modes


def suggestion(entry: KnownIssue, versions: Mapping[str, str | None] | None = None) -> str:
    """The registry change that stops ``entry`` applying to the installed versions."""
    versions = installed_versions() if versions is None else versions
    affects = dict(entry.affects)
    dist = "torch_xla" if ("torch_xla" in affects or not affects) else next(iter(affects))
    installed = versions.get(dist) or "?"
    bound = f"<{public_version(installed)}"
    affects[dist] = f"{affects[dist]},{bound}" if affects.get(dist) else bound
    where = f"{dist} {installed}"
    if entry.source == "marker":
        return (f"@pytest.mark.xla_known_issue({entry.id!r}, ...) on the test: set {dist}=\"{affects[dist]}\" "
                f"(installed {where} no longer reproduces it)")
    table = ", ".join(f'{k} = "{v}"' for k, v in affects.items())
    line = f"affects = {{ {table} }}"
    why = f"(installed {where} no longer reproduces it; if torch brought the fix, bound affects.torch instead)"
    if entry.source.endswith(".toml") or entry.line is not None:
        at = entry.affects_line or entry.line
        loc = f"{entry.source}:{at}" if at else entry.source
        if entry.affects_line is None:
            return f"{loc}: entry {entry.id!r}: add the line `{line}` {why}"
        if _is_table_header(entry.source, entry.affects_line):
            return f'{loc}: entry {entry.id!r}: in its [issue.affects] table set `{dist} = "{affects[dist]}"` {why}'
        return f"{loc}: entry {entry.id!r}: replace that line by `{line}` {why}"
    return (f"entry {entry.id!r} from {entry.source}: set `{line}` (installed {where} no longer "
            "reproduces it)")


def _is_table_header(path: str, line: int) -> bool:
    try:
        text = Path(path).read_text(encoding="utf-8").splitlines()[line - 1]
    except (OSError, IndexError):
        return False
    return text.strip().startswith("[")


class KnownIssuesPlugin:
    """Applies the registry at collection, judges the outcomes, and prints the summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.policy = get_config(config).known_issues
        try:
            self.registry = load_registry(config)
        except RegistryError as exc:
            raise pytest.UsageError(f"known issues: {exc}") from None
        # nodeid -> (info, {outcomes}, [hints]); filled from reports (on the xdist controller too)
        self._results: dict[str, tuple[dict[str, Any], set[str], list[str]]] = {}

    # --- collection -----------------------------------------------------------------------------

    def match_item(self, item: pytest.Item) -> Applied | None:
        """The entry that applies to ``item`` (markers first, then the registry): the first whose
        versions are affected, else the first that matches."""
        name = getattr(item, "originalname", None) or item.name
        callspec = getattr(item, "callspec", None)
        params: Mapping[str, Any] = callspec.params if callspec is not None else {}
        modes = test_modes(item)
        candidates: list[KnownIssue] = []
        for marker in item.iter_markers("xla_known_issue"):
            entry = marker_entry(self.registry, marker, item.nodeid)
            if entry.applies_to(name, params, modes, by_marker=True):
                candidates.append(entry)
        candidates += [e for e in self.registry.for_test(name) if e.applies_to(name, params, modes)]
        if not candidates:
            return None
        affected = [e for e in candidates if e.affected()]
        entry = affected[0] if affected else candidates[0]
        if self.policy == "run":
            action = "run"
        elif not affected:
            action = "regression"
        else:
            action = self.policy  # "xfail" | "skip"
        exc_type = None
        if action == "xfail" and entry.kind != "crash":
            try:
                exc_type = entry.exception_type()
            except RegistryError as exc:
                raise RegistryError(f"{entry.source}: known issue {entry.id!r}: {exc}") from None
        return Applied(entry, bool(affected), action, exc_type)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        errors: list[str] = []
        for item in items:
            try:
                applied = self.match_item(item)
            except RegistryError as exc:
                errors.append(str(exc))
                continue
            if applied is None:
                continue
            entry = applied.entry
            item.stash[applied_key] = applied
            info = {**entry.to_info(), "action": applied.action, "affected": applied.affected}
            item.user_properties.append((PROP_ID, entry.id))
            item.user_properties.append((PROP_INFO, json.dumps(info)))
            if applied.action == "xfail":
                raises: type[BaseException] | None = KnownCrash if entry.kind == "crash" else applied.exc_type
                kwargs: dict[str, Any] = {"strict": True, "reason": entry.reason}
                if raises is not None:
                    kwargs["raises"] = raises
                item.add_marker(pytest.mark.xfail(**kwargs))
            elif applied.action == "skip":
                item.add_marker(pytest.mark.skip(reason=f"known issue {entry.reason} "
                                                        "(--xla-known-issues=skip)"))
            if entry.kind == "crash" and applied.affected and applied.action != "skip" \
                    and item.get_closest_marker("xla_isolated") is None:
                item.add_marker(pytest.mark.xla_isolated)  # a crash must not end the session
        if errors:
            raise pytest.UsageError("known issues:\n" + "\n".join(dict.fromkeys(errors)))

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        versions = installed_versions()
        affected = sum(1 for e in self.registry if e.affected(versions))
        return [f"xla-dynamo known issues: {len(self.registry)} entries, {affected} affect the installed "
                f"versions; policy {self.policy}"]

    # --- judging --------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                             pytest.TestReport]:
        rep = yield
        applied = applied_issue(item)
        if applied is not None:
            self._judge(applied, call, rep)
        return rep

    def _judge(self, applied: Applied, call: pytest.CallInfo[None], rep: pytest.TestReport) -> None:
        entry = applied.entry
        excinfo = call.excinfo
        action = "run" if applied.action == "xfail" and self.config.option.runxfail else applied.action
        if action == "xfail":
            if excinfo is not None and rep.skipped and hasattr(rep, "wasxfail"):
                if excinfo.errisinstance(pytest.xfail.Exception):  # an explicit pytest.xfail()
                    return
                message = str(excinfo.value)
                if entry.match and not re.search(entry.match, message):
                    rep.outcome = "failed"
                    del rep.wasxfail
                    self._explain(rep, entry, f"expected {entry.raises} matching {entry.match!r}, got "
                                              f"{_type_name(excinfo.value)} with another message:\n"
                                              f"{_short(message)}", "wrong message")
                    _tag(rep, "other_failure")
                else:
                    _tag(rep, "reproduced")
            elif excinfo is not None and rep.failed:
                if entry.kind == "crash":
                    got = (f"expected the crash (signal {entry.signal or 'any'}), got the exception "
                           f"{_type_name(excinfo.value)}: {_short(str(excinfo.value))}")
                else:
                    got = (f"expected {entry.raises}" + (f" matching {entry.match!r}" if entry.match else "")
                           + f", got {_type_name(excinfo.value)}: {_short(str(excinfo.value))}")
                self._explain(rep, entry, got, "wrong exception")
                _tag(rep, "other_failure")
            elif rep.failed and rep.when == "call" and str(rep.longrepr).startswith("[XPASS(strict)]"):
                hint = suggestion(entry)
                rep.longrepr = (f"{rep.longrepr}\nknown issue {entry.id} no longer reproduces with "
                                f"{_versions_text()}: {hint}")
                _tag(rep, "no_longer_reproduces")
                rep.user_properties.append((PROP_HINT, hint))
        elif action == "regression":
            if rep.failed:
                self._explain(rep, entry, f"{entry.id} is recorded as not affecting {_versions_text()} "
                                          f"(affects = {dict(entry.affects)}), but its test fails: it has "
                                          "come back, or the test fails for another reason", "regression")
                _tag(rep, "regression_failed")
            elif rep.passed and rep.when == "call":
                _tag(rep, "passed")
        elif action == "run":
            if rep.failed:
                _tag(rep, "run_failed")
            elif rep.passed and rep.when == "call":
                _tag(rep, "run_passed")
        elif action == "skip" and rep.skipped:
            _tag(rep, "skipped")

    @staticmethod
    def _explain(rep: pytest.TestReport, entry: KnownIssue, text: str, label: str) -> None:
        where = f"{entry.source}:{entry.line}" if entry.line else entry.source
        rep.sections.append(("xla known issue", f"known issue {entry.reason}\n[{label}] {text}\n"
                                                f"registry entry: {where}"))
        crash = getattr(rep.longrepr, "reprcrash", None)
        if crash is not None and hasattr(crash, "message"):
            try:
                crash.message = f"[known issue {entry.id}: {label}] {crash.message}"
            except (AttributeError, TypeError):  # pragma: no cover - a frozen repr
                pass

    # --- collecting outcomes (controller and single process) ------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = _props(report)
        if PROP_ID not in props:
            return
        try:
            info = json.loads(props.get(PROP_INFO, "{}"))
        except (TypeError, ValueError):
            info = {}
        info.setdefault("id", props[PROP_ID])
        entry = self._results.setdefault(report.nodeid, (info, set(), []))
        outcome = props.get(PROP_OUTCOME)
        if outcome is None and report.failed:
            outcome = {"xfail": "other_failure", "regression": "regression_failed",
                       "run": "run_failed"}.get(info.get("action", ""), "other_failure")
        if outcome is not None:
            entry[1].add(outcome)
        if PROP_HINT in props:
            entry[2].append(props[PROP_HINT])

    def outcomes(self) -> dict[str, list[tuple[str, dict[str, Any], list[str]]]]:
        """outcome -> [(nodeid, info, hints)], one outcome per test (the worst of its phases)."""
        out: dict[str, list[tuple[str, dict[str, Any], list[str]]]] = {o: [] for o in OUTCOMES}
        for nodeid, (info, seen, hints) in self._results.items():
            if not seen:
                continue
            worst = min(seen, key=OUTCOMES.index)
            out[worst].append((nodeid, info, hints))
        return out

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if hasattr(config, "workerinput") or not self._results:
            return
        for line in summary_lines(self.outcomes()):
            if line.startswith("="):
                terminalreporter.write_sep("=", line.strip("= "))
            else:
                terminalreporter.write_line(line)


def _tag(rep: pytest.TestReport, outcome: str) -> None:
    rep.user_properties = [p for p in rep.user_properties if p[0] != PROP_OUTCOME]
    rep.user_properties.append((PROP_OUTCOME, outcome))


def _props(report: pytest.TestReport) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for prop in report.user_properties or ():
        if isinstance(prop, list | tuple) and len(prop) == 2:
            props[prop[0]] = prop[1]
    return props


def _versions_text(versions: Mapping[str, str | None] | None = None) -> str:
    versions = installed_versions() if versions is None else versions
    return ", ".join(f"{d} {v or 'not installed'}" for d, v in versions.items())


_HEADINGS = {
    "reproduced": "still reproduce (strict xfail, as recorded)",
    "no_longer_reproduces": "no longer reproduce (strict XPASS: update the registry)",
    "other_failure": "fail another way than recorded (failures)",
    "passed": "fixed: pass as regression tests",
    "regression_failed": "fixed per the registry, but their tests fail (regressions)",
    "skipped": "skipped (--xla-known-issues=skip)",
    "run_failed": "registry ignored (--xla-known-issues=run): fail",
    "run_passed": "registry ignored (--xla-known-issues=run): pass",
}
_ORDER = ("reproduced", "no_longer_reproduces", "other_failure", "regression_failed", "passed", "skipped",
          "run_failed", "run_passed")


def summary_lines(outcomes: Mapping[str, list[tuple[str, dict[str, Any], list[str]]]]) -> list[str]:
    """The end-of-session summary: per outcome, the issues (with their tests where it matters)."""
    tests = sum(len(v) for v in outcomes.values())
    issues = {info["id"] for v in outcomes.values() for _, info, _ in v}
    lines = ["= xla known issues =",
             f"{len(issues)} known issue(s) in {tests} test(s) with {_versions_text()}"]
    for outcome in _ORDER:
        rows = outcomes.get(outcome, [])
        if not rows:
            continue
        by_issue: dict[str, list[tuple[str, dict[str, Any], list[str]]]] = {}
        for row in rows:
            by_issue.setdefault(row[1]["id"], []).append(row)
        lines.append(f"{_HEADINGS[outcome]}: {len(by_issue)} issue(s), {len(rows)} test(s)")
        for issue_id, group in sorted(by_issue.items()):
            info = group[0][1]
            url = f" <{info['url']}>" if info.get("url") else ""
            count = f" [{len(group)} tests]" if len(group) > 1 else ""
            lines.append(f"  {issue_id} ({info.get('kind', '?')}): {info.get('title', '')}{url}{count}")
            if outcome in ("no_longer_reproduces", "other_failure", "regression_failed"):
                for nodeid, _, hints in group:
                    lines.append(f"    {nodeid}")
                    for hint in dict.fromkeys(hints):
                        lines.append(f"      -> {hint}")
    return lines


# --- crashes of isolated tests (called by the isolation plugin) ---------------------------------


@dataclass(frozen=True)
class CrashVerdict:
    """How a crashed isolated test is reported: xfailed (``xfail_reason``) or failed."""

    xfail_reason: str | None
    explanation: str
    user_properties: tuple[tuple[str, str], ...] = ()


def crash_verdict(item: pytest.Item, signal_name: str | None, returncode: int, output: str) -> CrashVerdict:
    """Judge a crash of ``item`` (in an isolated child) against its known issue, if any."""
    applied = applied_issue(item)
    how = f"signal {signal_name}" if signal_name else f"exit code {returncode}"
    if applied is None:
        return CrashVerdict(None, f"crashed with {how}: not a known crash")
    entry = applied.entry
    if applied.action == "xfail" and entry.kind == "crash":
        if entry.signal and entry.signal != signal_name:
            return CrashVerdict(None, f"known crash {entry.id} expects signal {entry.signal}, got {how}",
                                ((PROP_OUTCOME, "other_failure"),))
        if entry.match and not re.search(entry.match, output):
            return CrashVerdict(None, f"known crash {entry.id}: the crash output does not match "
                                      f"{entry.match!r}", ((PROP_OUTCOME, "other_failure"),))
        return CrashVerdict(f"{entry.reason} [crashed with {how}]", f"known crash {entry.id}: crashed with {how}",
                            ((PROP_OUTCOME, "reproduced"),))
    if applied.action == "xfail":
        return CrashVerdict(None, f"known issue {entry.id} is recorded as {entry.kind} ({entry.raises}), "
                                  f"but the test crashed with {how}", ((PROP_OUTCOME, "other_failure"),))
    outcome = {"regression": "regression_failed", "run": "run_failed"}.get(applied.action, "other_failure")
    return CrashVerdict(None, f"crashed with {how} (known issue {entry.id}, action {applied.action})",
                        ((PROP_OUTCOME, outcome),))
