"""Where an agent CLI's processes live: always in a PID namespace of their own where the machine
allows one, and in the opt-in bubblewrap sandbox (`sandbox: bwrap` in a CLI agent's options).

The PID namespace ends the agent's step for good: a process that left the CLI's process group and
its environment (`env -i setsid ...`) outlived every kill before, and a red team's kept throttling
the evaluation that followed (16x unearned speedup) and held the CLI's output pipe open. When the
CLI (the namespace's first process) ends or is killed, the kernel kills everything in it, and
nothing in it can see or signal the evaluator's processes.

Without bubblewrap an agent CLI runs as the evaluator's user with the whole file system visible;
the evaluation never trusts its workspace, but the agent could read other runs or the task suite.
With it, bubblewrap shows the agent a read-only system with those folders emptied, and only its
own workspace and home writable.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from aka.agents.registry import AgentContext
from aka.evaluation.sandbox import command_succeeds, cuda_works_behind

logger = logging.getLogger(__name__)

_PID_NAMESPACE_FLAGS = ["--pid", "--fork", "--mount-proc", "--kill-child"]

REPO_ROOT = Path(__file__).resolve().parents[3]


class SandboxUnavailableError(Exception):
    """The sandbox was asked for but cannot be set up on this machine."""


@functools.cache
def pid_namespace_prefix() -> tuple[str, ...]:
    """`unshare` in front of an agent CLI: its own PID namespace (and /proc showing only it), as the
    user it is (never mapped to root: CLIs refuse some modes as root). Probed once per process;
    empty (with a warning) where the machine allows none or AKA_NO_SANDBOX=1."""
    unshare = shutil.which("unshare")
    if unshare is None or os.environ.get("AKA_NO_SANDBOX") == "1":
        return ()
    as_self = ["--user", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}"]
    for extra in ([], as_self):
        prefix = [unshare, *extra, *_PID_NAMESPACE_FLAGS]
        if command_succeeds([*prefix, "true"]) and cuda_works_behind(prefix):
            return tuple(prefix)
    logger.warning(
        "agent CLIs run without a PID namespace (unshare cannot make one here): a process that "
        "leaves their process group and environment can outlive the agent's step"
    )
    return ()


def hidden_from_agent(context: AgentContext) -> list[Path]:
    """What a sandboxed agent must not see: every run of this experiment (its own workspace is
    mounted back), every other experiment next to it (any folder holding `run_*` folders: those
    of other agents and configs too, not only those named like its own), the whole task suite
    and the repository's solutions."""
    run_dir = context.log_path.parent.parent
    experiment = run_dir.parent
    suite = context.task.directory
    for _ in context.task.name.split("/"):
        suite = suite.parent
    hidden = [experiment, *_experiments_in(experiment.parent), suite, REPO_ROOT / "solutions"]
    return [p for p in dict.fromkeys(h.resolve() for h in hidden) if p.is_dir()]


def _experiments_in(folder: Path) -> list[Path]:
    """The folders in `folder` that hold runs (a `run_*` folder), its own experiment's siblings."""
    found = []
    for entry in folder.iterdir():
        try:
            if entry.is_dir() and any(run.is_dir() for run in entry.glob("run_*")):
                found.append(entry)
        except OSError:
            continue
    return found


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
