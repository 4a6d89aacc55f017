"""``python -m pytest_xla_dynamo [pytest args]`` (console script ``pytest-xla-dynamo``): the command line.

Runs pytest on the bundled suites as installed (the package ``pytest_xla_dynamo.suites``, which is the
repository's ``suites/`` folder), so an upstream CI job needs no checkout of this repository:

* the suites folder is found through the package's import path (a wheel, a ``pip install -e .``
  checkout, a ``--target`` folder all work) and passed to pytest, with ``--rootdir`` set to it:
  node ids are relative to the suites folder (``test_training_parity.py::test_training_parity[...]``);
* positional arguments naming a suite file or node id (``test_training_parity.py``, optionally
  written ``suites/test_training_parity.py::...`` as in the repository) are resolved in the installed
  suites folder; when none is given the whole folder runs; every other argument goes to pytest as is;
* the plugin is loaded by its entry point as usual (``-p xla_dynamo`` is added only when plugin
  autoloading is disabled and the user did not add it);
* pytest's cache goes to ``./.pytest_cache`` of the working directory, not into the installed package.

A first argument naming a sub-command (:data:`COMMANDS`) runs that instead of pytest:
``python -m pytest_xla_dynamo --suites-dir`` / ``--snapshots-dir`` print the installed folders (for
``--xla-expected=$(python -m pytest_xla_dynamo --snapshots-dir)/expected_small.csv``);
``python -m pytest_xla_dynamo known-issues [--markdown | --check FILE | ...]`` prints or checks the
known-issue table; ``python -m pytest_xla_dynamo merge --out DIR [--expected FILE] SHARD_DIR...`` merges
sharded runs' reports (:mod:`pytest_xla_dynamo.merge`).
The equivalent plain pytest command is ``pytest --pyargs pytest_xla_dynamo.suites [args]``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pytest_xla_dynamo.launch import (  # noqa: F401  (package_dir, REPRO_PREFIX, launched_by_main: re-exported)
    REPRO_PREFIX,
    MainMarker,
    launched_by_main,
    package_dir,
    snapshots_dir,
    suites_dir,
)

#: a sub-command: the arguments after its name -> the process's exit code
Command = Callable[[list[str]], int]


def _suite_path(arg: str, suites: Path) -> str | None:
    """``arg`` resolved in the suites folder if it names a suite path or node id there, else None."""
    if arg.startswith("-") or not arg:
        return None
    path, sep, rest = arg.partition("::")
    for prefix in ("suites/", "./suites/", "suites\\"):
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    if path in ("suites", "./suites", "."):
        path = ""
    candidate = (suites / path) if path else suites
    if not candidate.exists():
        return None
    try:
        candidate.resolve().relative_to(suites)
    except ValueError:
        return None
    return str(candidate) + sep + rest


def _has_option(args: Sequence[str], *names: str) -> bool:
    return any(a in names or any(a.startswith(n + "=") for n in names if n.startswith("--")) for a in args)


def _has_override(args: Sequence[str], key: str) -> bool:
    for i, arg in enumerate(args):
        value = None
        if arg in ("-o", "--override-ini") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--override-ini="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            value = arg[2:]
        if value is not None and value.split("=", 1)[0].strip() == key:
            return True
    return False


def _plugin_requested(args: Sequence[str]) -> bool:
    for i, arg in enumerate(args):
        name = args[i + 1] if arg == "-p" and i + 1 < len(args) else (arg[2:] if arg.startswith("-p") else None)
        if name is not None and name.strip() in ("xla_dynamo", "no:xla_dynamo", "pytest_xla_dynamo.plugin"):
            return True
    return False


def _plugin_disabled(args: Sequence[str], name: str) -> bool:
    return any(a in (f"-pno:{name}", f"no:{name}") for a in args)


def build_args(argv: Sequence[str], suites: Path, cwd: Path | None = None) -> list[str]:
    """The pytest arguments for ``python -m pytest_xla_dynamo argv``."""
    cwd = cwd or Path.cwd()
    out: list[str] = []
    has_path = False
    for arg in argv:
        resolved = _suite_path(arg, suites)
        if resolved is not None:
            has_path = True
            out.append(resolved)
        else:
            out.append(arg)
    prefix: list[str] = []
    autoload_off = bool(os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")) or "--disable-plugin-autoload" in argv
    if autoload_off and not _plugin_requested(argv):
        prefix += ["-p", "xla_dynamo"]
    if not _has_option(argv, "--rootdir"):
        prefix.append(f"--rootdir={suites}")
    if not _has_override(argv, "cache_dir") and not _plugin_disabled(argv, "cacheprovider"):
        prefix += ["-o", f"cache_dir={cwd / '.pytest_cache'}"]
    if not has_path:
        out.append(str(suites))
    return prefix + out


def _usage_error(message: str) -> int:
    print(f"ERROR: {message}", file=sys.stderr)
    return int(pytest.ExitCode.USAGE_ERROR)


def _print_folder(name: str, folder: Callable[[], Path]) -> Command:
    def command(args: list[str]) -> int:
        if args:
            return _usage_error(f"{name} takes no arguments, got {' '.join(args)!r}")
        print(folder())
        return 0

    return command


def _known_issues(args: list[str]) -> int:
    from pytest_xla_dynamo.known_issues.table import main as table

    return table(args, prog=f"{REPRO_PREFIX} known-issues")


def _merge(args: list[str]) -> int:
    from pytest_xla_dynamo.merge import main as merge_main

    return merge_main(args)


#: ``python -m pytest_xla_dynamo NAME [args]`` runs ``COMMANDS[NAME](args)``; anything else goes to pytest.
#: A command imports what it needs inside its function, so that the pytest path imports nothing more.
COMMANDS: dict[str, Command] = {
    "--suites-dir": _print_folder("--suites-dir", suites_dir),
    "--snapshots-dir": _print_folder("--snapshots-dir", snapshots_dir),
    "known-issues": _known_issues,  # the known-issue table (--markdown, --write FILE, --check FILE, ...)
    "merge": _merge,  # sharded runs' reports as one set, one table, one gate verdict
}


def _package_imported_before_pytest() -> None:
    """Say that the package is not to be assertion-rewritten (``PYTEST_DONT_REWRITE``).

    ``python -m pytest_xla_dynamo`` (and the console script) import the package before pytest starts;
    pytest then marks the installed distribution's top-level package for rewriting (a ``pytest11`` entry
    point) and, finding it imported already, warns ``PytestAssertRewriteWarning: Module already imported
    so cannot be rewritten; pytest_xla_dynamo`` on every run from a wheel. The package's ``__init__``
    holds no assertion; pytest's documented opt-out marker in its docstring says so and silences exactly
    that warning. The plugin's modules, imported later by pytest, are rewritten as usual.
    """
    package = sys.modules.get(__package__ or "pytest_xla_dynamo")
    if package is not None and "PYTEST_DONT_REWRITE" not in (package.__doc__ or ""):
        package.__doc__ = (package.__doc__ or "") + "\n\nPYTEST_DONT_REWRITE: imported before pytest starts.\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_xla_dynamo`` and ``pytest-xla-dynamo``: a sub-command's exit code,
    or pytest's."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        return COMMANDS[args[0]](args[1:])
    _package_imported_before_pytest()
    return int(pytest.main(build_args(args, suites_dir()), plugins=[MainMarker()]))


if __name__ == "__main__":
    sys.exit(main())
