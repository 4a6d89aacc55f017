"""Start-up checks of the gate's files (gating.paths): a path the gate could not use is a usage error at once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.gating.paths import check_paths, is_step_summary, write_problem

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def test_writable_paths_pass_and_leave_nothing(tmp_path: Path) -> None:
    assert write_problem(tmp_path / "s.md") == ""
    assert write_problem(tmp_path / "new" / "deeper" / "s.md") == ""  # folders are created when writing
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind, creates no folder
    check_paths(XlaConfig(expected=tmp_path / "e.csv", update_expected=True, summary=tmp_path / "s.md"))
    (tmp_path / "e.csv").write_text("name,backend,mode\n")
    check_paths(XlaConfig(expected=tmp_path / "e.csv", summary=tmp_path / "s.md"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv"]


def test_unwritable_paths_say_why(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    assert write_problem(tmp_path) == "it is a directory"
    assert write_problem(afile / "s.md") == f"{afile} is not a directory"
    assert write_problem(afile / "sub" / "s.md") == f"{afile} is not a directory"


@linux_only
def test_a_folder_nobody_may_write_to() -> None:
    """/proc takes no new files, not even root's (``os.access`` alone would let root through)."""
    assert write_problem(Path("/proc/xla-summary.md")).startswith("the folder /proc is not writable")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write to a read-only folder")
def test_a_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert write_problem(folder / "s.md") == f"the folder {folder} is not writable"
    finally:
        folder.chmod(0o755)


def test_check_paths_names_option_path_and_reason(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    cases = [
        (XlaConfig(summary=tmp_path), f"--xla-summary: cannot write {str(tmp_path)!r}: it is a directory"),
        (XlaConfig(summary=afile / "s.md"), f"--xla-summary: cannot write {str(afile / 's.md')!r}: {afile} is not a "
                                            "directory; valid: a file path in a writable folder"),
        (XlaConfig(expected=tmp_path), f"--xla-expected: {str(tmp_path)!r} is a directory; valid: an expected-results"
                                       " CSV file"),
        (XlaConfig(expected=tmp_path, update_expected=True), f"--xla-expected: {str(tmp_path)!r} is a directory"),
        (XlaConfig(expected=afile / "e.csv", update_expected=True),
         f"--xla-expected: cannot write {str(afile / 'e.csv')!r} under --xla-update-expected: {afile} is not a "
         "directory"),
        (XlaConfig(expected=tmp_path / "none.csv"), f"--xla-expected: no such file {str(tmp_path / 'none.csv')!r} "
                                                    "(use --xla-update-expected to create it)"),
    ]
    baselines = [(tmp_path, f"--xla-timing-baseline: {str(tmp_path)!r} is a directory"),
                 (tmp_path / "t.json", f"--xla-timing-baseline: no such file {str(tmp_path / 't.json')!r}")]
    for xcfg, baseline, message in [(x, None, m) for x, m in cases] + [(XlaConfig(), b, m) for b, m in baselines]:
        with pytest.raises(pytest.UsageError) as info:
            check_paths(xcfg, baseline)
        assert str(info.value).startswith(message), (str(info.value), message)


def test_step_summary_is_appended_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "step.md"
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert not is_step_summary(summary)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert is_step_summary(summary) and not is_step_summary(tmp_path / "other.md")
