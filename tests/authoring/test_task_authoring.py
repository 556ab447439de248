"""`aka task new` writes a task that `aka task check` (the real evaluator, on the CPU) accepts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aka.authoring.task_tools import check_task, scaffold_task
from aka.cli import app
from aka.config.task_config import load_task_config
from aka.device import DeviceInfo
from aka.errors import AkaError

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
pytestmark = pytest.mark.slow


def test_triton_scaffold_passes_every_check(tmp_path: Path) -> None:
    task_dir = scaffold_task(tmp_path, "triton2triton/mine/scale")
    config = load_task_config(task_dir)
    assert config.hidden_files == ["heldout.py"] and config.tunables[0].name == "BLOCK_SIZE"
    checks = check_task(tmp_path, task_dir, CPU)
    assert [c.name for c in checks] == [
        "config",
        "target kernels defined",
        "baseline",
        "noop candidate",
        "held-out cases (noop candidate)",
    ]
    assert all(c.ok for c in checks), checks


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cuda_scaffold_compiles_and_skips_on_the_cpu(tmp_path: Path) -> None:
    task_dir = scaffold_task(tmp_path, "cuda2cuda/mine/scale")
    checks = {c.name: c for c in check_task(tmp_path, task_dir, CPU)}
    assert all(c.ok for c in checks.values()), checks
    assert "GPU" in checks["noop candidate"].detail


def test_check_reports_a_broken_task_and_the_cli_exits_1(tmp_path: Path) -> None:
    task_dir = scaffold_task(tmp_path, "torch2triton/mine/scale")
    kernel = task_dir / "kernel.py"
    kernel.write_text(kernel.read_text().replace("x * 2", "x * 3"))
    checks = {c.name: c for c in check_task(tmp_path, task_dir, CPU)}
    assert checks["target kernels defined"].ok and not checks["noop candidate"].ok
    assert "differ" in checks["noop candidate"].detail
    result = CliRunner().invoke(app, ["task", "check", str(task_dir), "--tasks-root", str(tmp_path)])
    assert result.exit_code == 1


def test_scaffold_refuses_bad_names_and_existing_tasks(tmp_path: Path) -> None:
    with pytest.raises(AkaError, match="FAMILY/SUITE/NAME"):
        scaffold_task(tmp_path, "triton2triton/scale")
    with pytest.raises(AkaError, match="scaffolds exist for"):
        scaffold_task(tmp_path, "hip2hip/mine/scale")
    scaffold_task(tmp_path, "triton2triton/mine/scale")
    with pytest.raises(AkaError, match="already exists"):
        scaffold_task(tmp_path, "triton2triton/mine/scale")
    result = CliRunner().invoke(app, ["task", "new", "bad", "--tasks-root", str(tmp_path)])
    assert result.exit_code == 2


def test_a_skeleton_fails_cleanly_and_its_solution_passes(tmp_path: Path) -> None:
    task_dir = scaffold_task(tmp_path, "instruction2triton/mine/scale")
    solution = tmp_path / "solution"
    solution.mkdir()
    kernel = task_dir / "kernel.py"
    shutil.copyfile(kernel, solution / "kernel.py")
    kernel.write_text('def scale(x):\n    raise NotImplementedError("write the Triton kernel scale_kernel")\n')
    checks = {c.name: c for c in check_task(tmp_path, task_dir, CPU)}
    assert all(c.ok for c in checks.values()), checks
    assert "skeleton fails cleanly" in checks["noop candidate"].detail
    solved = {c.name: c for c in check_task(tmp_path, task_dir, CPU, solution)}
    assert all(c.ok for c in solved.values()) and solved["solution"].detail == "passes", solved
