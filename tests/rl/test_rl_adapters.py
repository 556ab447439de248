"""Each trainer adapter against its documented signature (shared/RL_INTERFACES.md), with a fake
evaluator: what is tested here is the calling convention, not the evaluation. The trainer
packages are not installed here (they pull CUDA builds of torch); verifiers is faked in
`sys.modules` with the two classes the adapter uses."""

from __future__ import annotations

import asyncio
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.rl import adapters
from aka.rl.adapters import openrlhf, slime, trl, verl
from aka.rl.adapters import verifiers as vf_adapter
from aka.rl.result import CandidateResult

FAST = "```python kernel.py\nFAST\n```"
WRONG = "```python kernel.py\nWRONG\n```"
INFRA = "```python kernel.py\nINFRA\n```"


class FakeEvaluator:
    """Verdicts by what the completion says: FAST (2x), WRONG (incorrect), INFRA (not the candidate's)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def _verdict(self, task_id: str, completion: str) -> CandidateResult:
        self.calls.append((task_id, completion))
        if "FAST" in completion:
            result = TaskResult(
                task_name=task_id,
                task_type="triton2triton",
                pass_compilation=True,
                pass_correctness=True,
                speedup_ratio=2.0,
                score=320.0,
                status=TaskStatus.PASS,
            )
        elif "INFRA" in completion:
            result = TaskResult(
                task_name=task_id,
                task_type="triton2triton",
                failure_kind=FailureKind.INFRA_ERROR,
                status=TaskStatus.INFRA,
            )
        else:
            result = TaskResult(
                task_name=task_id,
                task_type="triton2triton",
                pass_compilation=True,
                score=20.0,
                failure_kind=FailureKind.INCORRECT,
                status=TaskStatus.PARTIAL,
            )
        return CandidateResult.from_task_result(task_id, "sha", "key", result)

    def evaluate_completion(self, task_id: str, completion: str) -> CandidateResult:
        return self._verdict(task_id, completion)

    async def evaluate_completion_async(self, task_id: str, completion: str) -> CandidateResult:
        await asyncio.sleep(0)
        return self._verdict(task_id, completion)

    def prompt(self, task_id: str, with_baseline: bool = True) -> str:
        return f"prompt of {task_id} (baseline: {with_baseline})"


@pytest.fixture
def fake():
    made = FakeEvaluator()
    adapters.set_default_evaluator(made)
    yield made
    adapters.set_default_evaluator(None)


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_verl_compute_score_forms(fake: FakeEvaluator) -> None:
    documented = ["data_source", "solution_str", "ground_truth", "extra_info"]
    assert _parameters(verl.compute_score)[:4] == documented == _parameters(verl.compute_score_async)[:4]
    assert _parameters(verl.compute_score_batch)[:4] == [
        "data_sources",
        "solution_strs",
        "ground_truths",
        "extra_infos",
    ]
    assert inspect.iscoroutinefunction(verl.compute_score_async)

    scored = verl.compute_score(
        data_source="aka", solution_str=FAST, ground_truth="t/a", extra_info={"task_id": "t/b", "index": 3}
    )
    assert scored["score"] == 320.0 and scored["speedup"] == 2.0 and scored["correct"] == 1.0
    assert all(isinstance(v, float) for v in scored.values()) and fake.calls[-1] == ("t/b", FAST)
    kevin = verl.compute_score("aka", FAST, "t/a", None, preset="kevin")  # reward_kwargs pass the preset
    assert kevin["score"] == pytest.approx(2.3) and fake.calls[-1][0] == "t/a"
    assert asyncio.run(verl.compute_score_async("aka", WRONG, "t/a"))["score"] == 20.0
    infra = verl.compute_score("aka", INFRA, "t/a")
    assert infra["score"] == 0.0 and infra["applicable"] == 0.0

    batch = verl.compute_score_batch(
        ["aka"] * 3, [FAST, WRONG, INFRA], ["t/a", "t/b", "t/c"], [None, {"task_id": "t/x"}, None], preset="kernelgym"
    )
    assert [row["score"] for row in batch] == [1.5, 0.0, 0.0]
    assert sorted(task for task, _ in fake.calls[-3:]) == ["t/a", "t/c", "t/x"]


def test_trl_reward_funcs(fake: FakeEvaluator) -> None:
    sync = trl.make_reward_func(fake, preset="log_speedup")
    chat = [
        [{"role": "assistant", "content": FAST}],
        [{"role": "assistant", "content": WRONG}],
        [{"role": "assistant", "content": INFRA}],
    ]
    values = sync(
        prompts=["p"] * 3, completions=chat, completion_ids=[[1], [2], [3]], task_id=["a", "b", "c"], trainer_state=None
    )
    assert values[0] == pytest.approx(0.693147, abs=1e-6) and values[1] == -2.0 and values[2] is None
    assert fake.calls[0] == ("a", FAST) and sync.__name__ == "aka_kernel_reward"

    async_func = trl.make_async_reward_func(fake, name="kernel_speed")
    assert inspect.iscoroutinefunction(async_func) and async_func.__name__ == "kernel_speed"
    assert asyncio.run(
        async_func(prompts=["p", "p"], completions=[FAST, WRONG], completion_ids=None, task_id=["a", "b"])
    ) == [320.0, 20.0]
    assert trl.kernel_reward(["p"], [FAST], None, task_id=["a"]) == [320.0]  # the default evaluator
    assert inspect.iscoroutinefunction(trl.kernel_reward_async)
    with pytest.raises(ValueError, match="needs a 'task_id' column"):
        sync(prompts=["p"], completions=[FAST], completion_ids=None)


def test_openrlhf_reward_func_file(fake: FakeEvaluator) -> None:
    assert _parameters(openrlhf.reward_func)[:3] == ["queries", "prompts", "labels"]
    prompts = ["<|user|>make it fast<|assistant|>", "<|user|>again<|assistant|>"]
    out = openrlhf.reward_func([prompts[0] + FAST, prompts[1] + WRONG], prompts, ["t/a", "t/b"])
    assert out["rewards"].tolist() == [320.0, 20.0] and out["scores"].tolist() == [320.0, 20.0]
    assert out["extra_logs"]["speedup"].tolist() == [2.0, 0.0] and out["extra_logs"]["correct"].tolist() == [1.0, 0.0]
    assert fake.calls == [("t/a", FAST), ("t/b", WRONG)]  # the response without its prompt


def _load_by_path(path: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("custom_module", Path(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_files_load_by_path_as_the_trainers_load_them(fake: FakeEvaluator) -> None:
    rm_file = _load_by_path(openrlhf.__file__)  # OpenRLHF: --remote_rm_url FILE.py
    assert rm_file.reward_func(["q" + FAST], ["q"], ["t/a"])["rewards"].tolist() == [320.0]
    verl_file = _load_by_path(verl.__file__)  # verl: custom_reward_function.path
    assert verl_file.compute_score("aka", FAST, "t/a")["score"] == 320.0


def test_slime_async_rewards(fake: FakeEvaluator) -> None:
    assert _parameters(slime.reward) == ["args", "sample"] and inspect.iscoroutinefunction(slime.reward)
    sample = types.SimpleNamespace(prompt="p", response=FAST, label="t/a", metadata={})
    assert asyncio.run(slime.reward(None, sample)) == 320.0
    tagged = types.SimpleNamespace(prompt="p", response=WRONG, label=None, metadata={"task_id": "t/m"})
    assert asyncio.run(slime.group_reward(None, [sample, tagged])) == [320.0, 20.0]
    assert fake.calls[-1] == ("t/m", WRONG)
    detailed = asyncio.run(slime.reward_with_metrics(None, sample))
    assert detailed["reward"] == 320.0 and detailed["speedup"] == 2.0
    with pytest.raises(ValueError, match="task id"):
        asyncio.run(slime.reward(None, types.SimpleNamespace(response=FAST, label=None, metadata=None)))


def _fake_verifiers(monkeypatch) -> None:
    vf = types.ModuleType("verifiers")

    class Rubric:
        def __init__(self, funcs: list[Any], weights: list[float]) -> None:
            self.funcs, self.weights = funcs, weights

    class SingleTurnEnv:
        def __init__(self, dataset: Any, system_prompt: str | None = None, rubric: Any = None, **kwargs: Any) -> None:
            self.dataset, self.system_prompt, self.rubric, self.kwargs = dataset, system_prompt, rubric, kwargs

    vf.Rubric, vf.SingleTurnEnv, vf.Environment = Rubric, SingleTurnEnv, SingleTurnEnv  # type: ignore[attr-defined]
    datasets = types.ModuleType("datasets")

    class Dataset(list[dict[str, Any]]):
        @classmethod
        def from_list(cls, rows: list[dict[str, Any]]) -> Dataset:
            return cls(rows)

    datasets.Dataset = Dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "verifiers", vf)
    monkeypatch.setitem(sys.modules, "datasets", datasets)


def test_verifiers_environment_with_a_rubric(fake: FakeEvaluator, monkeypatch) -> None:
    _fake_verifiers(monkeypatch)
    env = vf_adapter.load_environment(
        task_ids=["t/a", "t/b"], preset="kernelgym", evaluator=fake, system_prompt="Be fast.", max_concurrent=4
    )
    assert env.dataset[0] == {
        "question": "prompt of t/a (baseline: False)",
        "answer": "t/a",
        "info": {"task_id": "t/a"},
        "task": "aka-kernel",
    }
    assert env.system_prompt == "Be fast." and env.kwargs == {"max_concurrent": 4}
    assert env.rubric.weights == [1.0, 0.0, 0.0, 0.0]
    names = [f.__name__ for f in env.rubric.funcs]
    assert names == ["kernel_reward", "compiled", "correct", "speedup"]

    state: dict[str, object] = {}
    completion = [{"role": "assistant", "content": FAST}]
    values = [
        asyncio.run(
            func(
                prompt=[{"role": "user", "content": "x"}],
                completion=completion,
                answer="t/a",
                state=state,
                task="aka-kernel",
                info={"task_id": "t/a"},
                parser=None,
            )
        )
        for func in env.rubric.funcs
    ]
    assert values == [1.5, 1.0, 1.0, 2.0] and len(fake.calls) == 1  # one evaluation per rollout


def test_completion_text_shapes() -> None:
    assert adapters.completion_text("x") == "x"
    assert (
        adapters.completion_text(
            [
                {"role": "assistant", "content": "a"},
                {"role": "tool", "content": "t"},
                {"role": "assistant", "content": "b"},
            ]
        )
        == "a\n\nb"
    )
    assert adapters.completion_text(None) == ""


def test_the_default_evaluator_comes_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    from aka.rl.evaluator import KernelEvaluator

    (tmp_path / "tasks").mkdir()
    monkeypatch.setenv("AKA_RL_TASKS_ROOT", str(tmp_path / "tasks"))
    monkeypatch.setenv("AKA_RL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AKA_RL_MAX_CONCURRENT", "2")
    monkeypatch.setenv("AKA_RL_PRESET", "kevin")
    adapters.set_default_evaluator(None)
    try:
        made = adapters.default_evaluator()
        assert isinstance(made, KernelEvaluator) and made is adapters.default_evaluator()
        assert (made.tasks_root, made.cache_dir, made.max_concurrent) == (tmp_path / "tasks", tmp_path / "cache", 2)
        assert adapters.default_preset() == "kevin"
        made.close()
    finally:
        adapters.set_default_evaluator(None)
