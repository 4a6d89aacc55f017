"""The known-issue table, generated from the registry: Markdown for the docs, plain text for a terminal.

``docs/known-issues.md`` holds the table between two marker lines (:data:`BEGIN`, :data:`END`);
``tests/test_known_issues_table.py`` fails when that block differs from :func:`render_block`.
Regenerate it with::

    python -m pytest_xla_dynamo.known_issues.table --write docs/known-issues.md

Other modes: ``--check FILE`` (exit 1 when the block is stale), ``--markdown`` (print the table),
``--installed`` (judge against the installed versions instead of the documented stack :data:`DOC_VERSIONS`),
``--file TOML`` (add a downstream registry file). Bad input is a usage error (exit 4). No torch here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from packaging.version import InvalidVersion, Version

from pytest_xla_dynamo.fileio import TextFileError, atomic_write_text, read_text
from pytest_xla_dynamo.known_issues.exceptions import RegistryError
from pytest_xla_dynamo.known_issues.registry import KnownIssue, Registry, load_registry
from pytest_xla_dynamo.versions import installed_versions

#: the stack the documentation describes (the pins of the ``xla`` extra in pyproject.toml)
DOC_VERSIONS: Mapping[str, str | None] = {"torch": "2.9.0", "torch_xla": "2.9.0"}
DOC_FILE = "docs/known-issues.md"
BEGIN = "<!-- known-issues-table:begin -->"
END = "<!-- known-issues-table:end -->"
COMMAND = f"python -m pytest_xla_dynamo.known_issues.table --write {DOC_FILE}"
COLUMNS = ("id", "kind", "{on}", "reproducer", "link")
REPRODUCES = "reproduces (strict xfail)"
FIXED = "fixed (regression test)"
USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR, without importing pytest


class TableError(ValueError):
    """A file that cannot take the table (no marker block, markers out of order)."""


def on_label(versions: Mapping[str, str | None]) -> str:
    """The status column's heading: ``"on 2.9"`` (torch_xla's major.minor, else torch's)."""
    for dist in ("torch_xla", "torch"):
        version = versions.get(dist)
        if version:
            try:
                release = Version(version).release
            except InvalidVersion:
                return f"on {dist} {version}"
            return "on " + ".".join(str(part) for part in release[:2])
    return "on these versions"


def _link_text(url: str) -> str:
    for prefix in ("https://github.com/", "https://", "http://"):
        if url.startswith(prefix):
            return url[len(prefix):]
    return url


def _link(url: str) -> str:
    return f"[{_link_text(url)}]({url})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _where(entry: KnownIssue) -> str:
    """Where the entry holds, beside its reproducer: its tiers and CPUs, if it names them."""
    where = ([f"{', '.join(entry.tiers)} tier only"] if entry.tiers else []) + \
        ([f"CPUs {', '.join(entry.cpus)} only"] if entry.cpus else [])
    return f" ({'; '.join(where)})" if where else ""


def row(entry: KnownIssue, versions: Mapping[str, str | None]) -> tuple[str, str, str, str, str]:
    """One entry's cells (Markdown): id, kind, status on ``versions``, reproducer, link."""
    status = REPRODUCES if entry.affected(versions) else FIXED
    if entry.reproducer:
        reproducer = f"`{entry.reproducer}`"
    else:  # an entry for suite cases: the models (or tests) it covers
        reproducer = "suite cases: " + ", ".join(entry.models or tuple(f"`{t}`" for t in entry.tests))
    reproducer += _where(entry)
    if entry.url:
        link = _link(entry.url)
    else:
        link = "none found" + (f" (related: {_link(entry.related[0])})" if entry.related else "")
    return f"`{entry.id}`", entry.kind, status, reproducer, link


def render_markdown(registry: Iterable[KnownIssue], versions: Mapping[str, str | None]) -> str:
    """The Markdown table of ``registry`` judged against ``versions`` (one row per entry, in order)."""
    head = [c.format(on=on_label(versions)) for c in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for entry in registry:
        lines.append("| " + " | ".join(_cell(c) for c in row(entry, versions)) + " |")
    return "\n".join(lines) + "\n"


def render_text(registry: Iterable[KnownIssue], versions: Mapping[str, str | None]) -> str:
    """The same table as plain aligned text (for a terminal)."""
    head = [c.format(on=on_label(versions)) for c in COLUMNS]
    rows = [head]
    for entry in registry:
        status = REPRODUCES if entry.affected(versions) else FIXED
        reproducer = (entry.reproducer or "suite cases: " + ", ".join(entry.models or entry.tests)) + _where(entry)
        rows.append([entry.id, entry.kind, status, reproducer, entry.url or "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
                     for r in rows) + "\n"


def render_block(registry: Iterable[KnownIssue], versions: Mapping[str, str | None] = DOC_VERSIONS) -> str:
    """What goes between :data:`BEGIN` and :data:`END` (by default: judged on the documented stack)."""
    return render_markdown(registry, versions)


def find_block(text: str, where: str = DOC_FILE) -> tuple[int, int]:
    """Character offsets of the block's content (after the BEGIN line, up to the END line)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise TableError(f"{where}: needs exactly one line {BEGIN!r} followed by one line {END!r} "
                         f"(found {len(starts)} and {len(ends)})")
    offset = sum(len(line) for line in lines[:starts[0] + 1])
    return offset, offset + sum(len(line) for line in lines[starts[0] + 1:ends[0]])


def current_block(text: str, where: str = DOC_FILE) -> str:
    """The content of the marker block of ``text``."""
    start, end = find_block(text, where)
    return text[start:end]


def replace_block(text: str, block: str, where: str = DOC_FILE) -> str:
    """``text`` with its marker block's content replaced by ``block``."""
    start, end = find_block(text, where)
    if start and not text[:start].endswith("\n"):  # a BEGIN line at the very end of the file
        block = "\n" + block
    return text[:start] + block + text[end:]


def new_document(block: str) -> str:
    """A new ``docs/known-issues.md``: a title and the marker block."""
    return f"# Known issues\n\n{BEGIN}\n{block}{END}\n"


def write_block(path: Path, block: str) -> bool:
    """Put ``block`` into ``path`` (a new file gets a title and the block); whether it changed."""
    if path.is_dir():
        raise TableError(f"{path}: is a directory, not a Markdown file")
    if not path.exists():
        atomic_write_text(path, new_document(block))
        return True
    text = _read(path)
    updated = replace_block(text, block, str(path))
    if updated == text:
        return False
    atomic_write_text(path, updated)
    return True


def _read(path: Path) -> str:
    """The UTF-8 text of a Markdown file; TableError naming it: a folder, a missing file, not UTF-8."""
    try:
        return read_text(path)
    except TextFileError as exc:
        raise TableError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # a usage error is exit 4 in this project, not 2
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog or "python -m pytest_xla_dynamo.known_issues.table",
                     description="The known-issue table, generated from the registry.")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print the Markdown table (default: plain text)")
    out.add_argument("--write", metavar="FILE", type=Path,
                     help=f"put the Markdown table between the marker lines of FILE (e.g. {DOC_FILE})")
    out.add_argument("--check", metavar="FILE", type=Path,
                     help="exit 1 when the table in FILE differs from the registry")
    parser.add_argument("--installed", action="store_true",
                        help="judge against the installed torch/torch_xla instead of the documented "
                             + " + ".join(f"{d} {v}" for d, v in DOC_VERSIONS.items()))
    parser.add_argument("--file", metavar="TOML", type=Path, action="append", default=[],
                        help="also load this registry file (repeatable)")
    return parser


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Print, write or check the table (see the module docstring); the exit code."""
    args = build_parser(prog).parse_args(argv)
    versions = installed_versions() if args.installed else DOC_VERSIONS
    try:
        registry: Registry = load_registry(args.file)
        block = render_block(registry, versions)
        if args.write is not None:
            changed = write_block(args.write, block)
            print(f"{args.write}: {'wrote the known-issue table' if changed else 'the table is up to date'}")
        elif args.check is not None:
            if current_block(_read(args.check), str(args.check)) != block:
                print(f"{args.check}: the known-issue table differs from the registry; regenerate it with\n"
                      f"  python -m pytest_xla_dynamo.known_issues.table --write {args.check}", file=sys.stderr)
                return 1
            print(f"{args.check}: the table is up to date")
        else:
            print(render_markdown(registry, versions) if args.markdown else render_text(registry, versions),
                  end="")
    except (RegistryError, TableError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
