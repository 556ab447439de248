"""The prompt's judging section, generated from each task's own harness: what it checks, the real
tolerances, how it times; no task restates the timing method by hand, and the tolerances a task's
instructions explain are the harness's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from aka.config.tasks import Task, select_tasks
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord
from aka.harness.compare import tolerance_for
from aka.harness.describe import _number, load_kernel_task, output_dtypes
from aka.results.task_result import FailureKind
from aka.run.prompt import build_prompt
from aka.run.repository import materialize

TASKS = Path(__file__).resolve().parents[2] / "tasks"
H200 = DeviceInfo("cuda", "H200", "NVIDIA H200", "sm_90", 1)
CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
SUITE = select_tasks(TASKS, ["all"])
REPOS = Path(tempfile.mkdtemp(prefix="aka-prompt-repos-"))


def _prompt(task: Task, device: DeviceInfo) -> str:
    task = materialize(task, REPOS)
    baseline = BaselineRecord(
        task_name=task.name,
        task_identity="",
        device=device.name,
        source=task.config.baseline_source,
        status=FailureKind.SKIPPED,
        message="not measured",
    )
    return build_prompt(task, task.directory, baseline, device)


@pytest.mark.parametrize("task", SUITE, ids=[t.name for t in SUITE])
def test_every_prompt_says_how_it_is_judged_from_the_harness(task: Task) -> None:
    kernel_task = load_kernel_task(task.directory)
    assert kernel_task is not None, f"{task.name}: harness.py declares no KernelTask"
    gpu = _prompt(task, H200)
    section = gpu.split("## How your kernel is judged", 1)[1]
    dtypes = [d for d in output_dtypes(kernel_task) if d.is_floating_point]
    for dtype in dtypes:
        tolerance = tolerance_for(dtype, kernel_task.tolerances)
        assert f"atol {_number(tolerance.atol)} / rtol {_number(tolerance.rtol)}" in section
    assert "CUDA events" in section and "exits 1 when the step fails" in section
    assert "smoke test only" in _prompt(task, CPU).split("## How your kernel is judged", 1)[1]
    instructions = task.config.prompt.instructions
    assert "Timing:" not in instructions, "the timing method is the generated section's, not restated per task"
    assert "median of many" not in instructions
    assert "AKA_RESULT_FILE" not in instructions  # nothing reads it
    if "olerance" in instructions:  # the author's explanation must quote the harness's numbers
        for dtype in dtypes:
            tolerance = tolerance_for(dtype, kernel_task.tolerances)
            for value in (tolerance.atol, tolerance.rtol):
                assert _number(value) in instructions.replace("-0", "-"), (
                    f"{task.name}: its instructions do not state {dtype}'s tolerance {_number(value)}"
                )


def test_a_task_without_a_kernel_task_gets_no_judging_section(tmp_path: Path, tasks_root: Path, make_toy_task) -> None:
    make_toy_task("triton2triton/toy/answer")
    task = select_tasks(tasks_root, ["all"])[0]
    assert "How your kernel is judged" not in _prompt(task, H200)
