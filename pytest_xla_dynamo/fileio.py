"""Files the plugin writes and reads: written atomically (a temporary file in the same folder, then
``os.replace``), never half-written, keeping an existing file's mode and a symlink's target; read as UTF-8
text with every other encoding a clear error naming the file.

Writing: a new file gets the permissions of an ordinary file (``0666 & ~umask``); an existing file keeps
its mode; a path that is a symlink has its target rewritten (the link stays a link).

Reading (:func:`read_text`): a UTF-8 byte-order mark (as spreadsheets save CSV files) is dropped; a
UTF-16/UTF-32 file, binary data or invalid UTF-8 is a :class:`TextFileError` naming the file and the
line, as is a folder, a missing file, a device or a FIFO (``/dev/zero`` would never end) and a file over
:data:`MAX_FILE_BYTES`.

Bounds: every file the plugin reads is read within the limits of this module, so that no input can exhaust
the memory or the interpreter's stack: its size (:data:`MAX_FILE_BYTES`), its nesting
(:func:`check_nesting`, :data:`MAX_DEPTH`: the JSON and TOML parsers recurse once per level), a CSV cell
(:data:`MAX_FIELD_CHARS`) and a range a value expands to (:data:`MAX_RANGE`, ``xla_timing_cpus``).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

#: byte-order marks of encodings other than UTF-8, longest first (UTF-32-LE starts with UTF-16-LE's)
_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


#: the largest file read (bytes): a JSON report of tens of thousands of records is well below it
MAX_FILE_BYTES = 256 * 1024 * 1024
#: the deepest nesting of arrays and tables/objects read (a record or a registry entry nests 3 levels)
MAX_DEPTH = 64
#: the longest CSV cell (characters): the ``csv`` module's own limit, said as a usage error
MAX_FIELD_CHARS = 131_072
#: the most numbers a range (``0-7``) expands to: Linux numbers at most 8,192 CPUs by default
MAX_RANGE = 65_536

#: the tokens that open or close a level, and the strings (and TOML comments) whose brackets do not count
_NESTING_TOKENS = {
    "json": re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]'),
    "toml": re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}\n]'),
}


class TextFileError(ValueError):
    """A file that cannot be read as UTF-8 text (the message names the file, and the line where known)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_target(path: str | os.PathLike[str]) -> Path:
    """The file a write of ``path`` replaces: ``path``, or the end of its symlink chain (which may not
    exist yet)."""
    target = Path(path)
    for _ in range(40):  # a symlink loop ends here (the replace then fails as the OS says)
        if not target.is_symlink():
            break
        link = Path(os.readlink(target))
        target = link if link.is_absolute() else target.parent / link
    return target


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], binary: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` through a temporary file in its folder, moved into place only on success.

    The temporary file is removed on every exit path (an exception, ``KeyboardInterrupt``). The final
    file keeps the mode of the file it replaces, else gets ``0666 & ~umask`` (``mkstemp`` would leave it
    ``0600``); a symlink's target is written, not the link replaced by a plain file.
    """
    target = write_target(path)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, mode)
        f: IO[Any] = open(fd, "wb") if binary else open(fd, "w", encoding="utf-8", newline="")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path) as f:
        f.write(text)
    return Path(path)


def decode_text(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text (a leading BOM dropped); :class:`TextFileError` naming ``source`` otherwise."""
    for bom, encoding in _OTHER_BOMS:
        if data.startswith(bom):
            raise TextFileError(f"{source}: the file is {encoding}-encoded (it starts with a {encoding} byte-order "
                                "mark); save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise TextFileError(f"{source}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}); "
                            "save it as UTF-8") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise TextFileError(f"{source}:{line}: a NUL byte: a binary file (or UTF-16 without a byte-order mark), "
                            "not UTF-8 text")
    return text


def read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of ``path`` (see :func:`decode_text`); :class:`TextFileError` for a folder, a missing
    or unreadable file, what is not a regular file (a device, a FIFO, a socket) and a file over
    :data:`MAX_FILE_BYTES`."""
    file = Path(path)
    if file.is_dir():
        raise TextFileError(f"{file}: is a directory, not a file")
    try:
        if not stat.S_ISREG(file.stat().st_mode):
            raise TextFileError(f"{file}: not a regular file (a device, a FIFO or a socket); valid: a file")
        with file.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise TextFileError(f"{file}: no such file") from None
    except OSError as err:
        raise TextFileError(f"{file}: cannot read it: {err.strerror or err}") from None
    if len(data) > MAX_FILE_BYTES:
        raise TextFileError(f"{file}: larger than {MAX_FILE_BYTES // 2**20} MiB, the most read; valid: a smaller file")
    return decode_text(data, str(file))


def check_nesting(text: str, source: str, syntax: str) -> None:
    """:class:`TextFileError` naming ``source`` and the line where ``text`` (``syntax``: ``"json"`` or ``"toml"``)
    nests arrays and tables deeper than :data:`MAX_DEPTH`, checked before a parser recurses into it (brackets in
    strings and comments do not count; one linear pass)."""
    depth, line = 0, 1
    for match in _NESTING_TOKENS[syntax].finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise TextFileError(f"{source}:{line}: nested more than {MAX_DEPTH} levels deep; valid: at most "
                                    f"{MAX_DEPTH} levels of arrays and tables")
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
        else:
            line += token.count("\n")
