"""Installed versions of the stack, read from package metadata (no import of torch), and the CPU they run on."""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import metadata
from typing import Any

from packaging.version import InvalidVersion, Version

STACK = ("torch", "torch_xla")
#: the vector instruction-set flags a CPU description lists (those that change which kernels run)
FLAGS_SHOWN = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_tile")


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


@cache
def cpu_description() -> dict[str, Any]:
    """The CPU's model name and its vector instruction-set flags (from ``/proc/cpuinfo`` where there is one)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                if model and flags:
                    break
    except OSError:  # not Linux
        pass
    return {"model": model, "machine": platform.machine(), "flags": [f for f in FLAGS_SHOWN if f in flags]}
