"""AgentKernelArena: run coding agents on GPU-kernel tasks and measure their candidates independently.

The public names are imported lazily: candidate processes import `aka.harness`, which must not
pull in the platform's own dependencies (pydantic, yaml) through this package.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "AgentContext": "aka.agents.registry",
    "AgentSettings": "aka.agents.registry",
    "register_agent": "aka.agents.registry",
    "FailureKind": "aka.results.task_result",
    "TaskResult": "aka.results.task_result",
    "TaskStatus": "aka.results.task_result",
    "register_scorer": "aka.results.scoring",
    "Candidate": "aka.rl.result",
    "CandidateResult": "aka.rl.result",
    "CandidateError": "aka.rl.extract",
    "CompletionError": "aka.rl.extract",
    "extract_files": "aka.rl.extract",
    "KernelEvaluator": "aka.rl.evaluator",
    "Reward": "aka.rl.presets",
    "reward": "aka.rl.presets",
    "CompareOptions": "aka.compare.comparison",
    "Comparison": "aka.compare.comparison",
    "compare_arms": "aka.compare.comparison",
    "load_arms": "aka.compare.runs",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'aka' has no attribute {name!r}")
