"""A worker seen from the judge: started, fed requests with deadlines, paused, stopped.

Where this machine allows it, a worker runs in PID and mount namespaces of its own behind
`aka.evaluation.confine` (`aka.harness.spawn`): it cannot see or signal the judge or the other worker,
cannot read their memory, and can write only its own folder, its build cache and its temporary
folder (so the candidate's worker cannot plant anything the baseline's worker or the judge would
later import or load). Where it does not, the worker shares the judge's namespaces and the judge
is undumpable (no other process of its user can read its memory or descriptors); the results
list which held (`worker-namespace`).

Pausing a worker stops every process below it and its process group: candidate code that makes
a session of its own (`setsid`) leaves the group but not the tree, a chain of processes that
fork and exit at once outruns a walk of the tree but not a signal to the group; in the worker's PID
namespace an orphan is adopted by the worker itself. Where the worker shares the judge's
namespaces, the judge adopts orphans (`PR_SET_CHILD_SUBREAPER`), and pausing the candidate also
stops every child of the judge that is none of its workers (a stray a worker left behind).
A stop is not proof against what continues it (a tracer, a sibling's or a timer's SIGCONT): the
candidate's worker runs under `aka.harness.syscall_filter`, and before it is resumed the judge
checks that none of its processes ran while paused (`aka.stillness`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aka.harness import stall
from aka.harness.link import Link, LinkClosed, LinkTimeout, ProtocolError, Reply, WorkerFailure
from aka.harness.shared import Arena
from aka.harness.spawn import fork_worker, namespaces_work, start_plain
from aka.process import continue_processes, process_table, stop_trees, stopped_descendant, tree
from aka.stillness import Stillness

NAMESPACE_FEATURE = "worker-namespace"
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
STOP_CHECK_S = 1.0
GROUP_WAIT_S = 2.0  # how long a signal waits for a just-forked worker to make its process group
OUTPUT_TAIL_BYTES = 32 * 1024  # of a worker's output, copied into the step log
# What a worker keeps of the step's AKA_ variables: nothing that names the judge's folders or
# channel. The step stays: candidate code can tell it anyway (the performance step loads it three
# times and pauses it between calls), so the checks never rely on it being unknown (a red team
# was honest where `AKA_STEP` said correctness: the performance step's ablation calls catch that,
# `perf.CasePairs`). The case profile goes: only the judge picks cases, and told `heldout` a
# red team's candidate was right only there, so `aka heldout` certified a kernel wrong on every
# unseen shape (session 53); the ordinary profile follows from the device anyway.
WORKER_VARIABLES = frozenset(
    {
        "AKA_STEP",
        "AKA_DEVICE",
        "AKA_CUDA_ARCH",
        "AKA_TASK_FAMILY",
        "AKA_TARGET_KERNELS",
        "AKA_NO_SANDBOX",
        "AKA_NO_WORKER_SANDBOX",
    }
)
log = logging.getLogger(__name__)
_WORKERS: set[int] = set()  # pids of this judge's workers, alive or not yet reaped


def make_undumpable() -> None:
    """No process of this user may read the judge's memory or file descriptors (ptrace, /proc)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("could not make the judge undumpable")


def adopt_orphans() -> None:
    """Processes a worker leaves behind (its parent gone) become the judge's children rather than
    the machine's: pausing finds them (`strays`), and they end with the step."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("could not make the judge adopt its workers' orphans")


def strays() -> list[int]:
    """The judge's children that are none of its workers: orphans a worker left behind (the judge
    runs nothing else in the background while a worker is paused or resumed)."""
    me = os.getpid()
    return [pid for pid, (_, parent, _) in process_table().items() if parent == me and pid not in _WORKERS]


class RemoteSide:
    """One worker process: `role` is `candidate` or `baseline` (also used for the reference)."""

    def __init__(self, role: str, device: str, home: Path, cache: Path | None, env: dict[str, str]) -> None:
        self.role = role
        self.directory = home / f"worker-{role}"
        self.scratch = home / f"worker-{role}-tmp"
        for path in (self.directory, self.scratch):
            path.mkdir(parents=True, exist_ok=True)
        self.cache = cache or home / f"worker-{role}-cache"
        self.cache.mkdir(parents=True, exist_ok=True)
        own = {
            "TRITON_CACHE_DIR": str(self.cache),
            "TORCH_EXTENSIONS_DIR": str(self.cache / "torch_extensions"),
            "TMPDIR": str(self.scratch),
            "TMP": str(self.scratch),
            "TEMP": str(self.scratch),
        }
        self.env = {**{k: v for k, v in env.items() if not k.startswith("AKA_") or k in WORKER_VARIABLES}, **own}
        self.device = device
        self.namespaces = "1" not in (env.get("AKA_NO_SANDBOX"), env.get("AKA_NO_WORKER_SANDBOX")) and namespaces_work()
        # Its output, in a file outside every folder it may write; the judge copies the tail into
        # the step log at the end (a worker that prints without end fills neither the log nor memory).
        self.output_fd = os.open(
            home / f"worker-{role}.log", os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        self._grouped: int | None = None  # the worker pid whose own process group has been seen
        self._start(forked=True)
        self.arenas: dict[str, Arena] = {}
        self.paused = False
        self._stopped: list[int] = []  # what `pause` stopped, parents first
        self._stillness: Stillness | None = None  # the candidate's clocks once its pause took hold
        self.loaded = False  # the side's code has run in it
        self.free_before_load: int | None = None  # the GPU's free bytes before its code first ran
        self.host_before_load: int | None = None  # what the judge could allocate of the host's then
        self.isolated = False  # known once it answers its setup
        self.filtered = False  # under aka.harness.syscall_filter: read from /proc at its setup
        self.sockets_closed = False  # under the second filter too: no Unix socket made (the kernel's word)
        self.autotunes = False  # its code holds a Triton autotuner (known once it answers its load)

    def _start(self, forked: bool, filtered: bool = True) -> None:
        self.link, theirs = Link.pair(spin_s=0.005 if self.device == "cuda" else 0.0)
        try:
            if forked:
                self.process = fork_worker(
                    theirs.fileno(),
                    self.output_fd,
                    self.directory,
                    [self.directory, self.scratch, self.cache],
                    self.env,
                    self.device,
                    self.namespaces,
                )
            else:
                self.process = start_plain(
                    theirs.fileno(), self.output_fd, self.directory, self.env, self.device, filtered
                )
        finally:
            theirs.close()
        _WORKERS.add(self.process.pid)

    def request(self, request: dict[str, Any], timeout: float, fds: Sequence[int] = ()) -> Reply:
        """Send one request and wait for its answer; a dead, silent or malformed worker raises
        `WorkerFailure` (crash, timeout, tampering)."""
        self.stayed_paused()
        self.resume()
        stall.expect(timeout)
        deadline = time.monotonic() + timeout
        stopped = 0
        try:
            self.link.send(request, fds)
            while True:
                try:
                    return self.link.receive_reply(min(STOP_CHECK_S, max(0.0, deadline - time.monotonic())), self.role)
                except LinkTimeout:
                    stopped = stopped + 1 if stopped_descendant(self.process.pid) else 0
                    if stopped >= 2:
                        self.kill()
                        raise WorkerFailure(
                            "tampering",
                            f"the {self.role}'s worker was stopped by a signal ({request.get('op')})",
                            self.role,
                        ) from None
                    if time.monotonic() >= deadline:
                        raise
        except LinkTimeout:
            self.kill()
            raise WorkerFailure(
                "timeout", f"the {self.role} did not answer within {timeout:.0f} s ({request.get('op')})", self.role
            ) from None
        except LinkClosed:
            raise WorkerFailure(
                "crash", f"the {self.role}'s process died ({request.get('op')}; {self._exit_status()})", self.role
            ) from None
        except ProtocolError:
            self.kill()
            raise

    def expect_ok(self, request: dict[str, Any], timeout: float, fds: Sequence[int] = ()) -> Reply:
        reply = self.request(request, timeout, fds)
        if not reply.ok:
            raise RemoteError(reply.text("kind") or "error", reply.text("error") or "failed", reply.text("exception"))
        return reply

    def setup(
        self,
        evaluation_dir: Path,
        task_file: str,
        task_name: str,
        device: str,
        policy: str,
        allowed_ops: Sequence[str],
        target_kernels: Sequence[str],
        hidden: Sequence[str],
        timeout: float,
    ) -> None:
        """Copy the evaluation directory into the worker's own folder (without the hidden files)
        and have it import the task there; a forked worker whose CUDA did not come up inside its
        namespaces is replaced by a fresh interpreter in the judge's."""
        shutil.copytree(
            evaluation_dir,
            self.directory,
            dirs_exist_ok=True,
            symlinks=True,
            ignore=shutil.ignore_patterns(*hidden, "__pycache__"),
        )
        request = {
            "op": "setup",
            "directory": str(self.directory),
            "task_file": task_file,
            "task_name": task_name,
            "device": device,
            "side": self.role,
            "policy": policy,
            "allowed_ops": list(allowed_ops),
            "target_kernels": list(target_kernels),
        }
        reply = self.request(request, timeout)
        if not reply.ok and reply.text("kind") == "cuda_unavailable":
            log.warning(
                "CUDA did not initialize in the worker's namespaces (%s): a worker without them", reply.text("error")
            )
            self.close_process()
            self._start(forked=False)
            reply = self.request(request, timeout)
        if not reply.ok and reply.text("kind") == "cuda_unavailable":
            # Not yet tried on a GPU with the system call filter (session 43): should CUDA need a
            # call it refuses, the worker runs without it (results lack `worker-syscall-filter`;
            # the clocks of `aka.stillness` still guard the pause). Decided before any side's code
            # runs: the candidate cannot bring it about.
            log.warning(
                "CUDA did not initialize under the system call filter (%s): a worker without it", reply.text("error")
            )
            self.close_process()
            self._start(forked=False, filtered=False)
            reply = self.request(request, timeout)
        if not reply.ok:
            raise RemoteError(reply.text("kind") or "error", reply.text("error") or "failed", reply.text("exception"))
        self.isolated = reply.boolean("isolated", False)

    def map(self, name: str, arena: Arena, timeout: float = 60.0) -> None:
        """Lend the worker `arena`; a worker that cannot map it has broken its own process (e.g. its
        CUDA context: seen with a candidate that wrote into its own device files), a `crash`."""
        self.unmap(name)
        self.arenas[name] = arena
        try:
            self.expect_ok({"op": "map", "name": name, "arena": arena.descriptor()}, timeout, arena.fds)
        except RemoteError as exc:
            raise WorkerFailure(
                "crash", f"the {self.role}'s worker could not map the judge's memory: {exc}", self.role
            ) from None

    def trim(self, timeout: float = 30.0) -> None:
        """Ask the worker to give its cached GPU blocks back (its allocator keeps what the judge's
        poisoning and the kept outputs of earlier cases made). Only a request: a worker that
        refuses keeps them, and what it holds then stays its own (`turns.candidate_took`)."""
        if not self.alive():
            return
        with contextlib.suppress(WorkerFailure, RemoteError):
            self.expect_ok({"op": "trim"}, timeout)

    def unmap(self, name: str) -> None:
        arena = self.arenas.pop(name, None)
        if arena is None:
            return
        if self.alive():
            try:
                self.expect_ok({"op": "unmap", "name": name}, 60.0)
            except (WorkerFailure, RemoteError):
                pass
        arena.close()

    def pause(self) -> None:
        """Stop every process of the worker (between its turns: nothing of it may run while the
        other side is timed), the candidate's strays too (module doc)."""
        if not self.paused and self.alive():
            roots: dict[int, int | None] = {self.process.pid: None}
            if self.role == "candidate" and not self.isolated:  # in its namespaces its tree holds its orphans
                roots.update(dict.fromkeys(strays()))
            stop = stop_trees(roots)
            self._stopped = stop.signalled
            # and the group at once: a fork chain in it outruns a walk of the tree, not the kernel
            self._signal(signal.SIGSTOP)
            if self.role == "candidate":  # its clocks, to prove it stayed stopped (`stayed_paused`)
                self._stillness = Stillness.take(stop.seen)
            self.paused = True

    def stayed_paused(self) -> None:
        """Raise `WorkerFailure` (tampering) where a process of the paused candidate ran since its
        pause: something continued it while the other side was timed (`aka.stillness`)."""
        if self.paused and self._stillness is not None and (why := self._stillness.broken()) is not None:
            self.kill()
            raise WorkerFailure("tampering", f"the {self.role}'s {why}", self.role)

    def resume(self) -> None:
        if self.paused:
            self._signal(signal.SIGCONT)
            continue_processes(self._stopped)
            self._stopped, self._stillness = [], None
            self.paused = False

    def _signal(self, number: int) -> None:
        """Signal the worker's process group. In its first moments after the fork the worker has
        not made its group yet (`setsid`), and a `killpg` then reaches nobody: while the worker is
        alive (not reaped, so its pid is still this worker's) wait for its group, at most
        `GROUP_WAIT_S`, then signal the process itself."""
        pid, deadline = self.process.pid, time.monotonic() + GROUP_WAIT_S
        try:
            while self._grouped != pid and self.alive() and os.getpgid(pid) != pid:
                if time.monotonic() > deadline:
                    os.kill(pid, number)
                    return
                time.sleep(0.001)
            self._grouped = pid  # made once: a perf step's every pause and resume need not ask again
            os.killpg(pid, number)  # also what a dead worker left in its group
        except (ProcessLookupError, PermissionError):
            pass

    def alive(self) -> bool:
        return self.process.poll() is None

    def _exit_status(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except TimeoutError:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def kill(self) -> None:
        self.resume()
        self._signal(signal.SIGCONT)
        left = [*tree(self.process.pid), *(strays() if self.role == "candidate" else ())]
        self._signal(signal.SIGKILL)  # its PID namespace, where it has one, ends with it
        for pid in left:  # what left its group in the judge's namespace
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
            _WORKERS.discard(self.process.pid)
        except TimeoutError:
            pass

    def close_process(self) -> None:
        """Ask the worker to quit and kill it if it does not."""
        if self.alive():
            self.resume()
            try:
                self.link.send({"op": "quit"})
                self.process.wait(timeout=10)
            except (LinkClosed, TimeoutError):
                pass
        self.kill()
        self.link.close()

    def close(self) -> None:
        """Stop the worker, then free what was lent to it and show the end of what it printed."""
        self.close_process()
        for arena in self.arenas.values():
            arena.close()
        self.arenas.clear()
        if self.output_fd >= 0:
            sys.stderr.write(output_tail(self.output_fd, self.role))
            sys.stderr.flush()
            os.close(self.output_fd)
            self.output_fd = -1


def output_tail(fd: int, role: str, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """The last `limit` bytes a worker printed, framed for the step log ('' when it printed nothing)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return ""
    text = os.pread(fd, min(size, limit), max(0, size - limit)).decode("utf-8", errors="replace")
    cut = f", the last {limit} of {size} bytes" if size > limit else ""
    return f"--- the {role}'s worker printed{cut}:\n{text}{'' if text.endswith(chr(10)) else chr(10)}--- end\n"


class RemoteError(Exception):
    """A request the worker answered with a failure (a build error, a candidate exception)."""

    def __init__(self, kind: str, message: str, exception: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.exception = exception
