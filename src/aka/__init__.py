"""AgentKernelArena: run coding agents on GPU-kernel tasks and measure their candidates independently."""

__version__ = "0.1.0"

from aka.agents.registry import AgentContext, AgentSettings, register_agent  # noqa: E402
from aka.result import FailureKind, TaskResult, TaskStatus  # noqa: E402
from aka.scoring import register_scorer  # noqa: E402

__all__ = [
    "AgentContext",
    "AgentSettings",
    "FailureKind",
    "TaskResult",
    "TaskStatus",
    "__version__",
    "register_agent",
    "register_scorer",
]
