"""Files the plugin writes and reads: written atomically (a temporary file in the same folder, then
``os.replace``), never half-written, keeping an existing file's mode and a symlink's target; read as UTF-8
text with every other encoding a clear error naming the file.

Writing: a new file gets the permissions of an ordinary file (``0666 & ~umask``); an existing file keeps
its mode; a path that is a symlink has its target rewritten (the link stays a link).

Reading (:func:`read_text`): a UTF-8 byte-order mark (as spreadsheets save CSV files) is dropped; a
UTF-16/UTF-32 file, binary data or invalid UTF-8 is a :class:`TextFileError` naming the file and the
line, as is a folder or a missing file.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

#: byte-order marks of encodings other than UTF-8, longest first (UTF-32-LE starts with UTF-16-LE's)
_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


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
    or unreadable file."""
    file = Path(path)
    if file.is_dir():
        raise TextFileError(f"{file}: is a directory, not a file")
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise TextFileError(f"{file}: no such file") from None
    except OSError as err:
        raise TextFileError(f"{file}: cannot read it: {err.strerror or err}") from None
    return decode_text(data, str(file))
