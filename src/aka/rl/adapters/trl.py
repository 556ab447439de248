"""TRL `GRPOTrainer(reward_funcs=...)`: a sync and an async reward function.

TRL calls a reward function with `prompts`, `completions`, `completion_ids` and every dataset
column as keyword lists; the task id comes from the `task_id` column. Each returns one float per
completion, or None where the verdict is not the candidate's (TRL leaves those out of the mean).
`make_reward_func` binds an evaluator, a preset and the column; `kernel_reward` and
`kernel_reward_async` use the process's default evaluator (aka.rl.adapters).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aka.rl.adapters import TASK_ID_KEY, CompletionScorer, completion_text, default_evaluator, default_preset
from aka.rl.presets import reward
from aka.rl.result import CandidateResult

RewardFunc = Callable[..., list[float | None]]
AsyncRewardFunc = Callable[..., Awaitable[list[float | None]]]


def _value(result: CandidateResult, preset: str) -> float | None:
    chosen = reward(result, preset)
    return chosen.value if chosen.applicable else None


def _task_ids(kwargs: dict[str, Any], column: str, count: int) -> list[str]:
    ids = kwargs.get(column)
    if ids is None or len(ids) != count:
        raise ValueError(f"aka reward: the dataset needs a '{column}' column with one task id per completion")
    return [str(i) for i in ids]


def make_reward_func(
    evaluator: CompletionScorer | None = None,
    preset: str | None = None,
    column: str = TASK_ID_KEY,
    name: str = "aka_kernel_reward",
) -> RewardFunc:
    def reward_func(
        prompts: Sequence[object],
        completions: Sequence[object],
        completion_ids: Sequence[object] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        scorer = evaluator or default_evaluator()
        ids = _task_ids(kwargs, column, len(completions))
        return [
            _value(scorer.evaluate_completion(task, completion_text(c)), preset or default_preset())
            for task, c in zip(ids, completions, strict=True)
        ]

    reward_func.__name__ = reward_func.__qualname__ = name
    return reward_func


def make_async_reward_func(
    evaluator: CompletionScorer | None = None,
    preset: str | None = None,
    column: str = TASK_ID_KEY,
    name: str = "aka_kernel_reward",
) -> AsyncRewardFunc:
    async def reward_func(
        prompts: Sequence[object],
        completions: Sequence[object],
        completion_ids: Sequence[object] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        scorer = evaluator or default_evaluator()
        ids = _task_ids(kwargs, column, len(completions))
        results = await asyncio.gather(
            *(
                scorer.evaluate_completion_async(task, completion_text(c))
                for task, c in zip(ids, completions, strict=True)
            )
        )
        return [_value(result, preset or default_preset()) for result in results]

    reward_func.__name__ = reward_func.__qualname__ = name
    return reward_func


kernel_reward = make_reward_func(name="kernel_reward")
kernel_reward_async = make_async_reward_func(name="kernel_reward_async")
