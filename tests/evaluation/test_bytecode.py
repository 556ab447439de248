"""The trusted bytecode warm-up writes the .pyc files step processes (which may not) then read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aka.evaluation.bytecode import warm_bytecode


def test_warm_up_writes_bytecode_even_when_the_environment_forbids_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "warm_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from warm_pkg import part\n")
    (package / "part.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    warm_bytecode(tmp_path, ("warm_pkg", "no_such_module_anywhere"))
    tag = sys.implementation.cache_tag
    assert (package / "__pycache__" / f"__init__.{tag}.pyc").is_file()
    assert (package / "__pycache__" / f"part.{tag}.pyc").is_file()


def test_a_failing_warm_up_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))
    assert warm_bytecode(tmp_path / "elsewhere", ("json",)) >= 0
