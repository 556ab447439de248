"""Opt-in sandbox for agent processes (`sandbox: bwrap` in a CLI agent's options).

Without it an agent CLI runs as the evaluator's user with the whole file system visible; the
evaluation never trusts its workspace, but the agent could read other runs or the task suite.
With it, bubblewrap shows the agent a read-only system with those folders emptied, and only its
own workspace and home writable.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from aka.agents.registry import AgentContext

REPO_ROOT = Path(__file__).resolve().parents[3]


class SandboxUnavailableError(Exception):
    """The sandbox was asked for but cannot be set up on this machine."""


def hidden_from_agent(context: AgentContext) -> list[Path]:
    """What a sandboxed agent must not see: every run of this experiment (its own workspace is
    mounted back), sibling experiments, the whole task suite and the repository's solutions."""
    run_dir = context.log_path.parent.parent
    experiment = run_dir.parent
    prefix = experiment.name.split("_")[0]
    suite = context.task.directory
    for _ in context.task.name.split("/"):
        suite = suite.parent
    hidden = [p for p in experiment.parent.glob(f"{prefix}_*") if p.is_dir()] + [suite, REPO_ROOT / "solutions"]
    return [p for p in dict.fromkeys(h.resolve() for h in hidden) if p.is_dir()]


def bwrap_prefix(workspace: Path, home: Path, hidden: Iterable[Path]) -> tuple[str, ...]:
    """bubblewrap: the file system read-only, the hidden folders replaced by empty ones, only the
    workspace and the agent's home (which holds its TMPDIR) writable, its own PID namespace; the
    network stays (the model API is on it)."""
    binary = shutil.which("bwrap")
    if binary is None:
        raise SandboxUnavailableError(
            "agent option sandbox=bwrap, but bubblewrap is not installed (apt-get install bubblewrap)"
        )
    argv = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in hidden:
        argv += ["--tmpfs", str(path)]
    argv += [
        "--bind",
        str(workspace),
        str(workspace),
        "--bind",
        str(home),
        str(home),
        "--unshare-pid",
        "--die-with-parent",
        "--chdir",
        str(workspace),
    ]
    return tuple(argv)
