"""``python -m pytest_xla_dynamo [pytest args]`` (console script ``pytest-xla-dynamo``).

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

``python -m pytest_xla_dynamo --suites-dir`` / ``--snapshots-dir`` print the installed folders (for
``--xla-expected=$(python -m pytest_xla_dynamo --snapshots-dir)/expected_small.csv``).
The equivalent plain pytest command is ``pytest --pyargs pytest_xla_dynamo.suites [args]``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

REPRO_PREFIX = "python -m pytest_xla_dynamo"
SUITES_PACKAGE = "pytest_xla_dynamo.suites"
SNAPSHOTS_PACKAGE = "pytest_xla_dynamo.snapshots"


def package_dir(package: str) -> Path:
    """The folder of an installed package of this distribution (without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not installed (pip install pytest-xla-dynamo)")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def suites_dir() -> Path:
    return package_dir(SUITES_PACKAGE)


def snapshots_dir() -> Path:
    return package_dir(SNAPSHOTS_PACKAGE)


class _MainMarker:
    """Registered as a plugin object by :func:`main`, so the session knows how it was launched."""

    # An attribute, not isinstance: under ``python -m`` this module runs as ``__main__``, and an
    # import of ``pytest_xla_dynamo.__main__`` elsewhere would define a second, different class.
    xla_dynamo_main = True


def launched_by_main(config: pytest.Config) -> bool:
    """Whether this session was started by ``python -m pytest_xla_dynamo`` (repro commands say so)."""
    return any(getattr(p, "xla_dynamo_main", False) is True for p in config.pluginmanager.get_plugins())


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


def _plugin_disabled(args: Sequence[str], name: str) -> bool:
    return any(a in (f"-pno:{name}", f"no:{name}") for a in args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_xla_dynamo`` and ``pytest-xla-dynamo``; returns pytest's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--suites-dir"]:
        print(suites_dir())
        return 0
    if args == ["--snapshots-dir"]:
        print(snapshots_dir())
        return 0
    return int(pytest.main(build_args(args, suites_dir()), plugins=[_MainMarker()]))


if __name__ == "__main__":
    sys.exit(main())
