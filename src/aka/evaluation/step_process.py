"""One step command as a process: started sandboxed (possibly early), waiting for its token, then
given its turn with a killing timeout. `StepSetup` is what every step command of one evaluation
shares; `Prestarted` starts a sequence of steps together so their start-up overlaps."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation.channel import ResultPipe
from aka.evaluation.device_lock import Turn, device_turn
from aka.evaluation.disk_quota import STEP_OUTPUT_LIMIT_BYTES, DiskQuota
from aka.evaluation.phased_turn import phased_turns
from aka.evaluation.pids_limit import PIDS_FEATURE, new_group, remove_group
from aka.evaluation.sandbox import ResourceLimits, detect_sandbox, heldout_files, step_limits
from aka.evaluation.step_spec import Step, Target, step_commands, step_environment, step_timeout
from aka.evaluation.warm_parent import ForkedProcess, WarmParent, script_argv, step_sandbox
from aka.evaluation.wire import ENV_RESULT_FD, ENV_SHARED_CACHE, ENV_TURN_FD
from aka.process import CommandOutcome, StartedCommand
from aka.trees import remove_tree


@dataclass(frozen=True)
class BuildCaches:
    """Compiled-kernel caches of one evaluation (see `aka.harness.sides`).

    `shared`: the candidate's builds, kept across its steps (compiled once per evaluation).
    `trusted`: the frozen baseline's builds, made from pristine code only; copied into each
    performance command's fresh cache, where the baseline is built before any candidate code
    runs, so the baseline is not recompiled for every evaluation.
    `kept`: the original's formats (their commands build with Triton directly): every command's
    fresh cache starts as a copy of it and is copied back into it after the command.
    """

    shared: Path | None = None
    trusted: Path | None = None
    kept: Path | None = None

    def env(self) -> dict[str, str]:
        return {ENV_SHARED_CACHE: str(self.shared)} if self.shared else {}

    def seed_for(self, step: Step) -> Path | None:
        if self.kept is not None:
            return self.kept
        return self.trusted if step is Step.PERFORMANCE else None


@dataclass
class RunningTime:
    """An evaluation's cap on its own running time (a reward request's `eval_timeout`), started
    when it is made. Seconds spent waiting for the device's lock do not count (`waited`): under
    load an honest candidate would otherwise spend its time in other evaluations' turns and be
    judged `timeout` (on the H200, three of 17 honest candidates were, beside one that hung).
    `not_after` (`time.monotonic()`): a hard end that waits do not move (the request's own)."""

    seconds: float = float("inf")
    not_after: float | None = None
    ends: float = field(init=False)
    waited_s: float = field(default=0.0, init=False)  # the waits left out, in all

    def __post_init__(self) -> None:
        self.ends = time.monotonic() + self.seconds

    def left(self) -> float:
        hard = float("inf") if self.not_after is None else self.not_after - time.monotonic()
        return min(self.ends - time.monotonic(), hard)

    def waited(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.ends += seconds
        self.waited_s += seconds


@dataclass(frozen=True)
class StepSetup:
    """What every step command of one evaluation shares. `rebuild` recreates the evaluation
    directory before each command (once for a compile and a correctness step run side by side),
    so nothing a candidate wrote in one step survives into a later one."""

    task: Task
    device: DeviceInfo
    eval_dir: Path
    reports_dir: Path
    log_path: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    rebuild: Callable[[], object] | None = None
    caches: BuildCaches = BuildCaches()
    measuring_baseline: bool = False  # the pristine task measured as the run's baseline (not a candidate)
    time_limit: RunningTime | None = None  # no step runs past it (a reward request's); shared by the steps

    def time_left(self) -> float:
        return float("inf") if self.time_limit is None else self.time_limit.left()

    def waited_for_device(self, seconds: float) -> None:
        if self.time_limit is not None:
            self.time_limit.waited(seconds)

    def hard_end(self) -> float | None:
        """The request's own end (`RunningTime.not_after`), which no wait moves."""
        return None if self.time_limit is None else self.time_limit.not_after

    def environment(self, step: Step, target: Target) -> dict[str, str]:
        return step_environment(
            self.task, self.device, step, target, self.eval_dir, {**self.extra_env, **self.caches.env()}
        )


@dataclass
class StepProcess:
    """One step command, started (possibly early) in the sandbox and waiting for its token."""

    command: str
    step: Step
    started: StartedCommand
    pipe: ResultPipe
    token: str
    cache: Path
    timeout: float
    seed_cache: Path | None = None
    keep_cache: Path | None = None  # where its cache is copied back after its turn (`BuildCaches.kept`)
    scratch: Path | None = None
    writable: tuple[Path, ...] = ()  # what it may write: held to the step's disk quota while it runs
    turn_socket: socket.socket | None = None  # a timed step's phases (aka.evaluation.phased_turn)
    pids_group: Path | None = None  # its ceiling on processes (aka.evaluation.pids_limit)

    def abandon(self) -> None:
        """Kill it if it still runs (it will never get its turn, or its turn was cut) and remove its
        private folders."""
        if self.started.proc.poll() is None:
            self.started.abandon()
        if self.turn_socket is not None:  # its turn never came: no phased turn closes it
            self.turn_socket.close()
        self.remove_private_dirs()

    def remove_private_dirs(self) -> None:
        """Its Triton cache and temporary directory (after its turn, or when it never gets one), and
        its pids group."""
        for path in (self.cache, self.scratch):
            if path is not None:
                remove_tree(path)
        if self.pids_group is not None:
            remove_group(self.pids_group)


def _private_folders(cache: Path, scratch: Path) -> dict[str, str]:
    """A step's own build cache (Triton's, torch extensions') and temporary folder."""
    return {
        "TRITON_CACHE_DIR": str(cache),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "TMPDIR": str(scratch),
        "TEMP": str(scratch),
        "TMP": str(scratch),
    }


def start_isolated(
    setup: StepSetup, command: str, step: Step, target: Target, log_path: Path | None = None
) -> StepProcess:
    """Start one step command sandboxed, with a private result pipe; it waits for its token.

    Its Triton cache (also `TORCH_EXTENSIONS_DIR`, and where CUDA builds go) is a fresh,
    unguessable path, so no other step can plant compiled kernels there (e.g. a slow binary under
    the baseline's cache key): with the read-only file system it is made now and only this
    command may write it; without, it is made only when the command gets its turn. The frozen
    baseline's own builds (`caches.seed_for(step)`) are copied into it at that moment. Its
    `TMPDIR` is a private folder next to the evaluation directory, removed after the step. With
    the read-only file system (`Sandbox.wrap`) the command may write only there, in the
    evaluation directory and in the evaluation's shared build cache.
    """
    sandbox = detect_sandbox()
    eval_dir, caches = setup.eval_dir, setup.caches
    cache = eval_dir.parent / f"triton-{secrets.token_hex(12)}"
    scratch = Path(tempfile.mkdtemp(prefix=f"tmp-{step.value}-", dir=eval_dir.parent))
    pipe = ResultPipe()
    timeout = step_timeout(setup.task, step)
    private = {**_private_folders(cache, scratch), ENV_RESULT_FD: str(pipe.write_fd)}
    judge = is_harness_script(command, eval_dir)  # starts its workers in namespaces of their own
    phased = judge and step is Step.PERFORMANCE and phased_turns(setup.device.is_gpu)
    ours, theirs = socket.socketpair() if phased else (None, None)
    if theirs is not None:
        private[ENV_TURN_FD] = str(theirs.fileno())
    passed = [pipe.write_fd, *([theirs.fileno()] if theirs is not None else [])]
    group = new_group() if PIDS_FEATURE in sandbox.features else None
    try:
        if sandbox.confines:
            cache.mkdir(mode=0o700)
        writable = [eval_dir, cache, scratch, *([caches.shared] if caches.shared else [])]
        concealed = heldout_files(setup.task.directory, setup.task.name) if sandbox.confines else []
        env = {**setup.environment(step, target), **private}
        limits = step_limits(timeout, setup.device.is_gpu, group)
        started = StartedCommand(
            command,
            eval_dir,
            env,
            log_path or setup.log_path,
            with_stdin=True,
            pass_fds=tuple(passed),
            prefix=tuple(sandbox.wrap([], writable, keep_admin=judge, concealed=concealed)),
            preexec=limits.apply,
            fork=_warm_fork(command, eval_dir, env, passed, writable, limits, concealed) if judge else None,
        )
    except BaseException:
        remove_tree(cache)
        remove_tree(scratch)
        if group is not None:
            remove_group(group)
        if ours is not None:
            ours.close()
        raise
    finally:
        os.close(pipe.write_fd)
        if theirs is not None:
            theirs.close()
    return StepProcess(
        command,
        step,
        started,
        pipe,
        secrets.token_hex(16),
        cache,
        timeout,
        caches.seed_for(step),
        caches.kept,
        scratch,
        tuple(writable),
        ours,
        group,
    )


def _warm_fork(
    command: str,
    eval_dir: Path,
    env: dict[str, str],
    passed: list[int],
    writable: list[Path],
    limits: ResourceLimits,
    concealed: Sequence[str] = (),
) -> Callable[[int], ForkedProcess] | None:
    """How an aka.harness step starts from the warm parent (`aka.evaluation.warm_parent`), in the
    same sandbox as the exec path would give it; None where it is exec'd."""
    argv = script_argv(command)
    parent = WarmParent.for_env(env) if argv else None
    if parent is None or argv is None:
        return None
    sandbox = step_sandbox(detect_sandbox(), writable, keep_admin=True, concealed=concealed)
    if not parent.can_sandbox(sandbox, env):
        return None
    return lambda log_fd: parent.start(argv, eval_dir, env, log_fd, passed, sandbox, limits)


def finish_isolated(
    process: StepProcess, time_left: float = float("inf"), turn: Turn | None = None, not_after: float | None = None
) -> tuple[CommandOutcome, bytes, str]:
    """Give a started command its token and its turn (at most its timeout, and at most
    `time_left`); return how it ended and what it sent. Time `turn` kept it stopped (a shared
    turn steps aside for a timed step: aka.evaluation.device_lock) is added to both limits, but
    never past `not_after` (the request's hard end, `RunningTime.not_after`)."""
    try:
        if process.seed_cache is not None and process.seed_cache.is_dir():
            shutil.copytree(process.seed_cache, process.cache, dirs_exist_ok=True)
        process.cache.mkdir(mode=0o700, exist_ok=True)
        ran = finish_as_step(
            process.started,
            f"{process.token}\n".encode(),
            min(process.timeout, max(time_left, 0.0)),
            process.writable,
            turn or Turn(0.0),
            not_after,
        )
        if process.keep_cache is not None and process.cache.is_dir():
            shutil.copytree(process.cache, process.keep_cache, dirs_exist_ok=True, symlinks=True)
    finally:
        process.remove_private_dirs()
    return ran, process.pipe.payload(), process.token


def finish_as_step(
    started: StartedCommand,
    stdin: bytes | None,
    timeout: float,
    writable: Sequence[Path],
    turn: Turn,
    not_after: float | None = None,
) -> CommandOutcome:
    """Wait for a started command under a step's watch: its writable folders' disk quota, its
    output limit, stopped while `turn` stands aside for a timed step (that time added to
    `timeout`, never past `not_after`) and ended if it ran meanwhile."""
    quota = DiskQuota(writable, root=started.proc.pid)
    with turn.pausable(started.proc.pid):
        return started.finish(
            stdin,
            timeout,
            watch=lambda: quota() or turn.ran_aside(),
            output_limit=STEP_OUTPUT_LIMIT_BYTES,
            pauses=turn,
            not_after=not_after,
        )


def run_isolated(setup: StepSetup, command: str, step: Step, target: Target) -> tuple[CommandOutcome, bytes, str]:
    """Run one step command sandboxed, with a private result pipe and a one-time token on stdin."""
    return finish_isolated(start_isolated(setup, command, step, target))


def uses_aka_harness(task: Task, steps: list[Step], eval_dir: Path) -> bool:
    """Every command of `steps` is an aka.harness script (they say `ready` and share caches safely)."""
    commands = [c for step in steps for c in step_commands(task, step)]
    return bool(commands) and all(is_harness_script(c, eval_dir) for c in commands)


def is_harness_script(command: str, eval_dir: Path) -> bool:
    """`python3 SCRIPT.py ...` where the script ends in aka.harness's `run_task` (which says `ready`)."""
    argv = script_argv(command)
    if argv is None:
        return False
    script = eval_dir / argv[0]
    return script.is_file() and "run_task(" in script.read_text(encoding="utf-8", errors="replace")


@dataclass
class Prestarted:
    """Every command of a sequence of steps, started at once so their start-up (Python, torch,
    the harness) overlaps; each still runs alone, in turn, after the directory is rebuilt.

    Only with the PID-namespace sandbox (a waiting process is invisible to the candidate code
    of earlier steps) and only for aka.harness scripts, which load the harness and then wait
    for their token: all of them are loaded before any candidate code runs.
    """

    eval_dir: Path
    inode: int
    processes: dict[Step, list[StepProcess]]
    log_path: Path

    @classmethod
    def start(cls, setup: StepSetup, steps: list[tuple[Step, Target]]) -> Prestarted | None:
        if not detect_sandbox().prefix or not uses_aka_harness(setup.task, [s for s, _ in steps], setup.eval_dir):
            return None
        processes = {
            step: [
                start_isolated(setup, c, step, target, own_log(setup.log_path, step, i))
                for i, c in enumerate(step_commands(setup.task, step))
            ]
            for step, target in steps
        }
        for process in (p for group in processes.values() for p in group):
            process.pipe.ready.wait(timeout=process.timeout)
        return cls(setup.eval_dir, setup.eval_dir.stat().st_ino, processes, setup.log_path)

    def replaced(self) -> bool:
        """Candidate code swapped the evaluation directory for another (waiting steps would not see it)."""
        try:
            return self.eval_dir.stat().st_ino != self.inode
        except OSError:
            return True

    def abandon(self) -> None:
        """Kill the commands that never got their turn (an earlier step failed); keep their logs."""
        for process in (p for group in self.processes.values() for p in group):
            process.abandon()
            append_log(process.started.log_path, self.log_path)


def own_log(log_path: Path, step: Step, index: int) -> Path:
    return log_path.with_name(f"{log_path.name}.{step.value}{index}")


def append_log(own: Path, log_path: Path) -> None:
    """Early-started commands log to their own file (they start together); keep one log for people,
    copied in chunks (a step may have printed up to its output limit)."""
    if own != log_path and own.is_file():
        with log_path.open("ab") as log, own.open("rb") as source:
            shutil.copyfileobj(source, log)
        own.unlink()


def run_confined(
    task: Task,
    device: DeviceInfo,
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log_path: Path,
    writable: Sequence[Path] = (),
) -> CommandOutcome:
    """A command that runs candidate code outside the judged steps (a task's exports) confined as
    a step is: the sandbox with only `cwd`, `writable` and a private scratch and Triton cache
    writable, the task's held-out files concealed, a step's limits (its disk quota and output
    limit too), the device held shared and given up to a timed step that waits. Run as a plain
    subprocess, an export read the suite's held-out cases, rewrote the run's frozen baseline (a
    later honest trial failed) and left a process behind (red team D, session 53)."""
    sandbox = detect_sandbox()
    scratch = Path(tempfile.mkdtemp(prefix="tmp-confined-", dir=cwd.parent))
    cache = scratch / "triton"
    cache.mkdir()
    private = _private_folders(cache, scratch)
    concealed = heldout_files(task.directory, task.name) if sandbox.confines else []
    prefix = tuple(sandbox.wrap([], [cwd, scratch, *writable], concealed=concealed))
    group = new_group() if PIDS_FEATURE in sandbox.features else None
    try:
        with device_turn(device, exclusive=False) as turn:
            limits = step_limits(timeout, device.is_gpu, group)
            started = StartedCommand(
                command, cwd, {**env, **private}, log_path, with_stdin=False, prefix=prefix, preexec=limits.apply
            )
            return finish_as_step(started, None, timeout, [cwd, scratch, *writable], turn)
    finally:
        remove_tree(scratch)
        if group is not None:
            remove_group(group)
