"""Installed versions of the stack, read from package metadata (no import of torch)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from importlib import metadata

from packaging.version import InvalidVersion, Version

STACK = ("torch", "torch_xla")


@cache
def installed(dist: str) -> str | None:
    """The installed version of ``dist`` (None: not installed)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def installed_versions(dists: Iterable[str] = STACK) -> dict[str, str | None]:
    """``{dist: version or None}`` for ``dists``."""
    return {d: installed(d) for d in dists}


def public_version(version: str) -> str:
    """``"2.9.0+cpu"`` -> ``"2.9.0"``."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def versions_text(versions: Mapping[str, str | None] | None = None) -> str:
    """``"torch 2.9.0, torch_xla 2.9.0"`` (``not installed`` where missing)."""
    versions = installed_versions() if versions is None else versions
    return ", ".join(f"{d} {v or 'not installed'}" for d, v in versions.items())
