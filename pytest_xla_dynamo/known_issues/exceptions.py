"""Exception types of the known-issue registry: its own error, and matching an entry's ``raises`` by name.

``raises`` is a builtin name (``"RuntimeError"``) or a dotted path (``"torch._dynamo.exc.Unsupported"``).
Nothing here imports a module an entry names (a registry file must not pick code to run): loading checks
the name's form; a test's exception is matched at judge time by its class path, the module and qualified
name of each class of its MRO (:func:`exception_matches`), or by the class the path names in a module that
is already imported (a re-export such as ``pytest_xla_dynamo.parity.ParityError``). A name that matches
nothing is a failure ("expected X, got Y"), never any exception. No torch here.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any


class RegistryError(ValueError):
    """A bad registry entry (reported as a usage error naming the entry and its source)."""


def builtin_exception(spec: str) -> type[BaseException] | None:
    """The builtin exception class ``spec`` names (``"KeyError"``), None for a dotted path or another name."""
    obj = getattr(builtins, spec.strip(), None) if "." not in spec else None
    return obj if isinstance(obj, type) and issubclass(obj, BaseException) else None


def resolve_exception(spec: str) -> type[BaseException] | None:
    """The class ``spec`` names, found without importing anything: a builtin, or a dotted path in the modules
    already imported (``sys.modules``). None where the path's module is not imported; RegistryError where
    it names no exception class."""
    spec = spec.strip()
    if "." not in spec:
        found = builtin_exception(spec)
        if found is None:
            raise RegistryError(f"raises={spec!r} is not a builtin exception (use a dotted path, "
                                "e.g. 'torch._dynamo.exc.Unsupported')")
        return found
    parts = spec.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj: Any = module
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                raise RegistryError(f"raises={spec!r}: the module {'.'.join(parts[:cut])} has no "
                                    f"{'.'.join(parts[cut:])}")
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return obj
        raise RegistryError(f"raises={spec!r} is not an exception class")
    return None


def class_paths(exc: BaseException) -> list[str]:
    """The class paths of ``exc``'s classes, most derived first (``module.qualname``; a builtin's bare name)."""
    return [cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
            for cls in type(exc).__mro__]


def exception_matches(spec: str, exc: BaseException) -> bool:
    """Whether ``exc`` is an instance of the class ``spec`` names: a class of its MRO has that path, or the
    path names, in an imported module, a class ``exc`` is an instance of. Imports nothing."""
    spec = spec.strip()
    if spec in class_paths(exc):
        return True
    try:
        found = resolve_exception(spec)
    except RegistryError:
        return False
    return found is not None and isinstance(exc, found)


def check_exception_name(spec: str, where: str = "") -> None:
    """Validate ``raises`` without importing anything: a builtin exception, or a dotted path of identifiers
    (matched by name when a test it applies to fails)."""
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
    return class_paths(exc)[0]
