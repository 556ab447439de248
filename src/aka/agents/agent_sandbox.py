"""Where an agent CLI's processes live.

By default (`sandbox: none`) an agent CLI sees the machine as its user does, with two walls:
- everything the verdict depends on is read-only to it (`protect_prefix`, bubblewrap with the
  host's file system and /dev, so GPUs work): the platform's code and the Python it runs on
  (`sys.prefix`, the standard library, every folder on `sys.path`), the repository, the task
  suite, the runs (its own workspace and home excepted) and /sys (cgroups), with no capability
  left to undo it. Before this an agent could edit the judge or the pristine task it is judged
  from, rewrite its frozen baseline or other tasks' results, or throttle the judge's cgroup;
- a PID namespace of its own: a process that left the CLI's process group and its environment
  (`env -i setsid ...`) outlived every kill before, and a red team's throttled the evaluation
  that followed (16x unearned speedup). When the CLI (the namespace's first process) ends or is
  killed, the kernel kills everything in it, and nothing in it can see or signal the judge.
Without bubblewrap only the PID namespace stays (`pid_namespace_prefix`), with a warning.

`sandbox: bwrap` is stricter: a read-only system with a fresh /dev, and other runs, sibling
experiments, the task suite and the solutions hidden, only its workspace and home writable.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
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


_PROTECT_BASE = ["--dev-bind", "/", "/", "--ro-bind", "/sys", "/sys"]
_PROTECT_TAIL = ["--proc", "/proc", "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]


@functools.cache
def _protecting_bwrap() -> str | None:
    """bubblewrap, where it runs here with the host's file system and CUDA works behind it."""
    binary = shutil.which("bwrap")
    if binary is None or os.environ.get("AKA_NO_SANDBOX") == "1":
        return None
    prefix = [binary, *_PROTECT_BASE, *_PROTECT_TAIL]
    if command_succeeds([*prefix, "true"]) and cuda_works_behind(prefix):
        return binary
    return None


def judge_paths(context: AgentContext) -> list[Path]:
    """What an agent may read but never write: the platform's code and the Python it runs on, the
    repository (tasks, solutions, tools), the task suite, and every experiment next to its own."""
    import aka

    experiment = context.log_path.parent.parent.parent
    suite = context.task.directory
    for _ in context.task.name.split("/"):
        suite = suite.parent
    python = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    on_path = {Path(entry) for entry in sys.path if entry and Path(entry).is_dir()}
    paths = [
        REPO_ROOT,
        Path(aka.__file__).resolve().parent,
        *python,
        *on_path,
        suite,
        experiment,
        *_experiments_in(experiment.parent),
    ]
    unique = sorted({path.resolve() for path in paths if path.is_dir()} - {Path("/")})
    return [p for p in unique if not any(p != q and p.is_relative_to(q) for q in unique)]


def protect_prefix(workspace: Path, home: Path, context: AgentContext) -> tuple[str, ...]:
    """The default wrapper of an agent CLI: `judge_paths` read-only, its workspace and home
    writable, no capabilities, a PID namespace (see the module docstring). Only the PID namespace
    (`pid_namespace_prefix`) where bubblewrap is missing or does not work here."""
    binary = _protecting_bwrap()
    if binary is None:
        _warn_unprotected()
        return pid_namespace_prefix()
    argv = [binary, *_PROTECT_BASE]
    for path in judge_paths(context):
        argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind", str(workspace), str(workspace), "--bind", str(home), str(home), *_PROTECT_TAIL]
    return (*argv, "--chdir", str(workspace))


@functools.cache
def _warn_unprotected() -> None:
    logger.warning(
        "agent CLIs can write the platform's code, the task suite and the runs: bubblewrap is "
        "missing or does not work here (apt-get install bubblewrap)"
    )


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
