"""The gate's files: start-up checks that the expected file, the timing baseline and the summary are usable,
and how the summary is written.

:func:`check_paths` runs before any test (the gate plugin's constructor calls it), so that a path the
gate could not read or write at the end of a long run is a usage error at once (exit status 4), naming
the option, the path and why. :func:`write_summary` writes the Markdown summary as a session and
``merge`` both do: appended to GitHub's ``$GITHUB_STEP_SUMMARY``, any other file replaced atomically.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.fileio import atomic_write_text, write_target


def write_problem(path: Path, *, append: bool = False) -> str:
    """Why ``path`` cannot be written atomically (a temporary file in its folder, then a rename), or ``""``.

    ``append``: the file is appended to in place, so an existing file must itself be writable. Probes
    the nearest existing folder with an unnamed temporary file (so root on a read-only or virtual file
    system is caught too); nothing is left behind. A symlink is judged by its target (what is rewritten).
    """
    path = write_target(path)
    if path.is_dir():
        return "it is a directory"
    if path.exists() and not path.is_file():
        return "it is not a regular file (a device, a FIFO or a socket)"
    if append and path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    if path.is_file() and (why := _locked(path)):
        return why
    folder = path.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    try:
        with tempfile.TemporaryFile(dir=folder) as probe:
            probe.write(b"\0")  # a full disk refuses the byte (ENOSPC), not the empty file
            probe.flush()
    except OSError as err:
        if err.errno == errno.ENOSPC:
            return f"no space left on the device of {folder}"
        return f"the folder {folder} is not writable ({err.strerror or err})"
    return ""


def _locked(path: Path) -> str:
    """Why the existing file ``path`` cannot be replaced although its folder is writable (``""``: it can): an
    immutable or append-only file (``chattr +i``/``+a``) refuses the rename, and says so to an open for writing
    (``EPERM``; a mode without write permission says ``EACCES``, and a rename replaces such a file)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.EPERM:
            return "the file is immutable or append-only (chattr +i/+a): it cannot be replaced"
        return ""
    os.close(fd)
    return ""


def is_step_summary(path: Path) -> bool:
    """Whether ``path`` is GitHub's job summary file (``$GITHUB_STEP_SUMMARY``), which is appended to."""
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return step_summary is not None and step_summary != "" and Path(step_summary).resolve() == path.resolve()


def write_summary(path: Path, text: str) -> str:
    """Write the Markdown summary ``text`` to ``path``: appended to ``$GITHUB_STEP_SUMMARY`` (every step of a
    job adds to it, ``>> $GITHUB_STEP_SUMMARY``), any other file replaced atomically (keeping its mode).
    Returns how: ``"appended to"`` or ``"written to"``."""
    if is_step_summary(path):
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return "appended to"
    atomic_write_text(path, text + "\n")
    return "written to"


def check_paths(xcfg: XlaConfig, baseline: Path | None = None) -> None:
    """Raise :class:`pytest.UsageError` if a gate file named by ``xcfg`` cannot be used."""
    expected = xcfg.expected
    if expected is not None:
        if expected.is_dir():
            raise pytest.UsageError(f"--xla-expected: {str(expected)!r} is a directory; valid: an expected-results "
                                    "CSV file (created by --xla-update-expected if missing)")
        if xcfg.update_expected:
            why = write_problem(expected)
            if why:
                raise pytest.UsageError(f"--xla-expected: cannot write {str(expected)!r} under "
                                        f"--xla-update-expected: {why}")
        elif not expected.exists():
            raise pytest.UsageError(f"--xla-expected: no such file {str(expected)!r} "
                                    "(use --xla-update-expected to create it)")
    if baseline is not None and baseline.is_dir():
        raise pytest.UsageError(f"--xla-timing-baseline: {str(baseline)!r} is a directory; valid: a JSON report "
                                "of an earlier run (--xla-report=json)")
    if baseline is not None and not baseline.exists():
        raise pytest.UsageError(f"--xla-timing-baseline: no such file {str(baseline)!r}")
    summary = xcfg.summary
    if summary is not None:
        why = write_problem(summary, append=is_step_summary(summary))
        if why:
            raise pytest.UsageError(f"--xla-summary: cannot write {str(summary)!r}: {why}; valid: a file path in "
                                    "a writable folder")
