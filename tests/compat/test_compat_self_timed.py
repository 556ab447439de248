"""A runner that times its calls itself, through the real evaluator on the CPU: its calls are
paired with the pristine twin where it makes them (aka.compat.self_timed), so its cases are
`paired` (trust `task-process-paired`) instead of timed alone against the frozen baseline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from original_task_fixtures import SCALE_FAST, SCALE_KERNEL, SELF_TIMED_RUNNER, VLLM_RUNNER, vllm_task

from aka.compat.self_timed import merge_sidecar, runner_times_itself
from aka.config.tasks import select_tasks, task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import measure_baseline
from aka.evaluation.steps import evaluate_candidate
from aka.results.scoring import default_score
from aka.results.task_result import AgentOutcome, FailureKind, TaskResult, TaskStatus
from aka.run.task_pipeline import judge_outcomes

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
NAME = "triton2triton/vllm/toy_self_timed"
# twice the baseline's work in every call: a candidate that is slower, by about 2x
SCALE_SLOW = SCALE_KERNEL.replace(
    "    scale_kernel(xs, out, FACTOR)\n", "    scale_kernel(xs, out, FACTOR)\n    scale_kernel(xs, out, FACTOR)\n"
)


def test_a_runner_that_times_itself_is_told_from_one_that_calls_the_helpers() -> None:
    assert runner_times_itself(SELF_TIMED_RUNNER) and not runner_times_itself(VLLM_RUNNER)
    assert not runner_times_itself("import time\nt = time.perf_counter()\n")  # no helper block: not a vllm runner


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TaskResult]:
    root = tmp_path_factory.mktemp("tasks")
    vllm_task(root, NAME, runner=SELF_TIMED_RUNNER)
    (task,) = select_tasks(root, ["all"])
    scratch = tmp_path_factory.mktemp("work")
    baseline = measure_baseline(scratch / "run", task, task_identity(task), CPU, scratch / task.slug)
    assert baseline.usable
    results = {}
    for label, kernel in (("same", SCALE_KERNEL), ("fast", SCALE_FAST), ("slow", SCALE_SLOW)):
        candidate = scratch / label / "work"
        shutil.copytree(task.directory, candidate)
        (candidate / "source/toy_scale.py").write_text(kernel)
        outcomes = evaluate_candidate(task, candidate, scratch / label, CPU)
        results[label] = judge_outcomes(
            task, baseline, CPU, default_score, "default", AgentOutcome(agent="replay"), outcomes, []
        )
    return results


def test_its_calls_are_paired_with_the_pristine_twin(judged: dict[str, TaskResult]) -> None:
    for label, result in judged.items():
        assert result.status is TaskStatus.PASS and result.failure_kind is FailureKind.NONE, result.failure_message
        assert result.trust == "task-process-paired", label
        # every call of the runner's (2 warm-up + 30 timed a case) but each case's first
        assert all(c.paired and c.samples == 31 for c in result.cases), [(c.paired, c.samples) for c in result.cases]
        assert result.speedup_ratio is not None and result.speedup_ci_low and result.speedup_ci_high
        # the pairs' own times, not the runner's number (three calls and two copies each)
        assert all(c.optimized_method == c.base_method == "aka_self_timed_pairs" for c in result.cases)
        assert all(c.optimized_ms and c.base_ms and c.speedup for c in result.cases)


def test_its_pairs_tell_faster_slower_and_unchanged_apart(judged: dict[str, TaskResult]) -> None:
    same, fast, slow = (judged[k].speedup_ratio or 0.0 for k in ("same", "fast", "slow"))
    assert 0.8 < same < 1.25 and fast > 1.1 and slow < 0.75, (same, fast, slow)


def test_a_sidecar_that_does_not_match_the_runners_cases_is_not_used(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [
        {"test_case_id": "perf1"},
        {"test_case_id": "perf2", "aka_pairing": "paired", "aka_speedup": 3.0},
    ]
    assert merge_sidecar(tmp_path, records) is None and "aka_speedup" not in records[0]  # none written: nothing
    (tmp_path / "build").mkdir()
    sidecar = tmp_path / "build" / "aka_self_timed.json"
    sidecar.write_text(json.dumps({"cases": [{"aka_pairing": "paired", "aka_speedup": 2.0}]}))
    assert "1 case(s) for the runner's 2" in str(merge_sidecar(tmp_path, records))
    assert "aka_speedup" not in records[0]
    sidecar.write_text(json.dumps({"cases": [{"aka_speedup": 2.0, "x": 1}, {"aka_speedup": 9.0}]}))
    assert merge_sidecar(tmp_path, records) is None
    assert records[0] == {"test_case_id": "perf1", "aka_speedup": 2.0}
    assert records[1]["aka_speedup"] == 3.0  # a record that carries its own pairing keeps it
    sidecar.write_text("not json")
    assert "is not valid" in str(merge_sidecar(tmp_path, records))


def test_a_call_whose_copies_fail_gives_no_pair_and_runs_as_made() -> None:
    """The twin (or a copy's call) that raises costs the call its pair, never its result."""
    from aka.compat import self_timed

    def twin(xs: list[float]) -> list[float]:
        raise RuntimeError("the pristine copy cannot run this")

    def candidate(xs: list[float]) -> list[float]:
        return [2 * x for x in xs]

    key = "candidate([2:1.0,2.0])"
    before = self_timed._CASES.count(key)
    assert self_timed._paired(candidate, candidate)([1.0, 2.0]) == [2.0, 4.0]
    assert self_timed._CASES.count(key) == before + 1  # a pair from a call whose copies ran
    assert self_timed._paired(candidate, twin)([1.0, 2.0]) == [2.0, 4.0]
    assert self_timed._CASES.count(key) == before + 1  # none from one whose twin failed
