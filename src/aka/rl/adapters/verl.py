"""verl's `custom_reward_function`: `compute_score` (naive reward manager), `compute_score_async`
(the async reward loop) and `compute_score_batch` (the `batch` reward manager).

The task id travels in `extra_info["task_id"]` (else `ground_truth` is the task id). Each returns
verl's dict: `score` (the preset's value) and numeric metrics verl logs. `reward_kwargs` may set
`preset`. A verdict that is not the candidate's (an infrastructure error) scores the preset's
least value (`aka.rl.presets.floor`) with `applicable` 0, logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from aka.rl.adapters import TASK_ID_KEY, default_evaluator, default_preset, numeric_metrics

logger = logging.getLogger(__name__)


def _task_id(ground_truth: object, extra_info: Mapping[str, object] | None) -> str:
    if extra_info and extra_info.get(TASK_ID_KEY):
        return str(extra_info[TASK_ID_KEY])
    return str(ground_truth)


def _scored(result_metrics: dict[str, float], task_id: str) -> dict[str, float]:
    if not result_metrics["applicable"]:
        logger.warning("no reward for %s: the evaluation failed for a reason not the candidate's", task_id)
    return result_metrics


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: object,
    extra_info: Mapping[str, object] | None = None,
    preset: str | None = None,
    **_kwargs: object,
) -> dict[str, float]:
    task_id = _task_id(ground_truth, extra_info)
    result = default_evaluator().evaluate_completion(task_id, solution_str)
    return _scored(numeric_metrics(result, preset or default_preset()), task_id)


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: object,
    extra_info: Mapping[str, object] | None = None,
    preset: str | None = None,
    **_kwargs: object,
) -> dict[str, float]:
    task_id = _task_id(ground_truth, extra_info)
    result = await default_evaluator().evaluate_completion_async(task_id, solution_str)
    return _scored(numeric_metrics(result, preset or default_preset()), task_id)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[object],
    extra_infos: Sequence[Mapping[str, object] | None] | None = None,
    preset: str | None = None,
    **_kwargs: object,
) -> list[dict[str, float]]:
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)

    async def every() -> list[dict[str, float]]:
        return list(
            await asyncio.gather(
                *(
                    compute_score_async(source, solution, truth, info, preset)
                    for source, solution, truth, info in zip(
                        data_sources, solution_strs, ground_truths, infos, strict=True
                    )
                )
            )
        )

    return asyncio.run(every())
