"""The package list of pyproject.toml names every subpackage of pytest_xla_dynamo (an installed wheel that
misses one fails at import, as a fresh virtualenv without torch showed)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_packaged() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    package = REPO / "pytest_xla_dynamo"
    found = {"pytest_xla_dynamo." + ".".join(p.parent.relative_to(package).parts)
             for p in package.rglob("__init__.py") if p.parent != package}
    assert found <= listed, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"
