"""Known issues as strict xfails: a registry (data), matched on test names and parameters.

The packaged registry is ``registry.toml`` in this package (its format: :mod:`.registry`).
Downstream entries come from ``--xla-known-issues-file`` (ini ``xla_known_issues_file``), the
``pytest_xla_known_issues`` hook, or the keyword arguments of
``@pytest.mark.xla_known_issue("local:x", raises="ValueError", match="...", torch_xla=">=2.9")``;
a later source replaces an entry of the same id (packaged < files < hook < marker).

A test matches an entry by its function name and parameters. Where the installed versions are
affected it gets ``xfail(strict=True, raises=...)`` and must fail as recorded (``match`` included);
where they are not, it is a regression test and must pass. ``--xla-known-issues=run`` ignores the
registry, ``skip`` skips affected tests. The session ends with a summary of what still reproduces.

Modules, one concern each:

* :mod:`.registry` - entries, validation, TOML loading, version matching (:class:`Registry`)
* :mod:`.exceptions` - :class:`RegistryError` and resolving an entry's ``raises``
* :mod:`.apply` - matching tests at collection and marking them (:func:`applied_issue`)
* :mod:`.judge` - checking each report against its entry; the fix :func:`suggestion`
* :mod:`.summary` - the end-of-session summary, from the reports
* :mod:`.crashes` - verdicts on crashed isolated tests (used by the isolation plugin)
* :mod:`.table` - the docs' known-issue table, generated from the registry
* :mod:`.plugin` - :class:`KnownIssuesPlugin`, the pytest hooks

No torch here.
"""

from __future__ import annotations

from pytest_xla_dynamo.known_issues.apply import (
    PROP_HINT,
    PROP_ID,
    PROP_INFO,
    PROP_OUTCOME,
    Applied,
    applied_issue,
    applied_key,
    marker_entry,
    match_item,
)
from pytest_xla_dynamo.known_issues.crashes import CrashVerdict, crash_verdict
from pytest_xla_dynamo.known_issues.exceptions import RegistryError, check_exception_name, resolve_exception
from pytest_xla_dynamo.known_issues.judge import OUTCOMES, suggestion
from pytest_xla_dynamo.known_issues.plugin import KnownIssuesPlugin
from pytest_xla_dynamo.known_issues.registry import (
    BUILTIN_FILE,
    FIELDS,
    KINDS,
    KnownIssue,
    Registry,
    affects_versions,
    load_file,
    load_registry,
    parse_entry,
)
from pytest_xla_dynamo.known_issues.summary import summary_lines

__all__ = [
    "BUILTIN_FILE",
    "FIELDS",
    "KINDS",
    "OUTCOMES",
    "PROP_HINT",
    "PROP_ID",
    "PROP_INFO",
    "PROP_OUTCOME",
    "Applied",
    "CrashVerdict",
    "KnownIssue",
    "KnownIssuesPlugin",
    "Registry",
    "RegistryError",
    "affects_versions",
    "applied_issue",
    "applied_key",
    "check_exception_name",
    "crash_verdict",
    "load_file",
    "load_registry",
    "marker_entry",
    "match_item",
    "parse_entry",
    "resolve_exception",
    "suggestion",
    "summary_lines",
]
