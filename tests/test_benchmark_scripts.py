"""The benchmark scripts' command lines: what they read, and a clear error (no traceback) for a bad report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIVERGENCES = REPO / "benchmarks" / "divergences.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(DIVERGENCES), *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_divergences_reads_a_report_folder_or_its_file() -> None:
    """A full-tier report (mnasnet1_0's training parity, 2026-12-02): the folder and its JSON file give the same
    output."""
    folder = REPO / "tests" / "data" / "full-tier-mnasnet1_0"
    by_folder = _run(str(folder), "--ignore", "buffer *running_var")
    by_file = _run(str(folder / "xla-dynamo.jsonl"), "--ignore", "buffer *running_var")
    assert by_folder.returncode == 0, by_folder.stderr
    assert by_folder.stdout == by_file.stdout
    assert "mnasnet1_0 / trace_once / train: 4 diverging tensors, 4 not covered" in by_folder.stdout


def test_divergences_names_a_bad_report(tmp_path: Path) -> None:
    not_json = tmp_path / "notes.txt"
    not_json.write_text("hello\n")
    for bad, detail in ((tmp_path / "missing.jsonl", "missing.jsonl: no such file"),
                        (tmp_path, "xla-dynamo.jsonl: no such file"),  # a folder without xla-dynamo.jsonl
                        (not_json, "notes.txt:1: not a JSON object")):
        result = _run(str(bad))
        assert result.returncode == 2, result
        assert "Traceback" not in result.stderr, result.stderr
        assert "divergences.py: error: cannot read the report" in result.stderr and detail in result.stderr
        assert "the folder that holds its xla-dynamo.jsonl" in result.stderr
