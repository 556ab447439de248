"""A verifiers (Prime Intellect) environment: `load_environment(**kw) -> vf.Environment`.

A `SingleTurnEnv` over the chosen tasks: each row's question is the task's prompt (with the
answer format of aka.rl.extract), `answer` and `info["task_id"]` the task id. The `Rubric` has
`kernel_reward` (weight 1: the preset's value) and the raw metrics `compiled`, `correct` and
`speedup` at weight 0 (logged, not trained on). The rollout's verdict is kept in its `state`, so
the metrics reuse the one evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aka.rl.adapters import TASK_ID_KEY, CompletionScorer, completion_text, default_evaluator, default_preset
from aka.rl.presets import reward
from aka.rl.result import CandidateResult

STATE_KEY = "aka_result"


def _task_id(answer: object, info: Mapping[str, object] | None) -> str:
    return str(info[TASK_ID_KEY]) if info and info.get(TASK_ID_KEY) else str(answer)


def _results(scorer: CompletionScorer) -> Any:
    async def verdict(
        completion: object,
        answer: object = None,
        info: Mapping[str, object] | None = None,
        state: dict[str, object] | None = None,
    ) -> CandidateResult:
        kept = state.get(STATE_KEY) if state is not None else None
        if isinstance(kept, CandidateResult):
            return kept
        result = await scorer.evaluate_completion_async(_task_id(answer, info), completion_text(completion))
        if state is not None:
            state[STATE_KEY] = result
        return result

    return verdict


def rubric_funcs(scorer: CompletionScorer, preset: str) -> list[Any]:
    """The reward function and the three metric functions, in the Rubric's order."""
    verdict = _results(scorer)

    async def kernel_reward(
        completion: object,
        answer: object = None,
        info: Mapping[str, object] | None = None,
        state: dict[str, object] | None = None,
        **_kw: object,
    ) -> float:
        return reward(await verdict(completion, answer, info, state), preset).value

    async def compiled(
        completion: object,
        answer: object = None,
        info: Mapping[str, object] | None = None,
        state: dict[str, object] | None = None,
        **_kw: object,
    ) -> float:
        return float((await verdict(completion, answer, info, state)).compiled)

    async def correct(
        completion: object,
        answer: object = None,
        info: Mapping[str, object] | None = None,
        state: dict[str, object] | None = None,
        **_kw: object,
    ) -> float:
        return float((await verdict(completion, answer, info, state)).correct)

    async def speedup(
        completion: object,
        answer: object = None,
        info: Mapping[str, object] | None = None,
        state: dict[str, object] | None = None,
        **_kw: object,
    ) -> float:
        return float((await verdict(completion, answer, info, state)).speedup or 0.0)

    return [kernel_reward, compiled, correct, speedup]


def load_environment(
    task_ids: Sequence[str] | None = None,
    preset: str | None = None,
    with_baseline: bool = False,
    evaluator: CompletionScorer | None = None,
    system_prompt: str | None = None,
    **env_args: Any,
) -> Any:
    """The environment; `task_ids` default to every task of the evaluator's tasks root.
    `with_baseline=True` puts the baseline's timings in the prompts (measuring them first)."""
    import verifiers as vf
    from datasets import Dataset

    if not hasattr(vf, "Rubric"):
        raise ImportError(
            "aka's verifiers environment needs the Rubric/SingleTurnEnv API, which verifiers 0.4 "
            "dropped for verifiers.v1: pip install 'verifiers<0.4'"
        )
    scorer = evaluator or default_evaluator()
    if task_ids is None:
        from aka.config.tasks import select_tasks
        from aka.rl.evaluator import KernelEvaluator

        if not isinstance(scorer, KernelEvaluator):
            raise ValueError("load_environment: pass task_ids with a custom evaluator")
        task_ids = [task.name for task in select_tasks(scorer.tasks_root, ["all"], "load_environment")]
    rows = [
        {
            "question": scorer.prompt(task, with_baseline),
            "answer": task,
            "info": {TASK_ID_KEY: task},
            "task": "aka-kernel",
        }
        for task in task_ids
    ]
    rubric = vf.Rubric(funcs=rubric_funcs(scorer, preset or default_preset()), weights=[1.0, 0.0, 0.0, 0.0])
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt=system_prompt, rubric=rubric, **env_args)
