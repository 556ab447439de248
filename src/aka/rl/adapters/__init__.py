"""What every trainer adapter shares: the evaluator it scores with, read from the environment
unless the program sets one, and the text of a completion in any of the trainers' shapes.

Environment (read once, on the first reward call): `AKA_RL_TASKS_ROOT` (default: this
repository's `tasks/`), `AKA_RL_CACHE_DIR` (default `~/.cache/aka-rl`), `AKA_RL_PRESET`
(default `score`), `AKA_RL_MAX_CONCURRENT` (default 1), `AKA_RL_SCORER` (default `default`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from aka.config.tasks import default_tasks_root
from aka.rl.presets import Metric, reward
from aka.rl.result import CandidateResult

TASK_ID_KEY = "task_id"


class CompletionScorer(Protocol):
    """The part of `KernelEvaluator` the adapters use (tests pass a fake that has only this)."""

    def evaluate_completion(self, task_id: str, completion: str) -> CandidateResult: ...

    async def evaluate_completion_async(self, task_id: str, completion: str) -> CandidateResult: ...

    def prompt(self, task_id: str, with_baseline: bool = True) -> str: ...


_default: CompletionScorer | None = None
_default_lock = threading.Lock()


def set_default_evaluator(evaluator: CompletionScorer | None) -> None:
    """Score with `evaluator` (None: build one from the environment on the next call)."""
    global _default
    with _default_lock:
        _default = evaluator


def default_evaluator() -> CompletionScorer:
    """The process's evaluator: the one set, else a `KernelEvaluator` from the environment."""
    global _default
    with _default_lock:
        if _default is None:
            from aka.rl.evaluator import KernelEvaluator

            _default = KernelEvaluator(
                tasks_root=os.environ.get("AKA_RL_TASKS_ROOT") or default_tasks_root(),
                cache_dir=os.environ.get("AKA_RL_CACHE_DIR") or Path.home() / ".cache" / "aka-rl",
                scorer=os.environ.get("AKA_RL_SCORER", "default"),
                max_concurrent=int(os.environ.get("AKA_RL_MAX_CONCURRENT", "1")),
            )
        return _default


def default_preset() -> str:
    return os.environ.get("AKA_RL_PRESET", "score")


def completion_text(completion: object) -> str:
    """A completion as text: a string as it is; a conversation (a list of `{"role", "content"}`
    messages, as TRL and verifiers pass chat completions) as its assistant messages joined."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        parts = [
            completion_text(m)
            for m in completion
            if not isinstance(m, Mapping) or m.get("role", "assistant") == "assistant"
        ]
        return "\n\n".join(p for p in parts if p)
    return "" if completion is None else str(completion)


def numeric_metrics(result: CandidateResult, preset: str) -> dict[str, float]:
    """The preset's value as `score` and the raw metrics as numbers, for trainers that average
    every logged key: booleans as 0/1, an untimed speedup as 0."""
    chosen = reward(result, preset)
    metrics: dict[str, Metric] = chosen.metrics
    return {
        "score": chosen.value,
        "applicable": float(chosen.applicable),
        "compiled": float(result.compiled),
        "correct": float(result.correct),
        "speedup": float(result.speedup or 0.0),
        "aka_score": float(metrics["score"] or 0.0),
        "cached": float(result.cached),
    }
