"""OpenRLHF's reward-function file: `--remote_rm_url` (`--reward.remote_url`) set to this file's
path makes OpenRLHF call `reward_func(queries, prompts, labels)`.

`queries` are prompt + response; the response is what follows the prompt. `labels` (from
`--label_key`) are the task ids. Returns OpenRLHF's dict: `rewards` (the preset's value, the
training signal), `scores` (the same, for dynamic filtering) and `extra_logs` (compiled,
correct, speedup). A verdict that is not the candidate's scores the preset's least value
(`aka.rl.presets.floor`: 0, or -2 under `log_speedup`), `applicable` 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aka.rl.adapters import completion_text, default_evaluator, default_preset, numeric_metrics


def _response(query: str, prompt: str) -> str:
    return query[len(prompt) :] if prompt and query.startswith(prompt) else query


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **_kwargs: Any
) -> dict[str, Any]:
    import torch

    scorer = default_evaluator()
    rows = [
        numeric_metrics(scorer.evaluate_completion(str(label), _response(completion_text(q), p)), default_preset())
        for q, p, label in zip(queries, prompts, labels, strict=True)
    ]
    rewards = torch.tensor([row["score"] for row in rows], dtype=torch.float32)
    logs = {
        key: torch.tensor([row[key] for row in rows], dtype=torch.float32)
        for key in ("compiled", "correct", "speedup", "applicable")
    }
    return {"rewards": rewards, "scores": rewards.clone(), "extra_logs": logs}
