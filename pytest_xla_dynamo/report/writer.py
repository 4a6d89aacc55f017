"""The report set: a session's csv/json/png files, written whole or not at all.

:class:`ReportSet` writes every selected file into a hidden staging folder inside the report folder
(``.xla-dynamo-staging-*``, so the final moves stay on one file system), and only when every file is
written moves them into place (``os.replace``) and removes the set's files that an earlier run left and
this run did not write (so ``xla-dynamo.*`` in a folder always come from one run). Otherwise it moves
nothing: a writer that fails, Ctrl-C or SIGTERM while writing leave the folder as it was (and a report
folder this run created is removed again). The staging folder and every temporary file are removed on
every exit path. Two sessions writing one folder at once cannot mix their sets: the moves of a set
happen under an exclusive lock on the folder (:func:`folder_lock`), so the folder ends with the whole
set of whichever session moved its set in last.

Signals: while the files are written, SIGTERM raises :class:`Terminated` (its default action would end
the process without running any cleanup); during the moves, SIGINT and SIGTERM are held back and
delivered when the set is in place. The previous handlers are restored afterwards. :func:`check_report_dir`
is the start-up check of ``--xla-report-dir``. No torch; matplotlib only in the png writer.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.report import csvfile, jsonl, png

BASENAME = "xla-dynamo"  # report files: xla-dynamo.csv, xla-dynamo.jsonl, xla-dynamo.png
FILE_FORMATS = ("csv", "json", "png")
FILE_SUFFIX = {"csv": ".csv", "json": ".jsonl", "png": ".png"}
STAGING_PREFIX = ".xla-dynamo-staging-"
NO_MATPLOTLIB = "png report not written: matplotlib is not installed (pip install matplotlib)"


def report_path(folder: str | os.PathLike[str], fmt: str) -> Path:
    """Where the ``fmt`` report of a set lives: ``<folder>/xla-dynamo.<suffix>``."""
    return Path(folder) / (BASENAME + FILE_SUFFIX[fmt])


def file_formats(formats: Iterable[str]) -> list[str]:
    """The file formats among ``formats`` (``table`` is not a file), in :data:`FILE_FORMATS` order."""
    chosen = set(formats)
    return [f for f in FILE_FORMATS if f in chosen]


# --- start-up check ------------------------------------------------------------------------------------


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot hold reports (None: it can), found by really creating a folder there."""
    probe = folder
    while not (probe.exists() or probe.is_symlink()) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return "a file, not a folder" if probe == folder else f"cannot be created: {str(probe)!r} is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(dir=probe, prefix=STAGING_PREFIX))
    except OSError as exc:
        where = "not writable" if probe == folder else f"cannot be created in {str(probe)!r}"
        return f"{where}: {exc.strerror or exc}"
    return None


def check_report_dir(xcfg: XlaConfig) -> str | None:
    """The start-up check of ``--xla-report-dir``: None when the folder can take the selected file
    reports (or none is selected), else the usage-error text naming the path."""
    if not file_formats(xcfg.report):
        return None
    problem = folder_problem(Path(xcfg.report_dir))
    if problem is None:
        return None
    return (f"--xla-report-dir: invalid value {str(xcfg.report_dir)!r} ({problem}); "
            "valid: a writable folder (created when missing)")


# --- signal windows ------------------------------------------------------------------------------------


class Terminated(BaseException):
    """SIGTERM arrived while a report set was being written (raised so that every cleanup runs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum} while writing the reports")
        self.signum = signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _restore(signum: int, handler: Any) -> None:
    signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """During the block, SIGTERM raises :class:`Terminated`; the previous handler is restored after."""
    if not _main_thread():  # signal handlers belong to the main thread
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        _restore(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held(signums: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[list[int]]:
    """During the block, ``signums`` are recorded, not acted on; after it the previous handlers are
    back and the held signals are raised again (Ctrl-C then raises KeyboardInterrupt as usual)."""
    held: list[int] = []
    if not _main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous = {s: signal.signal(s, hold) for s in signums}
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            _restore(signum, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


# --- the set -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (``flock`` on the folder itself: no lock file is left behind),
    waiting for another session that holds it. Where there is no ``flock`` (Windows) nothing is locked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _matplotlib_missing() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return True
    return False


@dataclass
class ReportSet:
    """One session's file reports, written into ``folder`` whole or not at all (module docstring).

    After :meth:`write`: ``lines`` say what was written (or skipped), ``errors`` what could not be
    written (then nothing was moved in), ``published`` whether the set is in place. :meth:`write`
    raises KeyboardInterrupt or :class:`Terminated` when a signal came while writing, after cleaning up.
    """

    records: Sequence[CaseRecord]
    formats: Iterable[str]
    folder: Path
    environment: dict[str, Any]
    baseline: str | None = None
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    published: bool = False

    def _write_one(self, fmt: str, path: Path) -> None:
        if fmt == "csv":
            csvfile.write_csv(self.records, path)
        elif fmt == "json":
            jsonl.write_json(self.records, path, self.environment)
        else:
            png.write_png(self.records, path, self.environment, baseline=self.baseline)

    def _error(self, fmt: str, exc: BaseException) -> str:
        return f"could not write the {fmt} report {report_path(self.folder, fmt)}: {type(exc).__name__}: {exc}"

    def write(self) -> None:
        """Write the set (see the class docstring)."""
        self.folder = Path(self.folder)
        notes = {"png": NO_MATPLOTLIB} if "png" in file_formats(self.formats) and _matplotlib_missing() else {}
        chosen = [f for f in file_formats(self.formats) if f not in notes]
        self.lines = list(notes.values())
        if not chosen:
            return
        missing = [p for p in (self.folder, *self.folder.parents) if not (p.exists() or p.is_symlink())]
        stage: Path | None = None
        with sigterm_raises():
            try:
                try:
                    self.folder.mkdir(parents=True, exist_ok=True)
                    stage = Path(tempfile.mkdtemp(dir=self.folder, prefix=STAGING_PREFIX))
                except OSError as exc:
                    self.errors = [self._error(fmt, exc) for fmt in chosen]
                    return
                for fmt in chosen:
                    try:
                        self._write_one(fmt, report_path(stage, fmt))
                    except Exception as exc:  # an error line and a failing exit status, nothing moved in
                        self.errors.append(self._error(fmt, exc))
                if not self.errors:
                    with folder_lock(self.folder):
                        self._publish(stage, chosen, notes)
            finally:
                if stage is not None:
                    shutil.rmtree(stage, ignore_errors=True)
                if not self.published:
                    for created in missing:  # the folders this run created, deepest first
                        with contextlib.suppress(OSError):
                            created.rmdir()

    def _publish(self, stage: Path, chosen: list[str], notes: dict[str, str]) -> None:
        """Move the staged files into place, signals held, and drop the earlier run's other set files."""
        with signals_held():
            try:
                for fmt in chosen:
                    os.replace(report_path(stage, fmt), report_path(self.folder, fmt))
                removed = [p for p in (report_path(self.folder, f) for f in FILE_FORMATS if f not in chosen)
                           if p.is_file() or p.is_symlink()]
                for path in removed:
                    path.unlink()
            except OSError as exc:
                self.errors.append(f"could not move the reports into {self.folder}: {type(exc).__name__}: {exc}")
                return
            self.published = True
            self.lines = [notes.get(f) or f"{f} report: {report_path(self.folder, f)}"
                          for f in file_formats(self.formats)]
            self.lines += [f"removed {p}: left by an earlier run, not part of this set" for p in removed]


def write_reports(records: Sequence[CaseRecord], formats: Iterable[str], report_dir: str | os.PathLike[str],
                  environment: dict[str, Any], *, baseline: str | None = None) -> tuple[list[str], list[str]]:
    """Write the selected file reports as one set; returns (lines saying what was written, error lines)."""
    written = ReportSet(records, list(formats), Path(report_dir), environment, baseline)
    written.write()
    return written.lines, written.errors
