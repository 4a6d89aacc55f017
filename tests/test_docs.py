"""The documentation's limits (issue 48): pages a user reads in minutes, no raw run folders, no broken link.

Every page under docs/ at most 500 lines, the README at most 200, docs/ at most 3 MB of tracked files, and every
relative link of the README and of the pages (``[text](path#anchor)``, images too) names a tracked file and, where it
points into a Markdown page, one of that page's headings (GitHub's anchors). Pure: reads files and ``git ls-files``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGE_LINES = 500
README_LINES = 200
DOCS_BYTES = 3 * 1024 * 1024

#: ``[text](target)`` and ``![alt](target)``; the target ends at whitespace or ``)``
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def tracked() -> set[str] | None:
    """The repository's tracked files (relative paths), or None outside a git checkout (an sdist)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {name for name in out.split("\0") if name}


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def prose(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to
    hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The page's heading anchors; a repeated heading gets ``-1``, ``-2``, ... as on GitHub."""
    counts: dict[str, int] = {}
    found = set()
    for _, line in prose(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = counts.get(base, 0)
            counts[base] = count + 1
            found.add(f"{base}-{count}" if count else base)
    return found


def test_no_page_over_the_limit() -> None:
    long = {str(p.relative_to(REPO)): n for p in pages() if (n := len(p.read_text(encoding="utf-8").splitlines()))
            > PAGE_LINES}
    assert long == {}, f"pages over {PAGE_LINES} lines: split them into a guide and its findings"


def test_the_readme_is_short() -> None:
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines"


def test_docs_track_no_raw_run_folders() -> None:
    files = tracked()
    if files is None:
        pytest.skip("not a git checkout")
    docs = [name for name in files if name.startswith("docs/")]
    size = sum((REPO / name).stat().st_size for name in docs if (REPO / name).is_file())
    assert size <= DOCS_BYTES, f"docs/ tracks {size / 1e6:.1f} MB: keep a run's summary CSV, not its folder"


def test_every_relative_link_resolves() -> None:
    files = tracked()
    broken = []
    for page in [REPO / "README.md", *pages()]:
        for number, line in prose(page.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http(s), mailto: not checked here
                    continue
                path, _, anchor = target.partition("#")
                where = f"{page.relative_to(REPO)}:{number}: {target}"
                dest = (page.parent / path).resolve() if path else page
                relative = dest.relative_to(REPO).as_posix() if dest.is_relative_to(REPO) else None
                if files is None or relative is None:
                    exists = dest.exists()
                elif dest.is_dir():
                    exists = any(name.startswith(relative + "/") for name in files)
                else:
                    exists = relative in files
                if not exists:
                    broken.append(f"{where} (no such tracked file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where} (no such heading)")
    assert broken == [], "broken links:\n" + "\n".join(broken)


def test_slugs_follow_github() -> None:
    assert slug("Calibrated runs and the speedup's noise") == "calibrated-runs-and-the-speedups-noise"
    assert slug("The CPU's instruction set") == "the-cpus-instruction-set"
    assert slug("Under pytest-xdist: the machine lock") == "under-pytest-xdist-the-machine-lock"
    assert slug("`--xla-zoo` collections") == "--xla-zoo-collections"
