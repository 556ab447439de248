"""The adapters inside the trainers' own code, where the packages are installed (they are not in
CI: `pip install trl 'verifiers<0.4'` to run these). TRL: `GRPOTrainer._calculate_rewards` on a
minimal trainer object (no model is needed to compute rewards); verifiers: the legacy
`SingleTurnEnv` and `Rubric.score_rollout`. The evaluator is the adapters' tests' fake."""

from __future__ import annotations

import asyncio
import math
import threading
import types

import pytest
from test_rl_adapters import FAST, INFRA, WRONG, FakeEvaluator

from aka.rl.adapters import trl as trl_adapter
from aka.rl.adapters import verifiers as vf_adapter


def test_trl_grpo_calls_both_reward_forms() -> None:
    trl = pytest.importorskip("trl")
    torch = pytest.importorskip("torch")
    from accelerate import PartialState

    PartialState()
    fake = FakeEvaluator()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    funcs = [trl_adapter.make_reward_func(fake), trl_adapter.make_async_reward_func(fake, preset="kevin")]
    trainer = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        reward_funcs=funcs,
        reward_processing_classes=[None, None],
        reward_func_names=[f.__name__ for f in funcs],
        state=types.SimpleNamespace(global_step=0),
        args=types.SimpleNamespace(report_to=[]),
        _log_completion_extra=lambda *a, **k: None,
        _log_metric=lambda *a, **k: None,
        environments=None,
        async_loop=loop,
    )
    inputs = [{"prompt": "p", "task_id": task} for task in ("t/a", "t/b", "t/c")]
    try:
        rewards = trl.GRPOTrainer._calculate_rewards(trainer, inputs, ["p"] * 3, [FAST, WRONG, INFRA], [[1], [2], [3]])
    finally:
        loop.call_soon_threadsafe(loop.stop)
    assert rewards[:2].tolist() == [[320.0, pytest.approx(2.3)], [20.0, 0.0]]
    assert all(math.isnan(value) for value in rewards[2].tolist())  # None: not the candidate's verdict
    assert [task for task, _ in fake.calls] == ["t/a", "t/b", "t/c"] * 2


def test_verifiers_rubric_scores_a_rollout() -> None:
    vf = pytest.importorskip("verifiers")
    pytest.importorskip("datasets")
    if not hasattr(vf, "Rubric"):
        with pytest.raises(ImportError, match="verifiers<0.4"):
            vf_adapter.load_environment(task_ids=["t/a"], evaluator=FakeEvaluator())
        return
    fake = FakeEvaluator()
    env = vf_adapter.load_environment(
        task_ids=["t/a", "t/b"], preset="kernelgym", evaluator=fake, system_prompt="Be fast."
    )
    row = env.dataset[0]
    assert row["prompt"] == [
        {"role": "system", "content": "Be fast."},
        {"role": "user", "content": "prompt of t/a (baseline: False)"},
    ]
    state = {
        "prompt": row["prompt"],
        "completion": [{"role": "assistant", "content": FAST}],
        "answer": row["answer"],
        "info": row["info"],
        "task": row["task"],
    }
    asyncio.run(env.rubric.score_rollout(state))
    assert state["reward"] == 1.5 and len(fake.calls) == 1
    assert {k: state["metrics"][k] for k in ("kernel_reward", "compiled", "correct", "speedup")} == {
        "kernel_reward": 1.5,
        "compiled": 1.0,
        "correct": 1.0,
        "speedup": 2.0,
    }
