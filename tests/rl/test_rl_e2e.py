"""The RL API end to end on a real task: the GELU starter task's example solution, extracted from
a model-style completion, judged on the CPU through Triton's interpreter in the evaluator's thread
pool (one real evaluation, plus the baseline; every later call in this module is a cache hit),
then through two adapters."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import aka
from aka.device import DeviceInfo
from aka.results.task_result import FailureKind, TaskStatus
from aka.rl.adapters import set_default_evaluator, trl, verl

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
GELU = "triton2triton/basic/gelu"
CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("rl") / "tasks"
    shutil.copytree(REPO / "tasks" / GELU, root / GELU)
    solution = (REPO / "solutions/examples" / GELU / "kernel.py").read_text()
    completion = (
        f"<think>use a better block size</think>\nHere is the faster kernel:\n```python kernel.py\n{solution}```\n"
    )
    evaluator = aka.KernelEvaluator(root, root.parent / "cache", device=CPU)
    result = asyncio.run(evaluator.evaluate_completion_async(GELU, completion))  # in the evaluator's thread
    yield evaluator, completion, result
    evaluator.close()


def test_a_real_candidate_is_judged_and_rewarded(judged) -> None:
    evaluator, _, result = judged
    assert (result.status, result.failure_kind) == (TaskStatus.PASS, FailureKind.NONE), result.failure_message
    assert result.compiled and result.correct and not result.cached
    assert result.speedup is not None and result.speedup > 0
    assert result.task_result.cases and all(case.speedup for case in result.task_result.cases)
    assert result.score == pytest.approx(120.0 + 100.0 * result.speedup, abs=1e-4)
    assert result.evaluation_seconds and result.base_ms and result.optimized_ms
    kevin = aka.reward(result, "kevin")
    assert kevin.value == pytest.approx(0.3 + result.speedup) and kevin.metrics["speedup"] == result.speedup
    assert "## Answer format" in evaluator.prompt(GELU) and "gelu_kernel" in evaluator.prompt(GELU)


def test_the_adapters_give_the_apis_reward_from_the_cache(judged) -> None:
    evaluator, completion, result = judged
    assert trl.make_reward_func(evaluator)(["p"], [completion], None, task_id=[GELU]) == [result.score]
    scoring = trl.make_async_reward_func(evaluator, preset="kernelgym")(["p"], [completion], None, task_id=[GELU])
    scored: list[float | None] = asyncio.run(scoring)  # type: ignore[arg-type]
    assert scored == [pytest.approx(0.5 + 0.5 * min(result.speedup or 0.0, 3.0))]
    set_default_evaluator(evaluator)
    try:
        assert verl.compute_score("aka", completion, GELU)["score"] == result.score
        assert verl.compute_score("aka", completion, GELU)["cached"] == 1.0
    finally:
        set_default_evaluator(None)
