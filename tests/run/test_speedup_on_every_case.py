"""The verdict on step outcomes (`task_pipeline.judge_outcomes`): a speedup is earned only by a
performance step that passed and timed every case the baseline has."""

from __future__ import annotations

import pytest

from aka.config.task_config import BaselineSource
from aka.config.tasks import load_task
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord
from aka.evaluation.step_report import CaseReport
from aka.evaluation.step_spec import Step
from aka.evaluation.steps import StepOutcome
from aka.results.scoring import default_score
from aka.results.task_result import AgentOutcome, FailureKind, TaskStatus
from aka.run.task_pipeline import judge_outcomes

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
CASES = ("small", "large")


def _timed(case: str, speedup: float) -> CaseReport:
    return CaseReport(id=case, correct=True, time_ms=4.0 / speedup, baseline_time_ms=4.0, speedup=speedup)


@pytest.mark.parametrize(
    ("performance", "kind", "speedup"),
    [
        (StepOutcome(Step.PERFORMANCE, cases=[_timed("small", 3.0), _timed("large", 1.0)]), FailureKind.NONE, 2.0),
        # the slow case left out: the step passed, but with fewer cases than the baseline's
        (StepOutcome(Step.PERFORMANCE, cases=[_timed("small", 3.0)]), FailureKind.PERFORMANCE_ERROR, None),
        # it crashed where it was slow: the fast case's speedup used to be scored
        (
            StepOutcome(Step.PERFORMANCE, FailureKind.CRASH, "died", cases=[_timed("small", 3.0)]),
            FailureKind.CRASH,
            None,
        ),
        (
            StepOutcome(Step.PERFORMANCE, FailureKind.TIMEOUT, "hung", cases=[_timed("small", 3.0)]),
            FailureKind.TIMEOUT,
            None,
        ),
    ],
    ids=["every_case", "a_case_left_out", "crashed_in_a_case", "hung_in_a_case"],
)
def test_a_speedup_is_earned_only_with_every_case_timed(
    make_toy_task, performance: StepOutcome, kind: FailureKind, speedup: float | None
) -> None:
    directory = make_toy_task()
    task = load_task(directory.parents[2], directory)
    baseline = BaselineRecord(
        task_name=task.name,
        task_identity="x",
        device="cpu",
        source=BaselineSource.SOURCE,
        cases=[CaseReport(id=case, correct=True, time_ms=4.0) for case in CASES],
    )
    correctness = StepOutcome(Step.CORRECTNESS, cases=[CaseReport(id=case, correct=True) for case in CASES])
    outcomes = [StepOutcome(Step.COMPILE), correctness, performance]
    result = judge_outcomes(task, baseline, CPU, default_score, "default", AgentOutcome(agent="x"), outcomes, [])
    assert (result.failure_kind, result.speedup_ratio) == (kind, speedup), result.failure_message
    assert result.status is TaskStatus.PASS and result.pass_correctness
    if speedup is None:
        untimed = judge_outcomes(
            task, baseline, CPU, default_score, "default", AgentOutcome(agent="x"), [outcomes[0], correctness], []
        )
        assert result.score == untimed.score, "no more than a candidate that was never timed"
