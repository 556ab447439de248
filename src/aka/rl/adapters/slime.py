"""slime's `--custom-rm-path`: `aka.rl.adapters.slime.reward` (one sample) and `group_reward`
(`--group-rm`: a list of samples), both `async (args, sample)`.

The task id is `sample.label` (or `sample.metadata["task_id"]`); the completion is
`sample.response`. `reward` returns the preset's value (a float); `reward_with_metrics` returns
a dict with `reward` and the raw metrics, for `--reward-key reward`. A verdict that is not the
candidate's scores the preset's least value (`aka.rl.presets.floor`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aka.rl.adapters import TASK_ID_KEY, completion_text, default_evaluator, default_preset, numeric_metrics


def _task_id(sample: object) -> str:
    metadata = getattr(sample, "metadata", None) or {}
    task = metadata.get(TASK_ID_KEY) if isinstance(metadata, dict) else None
    label = getattr(sample, "label", None)
    if not (task or label):
        raise ValueError("aka reward: the sample needs its task id as `label` or `metadata['task_id']`")
    return str(task or label)


async def reward_with_metrics(args: object, sample: object) -> dict[str, float]:
    result = await default_evaluator().evaluate_completion_async(
        _task_id(sample), completion_text(getattr(sample, "response", ""))
    )
    row = numeric_metrics(result, default_preset())
    return {"reward": row.pop("score"), **row}


async def reward(args: object, sample: object) -> float:
    return (await reward_with_metrics(args, sample))["reward"]


async def group_reward(args: object, samples: Sequence[object]) -> list[float]:
    return list(await asyncio.gather(*(reward(args, sample) for sample in samples)))
