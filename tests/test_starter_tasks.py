"""End-to-end tests of the starter tasks: their real step commands, run as the evaluator runs them.

Each test copies a task folder (optionally overlaid with a solution from solutions/) into a temp
evaluation directory and runs the config's command through bash with the contract's environment
for a machine without a GPU: AKA_DEVICE=cpu, TRITON_INTERPRET=1, AKA_CASE_PROFILE=ci.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aka.step_report import StepReport, StepStatus, read_step_report
from aka.task_config import load_task_config

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
SOLUTIONS = REPO / "solutions"
GELU = "triton2triton/basic/gelu"
SOFTMAX = "torch2triton/basic/softmax"
VECTOR_ADD = "cuda2cuda/basic/vector_add"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def _eval_dir(tmp_path: Path, task: str, solution_set: str | None = None) -> Path:
    """The pristine task, plus the declared sources of a solution when one is named."""
    directory = tmp_path / "evaluation"
    shutil.copytree(TASKS / task, directory)
    if solution_set is not None:
        for rel in load_task_config(TASKS / task).source_file_path:
            shutil.copyfile(SOLUTIONS / solution_set / task / rel, directory / rel)
    return directory


def _run(eval_dir: Path, step: str, target: str = "candidate") -> StepReport:
    config = load_task_config(eval_dir)
    (command,) = getattr(config, f"{step}_command")
    result_file = eval_dir.parent / f"{target}_{step}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKA_")}
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p),
        "PYTHONDONTWRITEBYTECODE": "1", "TRITON_INTERPRET": "1", "AKA_STEP": step, "AKA_DEVICE": "cpu",
        "AKA_TARGET": target, "AKA_CASE_PROFILE": "ci", "AKA_RESULT_FILE": str(result_file),
    })
    done = subprocess.run(["/bin/bash", "-c", command], cwd=eval_dir, env=env, capture_output=True, text=True,
                          timeout=getattr(config, f"{step}_timeout"), check=False)
    assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stderr[-3000:]}"
    return read_step_report(result_file)


def _assert_all_correct(report: StepReport) -> None:
    assert report.status is StepStatus.OK, report.message
    assert report.cases and all(case.correct is True for case in report.cases)


@pytest.mark.parametrize("task", [GELU, SOFTMAX, VECTOR_ADD])
def test_configs_load_and_name_their_kernels(task: str) -> None:
    config = load_task_config(TASKS / task)
    sources = "".join((TASKS / task / rel).read_text() for rel in config.source_file_path)
    assert all(name in sources for name in config.target_kernel_functions)
    assert config.prompt.instructions and config.prompt.cheatsheet


@pytest.mark.parametrize("task", [GELU, SOFTMAX])
def test_triton_task_passes_every_step_on_the_cpu(tmp_path: Path, task: str) -> None:
    eval_dir = _eval_dir(tmp_path, task)
    assert _run(eval_dir, "compile").status is StepStatus.OK
    _assert_all_correct(_run(eval_dir, "correctness"))
    performance = _run(eval_dir, "performance")
    assert performance.status is StepStatus.OK
    assert performance.cases
    assert all(c.time_ms and c.time_ms > 0 for c in performance.cases)
    assert {c.timing_method for c in performance.cases} == {"wall_clock_median"}


def test_softmax_reference_can_be_timed_as_the_baseline(tmp_path: Path) -> None:
    report = _run(_eval_dir(tmp_path, SOFTMAX), "performance", target="reference")
    assert report.status is StepStatus.OK
    assert report.cases and all(c.time_ms and c.time_ms > 0 for c in report.cases)


@pytest.mark.parametrize("task", [GELU, SOFTMAX])
def test_example_solutions_are_correct(tmp_path: Path, task: str) -> None:
    _assert_all_correct(_run(_eval_dir(tmp_path, task, "examples"), "correctness"))


def test_wrong_gelu_fails_correctness(tmp_path: Path) -> None:
    eval_dir = _eval_dir(tmp_path, GELU, "wrong")
    assert _run(eval_dir, "compile").status is StepStatus.OK
    report = _run(eval_dir, "correctness")
    assert report.status is StepStatus.FAILED
    assert report.cases and not any(c.correct for c in report.cases)
    assert report.message and "differ beyond" in report.message


def test_broken_gelu_fails_compile(tmp_path: Path) -> None:
    report = _run(_eval_dir(tmp_path, GELU, "broken"), "compile")
    assert report.status is StepStatus.FAILED
    assert report.message and "SyntaxError" in report.message and "kernel.py" in report.message


@needs_nvcc
@pytest.mark.parametrize("solution_set", [None, "examples"])
def test_vector_add_compiles_with_nvcc_and_skips_on_the_cpu(tmp_path: Path, solution_set: str | None) -> None:
    eval_dir = _eval_dir(tmp_path, VECTOR_ADD, solution_set)
    compiled = _run(eval_dir, "compile")
    assert compiled.status is StepStatus.OK, compiled.message
    assert list((eval_dir / "build").glob("vector_add-*.so"))
    if solution_set is None:
        report = _run(eval_dir, "correctness")
        assert report.status is StepStatus.SKIPPED
        assert report.message and "GPU" in report.message


@needs_nvcc
def test_vector_add_with_a_cuda_syntax_error_fails_compile(tmp_path: Path) -> None:
    eval_dir = _eval_dir(tmp_path, VECTOR_ADD)
    source = eval_dir / "vector_add.cu"
    source.write_text(source.read_text().replace("out[i] = a[i] + b[i];", "out[i] = a[i] + b[i]"))
    report = _run(eval_dir, "compile")
    assert report.status is StepStatus.FAILED
    assert report.message and "error" in report.message and "\n" not in report.message
