"""Files the plugin writes: atomically (a temporary file in the same folder, then ``os.replace``),
with the permissions of an ordinary file (``0666 & ~umask``), never half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], binary: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` through a temporary file in its folder, moved into place only on success.

    The temporary file is removed on every exit path (an exception, ``KeyboardInterrupt``); the
    final file gets ``0666 & ~umask`` (``mkstemp`` would leave it ``0600``).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())
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
