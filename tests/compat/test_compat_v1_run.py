"""Schema-v1 tasks through the real evaluator on the CPU: the baseline frozen from the pristine
folder, candidates judged from their result files, timed interleaved with the pristine twin, and
the bad inputs: wrong output, a `-1.0` case, a stale result file, an agent's leftovers, an edit
outside the editable symbols."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from original_task_fixtures import (
    ADD_TEST_FILE,
    SCALE_FAILS_WHEN_TIMED,
    SCALE_FAST,
    SCALE_WRONG,
    rocmbench_task,
    vllm_task,
)

from aka.config.tasks import Task, select_tasks, task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord, measure_baseline
from aka.evaluation.steps import evaluate_candidate
from aka.results.scoring import default_score
from aka.results.task_result import AgentOutcome, FailureKind, TaskResult, TaskStatus
from aka.run.task_pipeline import judge_outcomes

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
VLLM, ROCMBENCH = "triton2triton/vllm/toy_scale", "triton2triton/rocmbench/easy/test_toy_add"


@dataclass
class Frozen:
    tasks: dict[str, Task]
    baselines: dict[str, BaselineRecord]
    scratch: Path


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Frozen:
    root = tmp_path_factory.mktemp("tasks")
    vllm_task(root)
    rocmbench_task(root)
    tasks = {t.name: t for t in select_tasks(root, ["all"])}
    scratch = tmp_path_factory.mktemp("work")
    baselines = {
        name: measure_baseline(scratch / "run", task, task_identity(task), CPU, scratch / task.slug)
        for name, task in tasks.items()
    }
    return Frozen(tasks, baselines, scratch)


def judge(frozen: Frozen, name: str, files: dict[str, str], label: str) -> TaskResult:
    """A candidate as a run judges it: the task's copy with `files` written over it."""
    task = frozen.tasks[name]
    candidate = frozen.scratch / label / "work"
    shutil.copytree(task.directory, candidate)
    for rel, text in files.items():
        (candidate / rel).parent.mkdir(parents=True, exist_ok=True)
        (candidate / rel).write_text(text)
    outcomes = evaluate_candidate(task, candidate, frozen.scratch / label, CPU)
    return judge_outcomes(
        task, frozen.baselines[name], CPU, default_score, "default", AgentOutcome(agent="replay"), outcomes, []
    )


def test_baselines_come_from_the_pristine_folders_result_files(frozen: Frozen) -> None:
    vllm = frozen.baselines[VLLM]
    assert vllm.usable and [c.id for c in vllm.cases] == ["perf1", "perf2"]
    assert all(c.time_ms and c.time_ms > 1e-3 and c.timing_method == "cpu_timer_fallback" for c in vllm.cases)
    assert vllm.cases[0].params == {"n": 2000}  # not the committed leftover performance_report.json (1e-6 ms)
    assert [c.id for c in frozen.baselines[ROCMBENCH].cases] == [
        "add_kernel_perf[SIZE=2000, dtype_str=float32]",
        "add_kernel_perf[SIZE=4000, dtype_str=float16]",
    ]


def test_a_faster_candidate_is_timed_interleaved_with_the_pristine_twin(frozen: Frozen) -> None:
    result = judge(frozen, VLLM, {"source/toy_scale.py": SCALE_FAST}, "fast")
    assert result.status is TaskStatus.PASS and result.failure_kind is FailureKind.NONE
    assert result.trust == "task-process-paired" and all(c.paired and c.samples == 30 for c in result.cases)
    assert result.speedup_ratio is not None and result.speedup_ratio > 1.1 and result.speedup_ci_low


def test_wrong_output_fails_correctness(frozen: Frozen) -> None:
    result = judge(frozen, VLLM, {"source/toy_scale.py": SCALE_WRONG}, "wrong")
    assert result.status is TaskStatus.PARTIAL and result.failure_kind is FailureKind.INCORRECT
    assert "Correctness: FAIL" in str(result.correctness_error_message) and result.score == 20.0


def test_a_failed_case_gets_no_speedup(frozen: Frozen) -> None:
    result = judge(frozen, VLLM, {"source/toy_scale.py": SCALE_FAILS_WHEN_TIMED}, "minus_one")
    assert result.pass_correctness and result.failure_kind is FailureKind.PERFORMANCE_ERROR
    assert "1/2 case(s) failed in the performance step" in str(result.failure_message)
    assert "perf2" in str(result.failure_message) and result.speedup_ratio is None and result.score == 120.0


def test_stale_result_files_are_never_read(frozen: Frozen) -> None:
    """The candidate breaks its own module when timed; the runner then writes `[]`, and the task's
    committed performance_report.json (1e-6 ms) would be next in the original's search order."""
    breaks = SCALE_FAST.replace(
        "FACTOR = 2.0",
        'import os\nif os.environ.get("AKA_STEP") == "performance":\n    raise ImportError("gone")\nFACTOR = 2.0',
    )
    result = judge(frozen, VLLM, {"source/toy_scale.py": breaks}, "stale")
    assert result.failure_kind is FailureKind.PERFORMANCE_ERROR and result.speedup_ratio is None
    assert "wrote no result file with cases" in str(result.failure_message)


def test_an_agents_leftover_result_files_are_ignored(frozen: Frozen) -> None:
    forged = json.dumps([{"test_case_id": f"perf{i}", "execution_time_ms": 1e-06} for i in (1, 2)])
    result = judge(frozen, VLLM, {"build/performance_report.json": forged, "perf_report.json": forged}, "leftovers")
    assert result.status is TaskStatus.PASS and result.trust == "task-process-paired"
    assert all(c.optimized_ms and c.optimized_ms > 1e-3 for c in result.cases)


def test_an_edit_outside_the_editable_symbols_is_a_policy_violation(frozen: Frozen) -> None:
    cheat = ADD_TEST_FILE.replace("assert out == [a + b", "assert True or out == [a + b")
    result = judge(frozen, ROCMBENCH, {"test_toy_add.py": cheat}, "cheat")
    assert result.failure_kind is FailureKind.POLICY_VIOLATION and result.score == 0.0
    assert "test_toy_add.py (editable: add_kernel, sub_kernel): test_add changed" in str(result.failure_message)
    faster = ADD_TEST_FILE.replace(
        "    for i in range(len(x)):\n        out[i] = sum((x[i], y[i]))", "    out[:] = [a + b for a, b in zip(x, y)]"
    )
    assert faster != ADD_TEST_FILE
    result = judge(frozen, ROCMBENCH, {"test_toy_add.py": faster}, "faster_add")
    assert result.status is TaskStatus.PASS and result.trust == "task-process-paired"
    assert result.speedup_ratio is not None and result.speedup_ratio > 1.5


def test_builds_are_kept_across_an_evaluations_commands_and_a_candidate_gets_a_copy(tmp_path: Path) -> None:
    """Triton's cache (kernels and autotuning) is kept across the commands of an evaluation: the
    pristine task's in the builds frozen with its baseline, a candidate's in a copy of those, so
    nothing a candidate leaves there reaches the frozen builds. Markers stand in for the builds:
    the correctness command passes only where the compile command's marker is in its cache, and
    the candidate computes right only where a build of the pristine task's is in its cache."""
    from aka.evaluation.baseline import baseline_builds

    mark = "python3 -c \"import os, pathlib; pathlib.Path(os.environ['TRITON_CACHE_DIR'], 'compiled').touch()\""
    root = tmp_path / "tasks"
    vllm_task(
        root,
        compile_command=[f"{mark} && python3 scripts/task_runner.py compile"],
        correctness_command=['test -f "$TRITON_CACHE_DIR/compiled" && python3 scripts/task_runner.py correctness'],
    )
    task = select_tasks(root, [VLLM])[0]
    run = tmp_path / "run"
    baseline = measure_baseline(run, task, task_identity(task), CPU, tmp_path / "baseline")
    assert baseline.usable, baseline.message
    builds = baseline_builds(run, task)
    assert (builds / "compiled").is_file()
    (builds / "pristine-kernel").touch()  # as if the pristine task had compiled it
    visits = (
        "import os, pathlib\n"
        "_cache = pathlib.Path(os.environ['TRITON_CACHE_DIR'])\n"
        "(_cache / 'candidate-was-here').touch()\n"
    )
    knows = SCALE_FAST.replace("FACTOR = 2.0", "FACTOR = 2.0 if (_cache / 'pristine-kernel').is_file() else 3.0")
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "source/toy_scale.py").write_text(visits + knows)
    outcomes = evaluate_candidate(task, candidate, tmp_path / "judged", CPU, through=2, trusted_cache=builds)
    assert [o.failure for o in outcomes] == [FailureKind.NONE, FailureKind.NONE], [o.message for o in outcomes]
    assert not (builds / "candidate-was-here").exists()
    unseeded = evaluate_candidate(task, candidate, tmp_path / "unseeded", CPU, through=2)
    # its own compile's marker was kept (the test -f passed), but no pristine build was there
    assert unseeded[-1].failure is FailureKind.INCORRECT and "Correctness: FAIL" in (unseeded[-1].message or "")
