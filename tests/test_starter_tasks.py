"""End-to-end tests of the starter tasks: their real step commands, run as the evaluator runs them.

Each test copies a task folder (optionally overlaid with a solution from solutions/) into a temp
evaluation directory and runs the config's command through bash with the contract's environment
for a machine without a GPU: AKA_DEVICE=cpu, TRITON_INTERPRET=1, AKA_CASE_PROFILE=ci.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aka.config.task_config import load_task_config
from aka.config.tasks import load_task
from aka.device import DeviceInfo
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.step_process import StepSetup, run_isolated
from aka.evaluation.step_report import StepReport, StepStatus, parse_step_message
from aka.evaluation.step_spec import Step, Target

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
SOLUTIONS = REPO / "solutions"
GELU = "triton2triton/basic/gelu"
SOFTMAX = "torch2triton/basic/softmax"
VECTOR_ADD = "cuda2cuda/basic/vector_add"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
_TASK_OF: dict[Path, str] = {}


def _eval_dir(tmp_path: Path, task: str, solution_set: str | None = None) -> Path:
    """The evaluator's own evaluation directory: the pristine task plus a solution's declared sources."""
    directory = tmp_path / "evaluation"
    candidate = None
    if solution_set is not None:
        candidate = tmp_path / "candidate"
        shutil.copytree(TASKS / task, candidate)
        for rel in load_task_config(TASKS / task).source_file_path:
            shutil.copyfile(SOLUTIONS / solution_set / task / rel, candidate / rel)
    build_eval_dir(load_task(TASKS, TASKS / task), directory, candidate)
    _TASK_OF[directory] = task
    return directory


def _run(eval_dir: Path, step: str, target: str = "candidate") -> StepReport:
    """One step through the evaluator's sandbox and result channel, exactly as a run does it."""
    task = load_task(TASKS, TASKS / _TASK_OF[eval_dir])
    (command,) = getattr(task.config, f"{step}_command")
    setup = StepSetup(task, CPU, eval_dir, eval_dir.parent / "reports", eval_dir.parent / "log")
    ran, received, token = run_isolated(setup, command, Step(step), Target(target))
    assert ran.ok, f"`{command}` failed: {ran.describe()}\n{(eval_dir.parent / 'log').read_text()[-3000:]}"
    return parse_step_message(received, token)


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
    assert {c.timing_method for c in performance.cases} == {"paired_wall_clock"}
    assert all(c.baseline_time_ms and c.speedup and c.samples for c in performance.cases)


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
    assert "building vector_add.cu" in (eval_dir.parent / "log").read_text()  # nvcc ran (into the step's cache)
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
