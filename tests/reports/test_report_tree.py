"""Reports replaced together: a reader never sees two versions mixed, unowned entries survive,
and a write killed half-way is cleaned up by the next one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aka.reports import tree as report_tree
from aka.reports.tree import replace_tree


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_the_new_files_replace_the_old_ones_and_unowned_entries_stay(
    tmp_path: Path, monkeypatch, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setattr(report_tree, "_exchange", lambda first, second: False)
    target = tmp_path / "reports"
    replace_tree(target, {"a.csv": "1", "arms/x/a.csv": "x1", "arms/y/a.csv": "y1"})
    (target / "compare").mkdir()
    (target / "compare" / "comparison.md").write_text("kept")
    replace_tree(target, {"a.csv": "2", "arms/x/a.csv": "x2"})
    assert _tree(target) == {"a.csv": "2", "arms/x/a.csv": "x2", "compare/comparison.md": "kept"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]  # no staging folder left


def test_a_write_killed_after_the_exchange_is_finished_by_the_next(tmp_path: Path) -> None:
    """Killed after the exchange: the old tree (with aka compare's output) sits in the staging name."""
    target = tmp_path / "reports"
    replace_tree(target, {"a.csv": "new"})
    stale = tmp_path / ".reports.new-killed"
    (stale / "compare").mkdir(parents=True)
    (stale / "compare" / "comparison.md").write_text("kept")
    (stale / "a.csv").write_text("old")
    replace_tree(target, {"a.csv": "newer"})
    assert _tree(target) == {"a.csv": "newer", "compare/comparison.md": "kept"}
    assert not stale.exists()


def test_a_write_killed_between_two_renames_gets_its_old_tree_back(tmp_path: Path) -> None:
    target = tmp_path / "reports"
    old = tmp_path / ".reports.old-killed"
    (old / "compare").mkdir(parents=True)
    (old / "compare" / "comparison.md").write_text("kept")
    (old / "a.csv").write_text("old")
    replace_tree(target, {"a.csv": "new"})
    assert _tree(target) == {"a.csv": "new", "compare/comparison.md": "kept"}
    assert sorted(os.listdir(tmp_path)) == ["reports"]
