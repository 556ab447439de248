"""Results and reports are created as `open()` and `mkdir` create files (the umask decides), so a
team's group can read a run when its umask lets it; a private umask keeps them private."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from aka.reports.writers import RunHeader, write_reports
from aka.results.task_result import TaskResult, write_task_result, write_text_atomic

HEADER = RunHeader("run_20260101_000000", "noop", "cpu", "cpu", "2026-01-01T00:00:00", "default")


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize(
    ("mask", "file_mode", "dir_mode"), [(0o027, 0o640, 0o750), (0o077, 0o600, 0o700), (0o002, 0o664, 0o775)]
)
def test_results_and_reports_follow_the_umask(
    umask: None, tmp_path: Path, mask: int, file_mode: int, dir_mode: int
) -> None:
    os.umask(mask)
    result = write_task_result(tmp_path / "ws", TaskResult(task_name="t", task_type="triton2triton"))
    write_text_atomic(tmp_path / "run_manifest.json", "{}")
    write_reports(tmp_path / "reports", [TaskResult(task_name="t", task_type="triton2triton")], HEADER)
    write_reports(tmp_path / "reports", [], HEADER)  # replaced: the new folder's mode too
    assert _mode(result) == file_mode
    assert _mode(tmp_path / "run_manifest.json") == file_mode
    assert _mode(tmp_path / "reports") == dir_mode
    assert {_mode(p) for p in (tmp_path / "reports").iterdir()} == {file_mode}
    assert not [p.name for p in tmp_path.rglob(".*")], "no temporary file left behind"
