"""Every task in tasks/ meets the suite's rules and passes its CPU profile through the real evaluator.

Static rules (issue #4): at least 4 cases and 4 held-out cases (hidden, never in the workspace),
a small `ci` profile, instructions and a cheatsheet, tunables where the family has knobs. Then
`aka task check` on this machine: baseline, the untouched sources (an instruction2triton skeleton
must fail cleanly), held-out cases; and every solution in solutions/examples compiles and is
correct on the CPU profile. On a machine without a GPU the CUDA tasks compile with nvcc and
report that their other steps need a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from aka.authoring.task_tools import SKELETON_FAMILIES, check_task
from aka.config.tasks import Task, select_tasks
from aka.device import DeviceInfo
from aka.evaluation.steps import evaluate_candidate
from aka.harness import Case

REPO = Path(__file__).resolve().parents[1]
TASKS_ROOT = REPO / "tasks"
SOLUTIONS = REPO / "solutions" / "examples"
CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
ALL_TASKS = select_tasks(TASKS_ROOT, ["all"])
MINIMUM_PER_FAMILY = {
    "triton2triton": 14,
    "instruction2triton": 6,
    "torch2triton": 8,
    "torch2cuda": 4,
    "cuda2cuda": 4,
    "repository": 1,
    "e2e": 2,
}
# Compute-bound tasks declare a flops floor, with the operand width that sets its peak.
FLOPS_BOUND = {
    "cuda2cuda/llm/sgemm": 16,
    "triton2triton/llm/batched_gemm": 16,
    "triton2triton/llm/gemm_bias_gelu": 16,
    "torch2triton/llm/linear_bias_relu": 16,
    "instruction2triton/llm/fp8_scaled_gemm": 8,
    "instruction2triton/llm/flash_attention_causal": 16,
}


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    before = Path.cwd()
    os.chdir(path.parent)
    try:
        spec.loader.exec_module(module)
    finally:
        os.chdir(before)
    return module


def test_the_suite_has_every_family_it_promises() -> None:
    counts = Counter(t.family for t in ALL_TASKS)
    assert len(ALL_TASKS) >= 40, counts
    short = {
        family: (counts[family], needed) for family, needed in MINIMUM_PER_FAMILY.items() if counts[family] < needed
    }
    assert not short, f"family: (have, need) {short}"


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.name)
def test_task_declares_what_the_suite_requires(task: Task) -> None:
    config = task.config
    assert config.prompt.instructions.strip() and config.prompt.cheatsheet.strip()
    harness = _load(task.directory / "harness.py", f"suite_{task.slug}")
    kernel_task = harness.TASK
    assert kernel_task.name == task.name
    assert len(kernel_task.cases) >= 4 and kernel_task.ci_cases, "need >= 4 cases and a ci profile"
    assert len({c.id for c in kernel_task.cases}) == len(kernel_task.cases), "case ids must be unique"
    for bound in (kernel_task.min_bytes, kernel_task.min_flops):  # speed-of-light floors
        for case in kernel_task.cases if bound is not None else ():
            work = bound(case)
            assert isinstance(work, int) and work > 0, (case.id, work)
    if task.name in FLOPS_BOUND:
        assert kernel_task.min_flops is not None and kernel_task.flops_operand_bits == FLOPS_BOUND[task.name]
    assert config.tunables, "declare tunables (block sizes, warps, threads) for the autotune agent"
    assert "heldout.py" in config.hidden_files
    heldout = _load(task.directory / "heldout.py", f"heldout_{task.slug}")
    assert len(heldout.CASES) >= 4 and all(isinstance(c, Case) for c in heldout.CASES)
    assert heldout.CI_CASES
    shown = {c.id for c in kernel_task.cases}
    assert not shown & {c.id for c in heldout.CASES}, "held-out cases must differ from the visible ones"


def _solution(task: Task) -> Path | None:
    return SOLUTIONS / task.name if (SOLUTIONS / task.name).is_dir() else None


# One task per family also times its held-out cases; the rest check them for correctness only
# (the same performance step on other shapes, three processes more per task).
HELDOUT_TIMED = {next(t.name for t in ALL_TASKS if t.family == family) for family in MINIMUM_PER_FAMILY}


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda t: t.name)
def test_task_passes_its_cpu_profile(task: Task) -> None:
    """A task with a solution is checked with it (its untouched sources are the baseline, which the
    check measures anyway); a skeleton task's untouched sources must fail cleanly, then its
    solution must be correct."""
    skeleton = task.family in SKELETON_FAMILIES
    solution = None if skeleton else _solution(task)
    checks = check_task(
        TASKS_ROOT, task.directory, CPU, solution, heldout_through=3 if task.name in HELDOUT_TIMED else 2
    )
    failed = [f"{c.name}: {c.detail}" for c in checks if not c.ok]
    assert not failed, failed
    if solution is not None:
        assert any(c.name == "solution" for c in checks), checks
    if skeleton:  # no kernel given: the skeleton fails, a solution exists and is correct
        assert any("skeleton fails cleanly" in c.detail for c in checks), checks
        assert _solution(task) is not None, f"an {task.family} task needs a solution in solutions/examples"
        with tempfile.TemporaryDirectory() as tmp:
            outcomes = evaluate_candidate(task, SOLUTIONS / task.name, Path(tmp), CPU, through=2)
        wrong = [o for o in outcomes if not (o.passed or o.skipped)]
        assert not wrong, f"{wrong[0].step.value}: {wrong[0].failure.value}: {wrong[0].message}"
