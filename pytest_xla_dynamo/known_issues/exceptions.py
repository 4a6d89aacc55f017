"""Exception types of the known-issue registry: its own error, and the classes an entry's ``raises`` names.

``raises`` is a builtin name (``"RuntimeError"``) or a dotted path (``"torch._dynamo.exc.Unsupported"``).
Loading the registry checks the name without importing anything; the class is resolved (imported)
only when a test the entry applies to is collected. No torch here.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
from typing import Any


class RegistryError(ValueError):
    """A bad registry entry (reported as a usage error naming the entry and its source)."""


def resolve_exception(spec: str) -> type[BaseException] | None:
    """``"RuntimeError"`` (a builtin) or a dotted path (``"torch._dynamo.exc.Unsupported"``) -> class.

    None where the dotted path's top-level package is not installed (the entry's xfail then accepts
    any exception); RegistryError where it names nothing or no exception class.
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
        try:
            resolve_exception(spec)
        except RegistryError as exc:
            raise RegistryError(f"{prefix}{exc}") from None
        return
    if not all(part.isidentifier() for part in spec.split(".")):
        raise RegistryError(f"{prefix}raises={spec!r} is not a dotted path to an exception class")


def type_name(exc: BaseException) -> str:
    """``"KeyError"`` for a builtin, else the class's dotted path."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
