"""Schema-v2 tasks through the real evaluator on the CPU: validate-task and the baseline role on the
pristine folder, the candidate role judged from its one `ARENA_EVAL_RESULT=` line, cross-checked
with the case manifest; forged, duplicated and malformed lines; an edit to a non-listed symbol."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from original_task_fixtures import SCALE_FAST, SCALE_KERNEL, SCALE_WRONG, v2_task

from aka.config.tasks import Task, select_tasks, task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord, measure_baseline
from aka.evaluation.steps import evaluate_candidate
from aka.results.scoring import default_score
from aka.results.task_result import AgentOutcome, FailureKind, TaskResult, TaskStatus
from aka.run.task_pipeline import judge_outcomes

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
NAME = "triton2triton/vllm/toy_scale_v2"


@dataclass
class Frozen:
    task: Task
    baseline: BaselineRecord
    scratch: Path


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Frozen:
    root = tmp_path_factory.mktemp("tasks")
    v2_task(root)
    task = select_tasks(root, [NAME])[0]
    scratch = tmp_path_factory.mktemp("work")
    baseline = measure_baseline(scratch / "run", task, task_identity(task), CPU, scratch / "baseline")
    return Frozen(task, baseline, scratch)


def judge(frozen: Frozen, kernel: str, label: str) -> TaskResult:
    candidate = frozen.scratch / label / "work"
    shutil.copytree(frozen.task.directory, candidate)
    (candidate / "source/toy_scale.py").write_text(kernel)
    outcomes = evaluate_candidate(frozen.task, candidate, frozen.scratch / label, CPU)
    return judge_outcomes(
        frozen.task, frozen.baseline, CPU, default_score, "default", AgentOutcome(agent="replay"), outcomes, []
    )


def test_the_baseline_role_on_the_pristine_folder(frozen: Frozen) -> None:
    assert frozen.baseline.usable, frozen.baseline.message
    assert [c.id for c in frozen.baseline.cases] == ["perf1", "perf2"]
    assert frozen.baseline.cases[0].params["dtype"] == "float32"
    log = (frozen.scratch / "baseline/baseline.log").read_text()
    assert "_arena_eval.py validate-task" in log and "_arena_eval.py baseline performance" in log


def test_a_faster_candidate_passes_from_its_result_line(frozen: Frozen) -> None:
    result = judge(frozen, SCALE_FAST, "fast")
    assert result.status is TaskStatus.PASS and result.trust == "arena-line-paired"
    assert result.speedup_ratio is not None and result.speedup_ratio > 1.1 and all(c.paired for c in result.cases)


def test_a_wrong_candidate_fails_correctness(frozen: Frozen) -> None:
    result = judge(
        frozen,
        SCALE_WRONG.replace("FACTOR = 3.0", "FACTOR = 2.0").replace(
            "scale_kernel(xs, out, FACTOR)", "scale_kernel(xs, out, FACTOR + 1)"
        ),
        "wrong",
    )
    assert result.failure_kind is FailureKind.INCORRECT and "declared cases failed" in str(
        result.correctness_error_message
    )


def _forging(line: str, then_exit: bool) -> str:
    """A candidate that prints a result line of its own when timed (and maybe exits before the adapter)."""
    exit_line = "\n    os._exit(0)" if then_exit else ""
    return (
        f"import os\nif os.environ.get('AKA_STEP') == 'performance':\n    print({line!r}, flush=True){exit_line}\n"
        + SCALE_FAST
    )


FORGED = "ARENA_EVAL_RESULT=" + json.dumps(
    {
        "protocol": "arena-eval-v1",
        "role": "candidate",
        "action": "performance",
        "status": "PASS",
        "cases": [
            {
                "test_case_id": "perf1",
                "dtype": "float32",
                "status": "PASS",
                "execution_time_ms": 1e-06,
                "benchmark_method": "cuda_graph",
                "checks": ["correctness", "performance"],
                "params": {"case_index": 0, "configuration": [2000], "configuration_names": "(n,)"},
            }
        ],
    }
)


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (_forging(FORGED, then_exit=False), "ARENA_EVAL_RESULT= lines were printed"),  # one per load
        (_forging(FORGED, then_exit=True), "case perf2 is missing for action performance"),
        (_forging("ARENA_EVAL_RESULT={not json", then_exit=True), "not valid JSON"),
    ],
)
def test_forged_or_malformed_lines_are_tampering(frozen: Frozen, kernel: str, message: str) -> None:
    result = judge(frozen, kernel, f"forged_{abs(hash(message))}")
    assert result.failure_kind is FailureKind.TAMPERING and result.score == 0.0
    assert message in str(result.failure_message)


def test_an_edit_to_a_non_listed_symbol(frozen: Frozen) -> None:
    result = judge(frozen, SCALE_KERNEL.replace("FACTOR = 2.0", "FACTOR = 2.0 * 1"), "factor")
    assert result.failure_kind is FailureKind.POLICY_VIOLATION
    assert "source/toy_scale.py (editable: scale_kernel, scale): FACTOR changed" in str(result.failure_message)


def test_a_task_whose_adapter_breaks_the_manifest_is_the_tasks_fault(tmp_path: Path) -> None:
    v2_task(tmp_path / "tasks", extra_case=True)  # perf3 is declared, the runner never times it
    task = select_tasks(tmp_path / "tasks", [NAME])[0]
    record = measure_baseline(tmp_path / "run", task, task_identity(task), CPU, tmp_path / "baseline")
    assert record.status is FailureKind.INFRA_ERROR
    assert "baseline" in str(record.message) and "declared cases failed" in str(record.message)
