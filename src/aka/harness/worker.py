"""A worker: the process that runs one side's code (the candidate's, or the baseline's) for the judge.

    python3 -m aka.harness.worker --fd N   (or forked from the judge: aka.harness.spawn)

Started by the judge (`aka.harness.remote`), it loads the side's sources from its own copy of
the evaluation directory and then serves requests over the link: map the judge's shared memory,
call a load of the side's entry point on inputs in that memory, copy each output into the
judge's output buffers and report how long the call took by its own events. Nothing here is
trusted: the judge compares the outputs it was handed, and bounds the reported time by its own
clock. The guards run here (the torch-operator policy, the launch counter, the persisting-L2
pin) are a first line only, reported as findings; a candidate that defeats them still has to
produce every output correctly within the judge's span.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from aka.harness import cuda_driver, syscall_filter
from aka.harness.candidates import BASELINE_MODULE_PREFIX, ToolMissingError, separate_load
from aka.harness.guard import (
    ENFORCE,
    OBSERVE,
    OFF,
    ForbiddenOps,
    LaunchCounter,
    PersistingL2,
    modules_under,
    overlaps,
    poison_allocator,
    remember_triton_launchers,
    storages,
)
from aka.harness.link import Link, LinkClosed
from aka.harness.report import describe_exception
from aka.harness.shared import OpenedArena
from aka.harness.task import KernelTask, exact_float32

CandidateError: tuple[type[BaseException], ...] = (Exception, SystemExit)
POLICY, NO_LAUNCH, PERSISTING_L2 = "policy_violation", "no_launch", "persisting_l2"
SPIN_S = 0.002  # on a GPU the next request comes within a few ms
# A shift's blocks: odd multiples of the caching allocator's 512-byte rounding, one in its small pool
# (up to 1 MiB) and one in its large pool, so the blocks a call allocates after them start elsewhere.
SMALL_SHIFT, LARGE_SHIFT, LARGE_BASE = 3 * 512, 65 * 512, 2**20 + 512


def shift_blocks(shift: int, device: torch.device) -> list[torch.Tensor]:
    """Blocks held through one call, `shift` steps long: the temporaries a call allocates itself
    (a histogram, an intermediate activation) land at another address for each shift, as its
    inputs and outputs do from the judge's placements, instead of at one address (and one speed)
    for the worker's whole life. Every call of a side gets them, checked or timed alike."""
    if shift <= 0 or device.type != "cuda":
        return []
    return [
        torch.empty(shift * SMALL_SHIFT, dtype=torch.uint8, device=device),
        torch.empty(LARGE_BASE + shift * LARGE_SHIFT, dtype=torch.uint8, device=device),
    ]


def _load_task(path: Path, name: str) -> KernelTask:
    """The task's `harness.py` as a module (its `__main__` block does not run), and its KernelTask."""
    spec = importlib.util.spec_from_file_location("_aka_task", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["_aka_task"] = module
    spec.loader.exec_module(module)
    for value in vars(module).values():
        if isinstance(value, KernelTask) and value.name == name:
            return value
    raise ImportError(f"{path.name} declares no KernelTask named {name}")


def autotunes(modules: Sequence[ModuleType]) -> bool:
    """Whether these modules hold a Triton autotuner (also under `triton.heuristics`): its first
    call times each config, which only the device alone keeps fair. The candidate's own word,
    read by the judge for the candidate's sake only (a wrong answer costs it a worse config or
    costs the GPU some shared time, nothing more)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    for module in modules:
        for value in list(vars(module).values()):
            for _ in range(4):  # decorators stacked on the autotuner keep it as `.fn`
                if isinstance(value, Autotuner):
                    return True
                try:
                    value = getattr(value, "fn", None)
                except Exception:  # noqa: BLE001 - any object of the candidate's may say anything
                    break
                if value is None:
                    break
    return False


class Worker:
    """One side's loaded code and the judge's memory it was lent."""

    def __init__(self, link: Link, isolated: bool = False) -> None:
        self.link = link
        self.isolated = isolated
        self.task: KernelTask | None = None
        self.side = "candidate"
        self.directory = Path.cwd()
        self.device = torch.device("cpu")
        self.loads: list[Callable[..., object]] = []
        self.arenas: dict[str, OpenedArena] = {}
        self.policy = OFF
        self.allowed: frozenset[str] = frozenset()
        self.kernels: tuple[str, ...] = ()
        self.launches = LaunchCounter()
        self.persisting_l2: PersistingL2 | None = None
        self.kept: collections.deque[object] = collections.deque()

    def serve(self) -> None:
        handlers: dict[str, Callable[[dict[str, Any], list[int]], dict[str, Any]]] = {
            "setup": self.setup,
            "build": self.build,
            "load": self.load,
            "map": self.map,
            "unmap": self.unmap,
            "trim": self.trim,
            "call": self.call,
            "kernels": self.kernel_names,
            "ping": lambda _request, _fds: {"ok": True},  # started: torch imported, CUDA up
        }
        while True:
            request, fds = self.link.receive_request()
            op = request.get("op")
            if op == "quit":
                return
            handler = handlers.get(str(op))
            if handler is None:
                self.link.answer({"ok": False, "error": f"unknown request {op!r}"})
                continue
            try:
                reply = handler(request, fds)
            except ToolMissingError as exc:
                reply = {"ok": False, "kind": "tool_missing", "error": describe_exception(exc)}
            except CandidateError as exc:
                reply = {
                    "ok": False,
                    "kind": "error",
                    "error": describe_exception(exc),
                    "exception": type(exc).__name__,
                }
            self.link.answer(reply)

    def setup(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        self.directory = Path(request["directory"])
        os.chdir(self.directory)
        self.device = torch.device(request["device"])
        exact_float32()
        self.side = request["side"]
        self.policy, self.allowed = str(request["policy"]), frozenset(request["allowed_ops"])
        if self.policy not in (ENFORCE, OBSERVE, OFF):
            raise ValueError(f"unknown policy {self.policy!r}")
        self.kernels = tuple(request["target_kernels"])
        self.task = _load_task(self.directory / request["task_file"], request["task_name"])
        if self.device.type == "cuda":
            self.persisting_l2 = PersistingL2()
            self.persisting_l2.pin()
        return {"ok": True, "isolated": self.isolated}

    def _task(self) -> KernelTask:
        assert self.task is not None, "setup comes first"
        return self.task

    def build(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        task = self._task()
        if task.build is not None:
            task.build(self.directory)
        return {"ok": True}

    def load(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """`count` separate loads of the side's sources (new JIT functions, new CUDA modules)."""
        task = self._task()
        if self.side == "reference":
            self.loads = [task.reference]
            return {"ok": True}
        source = self.directory / request["source_dir"]
        remember_triton_launchers()  # before any of the side's code runs (it could replace them)
        self.loads = []
        for serial in range(int(request["count"])):
            with separate_load(serial) if serial else contextlib.nullcontext():
                self.loads.append(task.load_candidate(source))
        baseline = self.side == "baseline"  # the pristine copy's modules, or the candidate's own
        modules = [
            m for m in modules_under(self.directory) if m.__name__.startswith(BASELINE_MODULE_PREFIX) is baseline
        ]
        if self.side == "candidate" or self.policy == OBSERVE:  # the baseline's counted alike, never judged
            self.launches.instrument(modules, self.kernels)
        return {"ok": True, "instrumented": sorted(self.launches.instrumented), "autotunes": autotunes(modules)}

    def map(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        self.unmap({"name": request["name"]}, [])
        self.arenas[request["name"]] = OpenedArena.open(request["arena"], fds)
        return {"ok": True}

    def unmap(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        arena = self.arenas.pop(request["name"], None)
        if arena is not None:
            arena.close()
        return {"ok": True}

    def trim(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """Drop the outputs kept from earlier calls and give the allocator's cached blocks back:
        the judge asks before it sizes a case's buffers on a GPU that others have filled."""
        self.kept.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True}

    @contextlib.contextmanager
    def _guarded(self, findings: list[str]) -> Iterator[None]:
        mode = ForbiddenOps(self.allowed) if self.policy != OFF else None
        before = self.launches.total()
        with mode or contextlib.nullcontext():
            yield
        if self.policy != ENFORCE:
            return
        if mode is not None and mode.violations:
            findings.append(f"{POLICY}: {mode.describe()}")
        if self.launches.instrumented and self.launches.total() == before:
            findings.append(
                f"{NO_LAUNCH}: no target kernel ({', '.join(sorted(self.launches.instrumented))}) "
                "was launched during the call"
            )

    def _keep(self, output: object, request: dict[str, Any]) -> None:
        """Keep the last `keep - 1` outputs alive, so that the next call's output is allocated
        elsewhere (aka.harness.turns.Placements)."""
        keep = max(1, min(16, int(request.get("keep") or 1)))
        self.kept.append(output)
        while len(self.kept) > keep - 1:
            self.kept.popleft()

    def call(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """One call on inputs in the judge's memory; outputs copied into its output buffers.

        On a GPU with a `serial`, the call is ordered by the judge's flags: this stream waits for
        the judge's `go` flag (written once its inputs are written, the L2 flushed and its hold
        over) and writes the `done` flag after the outputs are copied; the events around the call
        are the time it reports."""
        arena = self.arenas[request["arena"]].tensors
        inputs = _inputs(arena, request)
        slots = [arena[name] for name in request["outputs"]]
        function = self.loads[int(request["load"]) % len(self.loads)]
        serial = request.get("serial")
        if request.get("poison"):
            poison_allocator(slots)
        findings: list[str] = []
        self.launches.suppressed = request.get("without_targets") is True  # the judge's ablation calls only
        if self.device.type != "cuda":
            started = time.perf_counter()
            try:
                with self._guarded(findings):
                    output = function(*inputs)
            finally:
                self.launches.suppressed = False
            t_ms = (time.perf_counter() - started) * 1000.0
            self._keep(output, request)
            return {
                "ok": True,
                "t_ms": t_ms,
                "enqueued": time.perf_counter(),
                "outputs": deliver(output, slots, inputs),
                "findings": findings,
            }
        stream = torch.cuda.current_stream()
        flags = arena.get("flags")
        if serial is not None and flags is not None:
            cuda_driver.wait_flag(stream, flags.data_ptr(), int(serial))
        start, end = _event(), _event()
        shifted = shift_blocks(int(request.get("shift") or 0), self.device)
        try:
            start.record()
            with self._guarded(findings):
                output = function(*inputs)
            end.record()
            outputs = deliver(output, slots, inputs)
            self._keep(output, request)
        finally:
            self.launches.suppressed = False
            if serial is not None and flags is not None:  # the judge's stream waits for this even after a failure
                cuda_driver.write_flag(stream, flags.data_ptr() + 4, int(serial))
            del shifted  # back to the allocator once the call's work is enqueued
        enqueued = time.perf_counter()
        # The GPU passed the start event before the last enqueue: it may have waited for launches
        # inside the call's events (a worker descheduled mid-call on a loaded host), which the
        # judge's clock comparison misses when the hold's start on the GPU lagged its own.
        gpu_went_first = bool(serial is not None and start.query())  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()
        if self.persisting_l2 is not None and self.persisting_l2.violated():
            findings.append(f"{PERSISTING_L2}: the candidate reserved persisting L2 cache (defeats the L2 flush)")
        return {
            "ok": True,
            "t_ms": start.elapsed_time(end),
            "enqueued": enqueued,
            "gpu_went_first": gpu_went_first,
            "outputs": outputs,
            "findings": findings,
        }

    def kernel_names(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """The GPU kernels one call launches, from the profiler (CUDA-source targets)."""
        from torch.profiler import ProfilerActivity, profile

        arena = self.arenas[request["arena"]].tensors
        inputs = _inputs(arena, request)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            self.loads[0](*inputs)
            torch.cuda.synchronize()
        names = sorted({event.name for event in prof.events() if event.device_type.name == "CUDA"})
        return {"ok": True, "names": names[:64]}


def _inputs(arena: dict[str, torch.Tensor], request: dict[str, Any]) -> list[torch.Tensor]:
    """The call's inputs: the judge's buffers, or the values it sent (inputs the task makes on the CPU)."""
    values = request.get("values") or {}
    return [arena[name] if name is not None else values[position] for position, name in enumerate(request["inputs"])]


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]


def deliver(output: object, slots: list[torch.Tensor], inputs: list[torch.Tensor]) -> list[dict[str, Any]]:
    """Copy each output tensor into its slot where shape, dtype and device match; describe every one
    (the judge compares what arrived and reports the mismatches)."""
    items = list(output) if isinstance(output, tuple | list) else [output]
    described: list[dict[str, Any]] = []
    for position, item in enumerate(items[:64]):
        if type(item) is not torch.Tensor:  # a subclass's copy runs its own code after the guard:
            # a red team's computed the output there with torch (session 50)
            described.append({"type": _kind(item)})
            continue
        slot = slots[position] if position < len(slots) else None
        fits = (
            slot is not None
            and tuple(item.shape) == tuple(slot.shape)
            and item.dtype == slot.dtype
            and item.device.type == slot.device.type
        )
        if fits and slot is not None:
            slot.copy_(item)
        described.append(
            {
                "type": "Tensor",
                "shape": list(item.shape),
                "dtype": str(item.dtype).removeprefix("torch."),
                "device": item.device.type,
                "contiguous": item.is_contiguous(),
                "aliases_input": overlaps(storages(item), storages(inputs)),
                "copied": fits,
            }
        )
    return [
        {
            "container": type(output).__name__
            if isinstance(output, tuple | list)
            else "Tensor"
            if type(output) is torch.Tensor
            else _kind(output),
            "count": len(items),
        },
        *described,
    ]


def _kind(value: object) -> str:
    """A returned value's type by its qualified name: a subclass named `Tensor` is not a tensor."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def serve(fd: int, device: str, isolated: bool, filtered: bool = False) -> int:
    """Serve the judge on the socket `fd` until it says quit or goes away. On a GPU, CUDA is set
    up first (while the judge still waits for its turn); where it fails here, every request is
    answered with `cuda_unavailable`, and the judge starts a worker elsewhere. A worker under the
    system call filter (`filtered`) then closes itself to Unix sockets (`syscall_filter`), before
    any request, so before any side's code."""
    import socket

    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]  # nothing beside the worker shadows a module
    # One CPU thread: a worker forked after its judge ran an OpenMP region would hang in libgomp's
    # dead thread pool, and both sides run alike wherever they were started.
    torch.set_num_threads(1)
    link = Link(socket.socket(fileno=fd), spin_s=SPIN_S if device == "cuda" else 0.0)
    problem = None
    if device == "cuda":
        try:
            torch.cuda.current_stream().synchronize()
        except Exception as exc:  # noqa: BLE001 - reported to the judge, which decides
            problem = describe_exception(exc)
    if filtered and problem is None:
        refused = syscall_filter.close_unix_sockets()
        if refused is not None:
            print(f"aka worker: Unix sockets stay open: {refused}", file=sys.stderr, flush=True)
    try:
        if problem is not None:
            while True:
                request, _ = link.receive_request()
                if request.get("op") == "quit":
                    return 0
                link.answer({"ok": False, "kind": "cuda_unavailable", "error": problem})
        Worker(link, isolated).serve()
    except LinkClosed:  # the judge is done with this worker (or gone): nothing left to serve
        pass
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--filtered", action="store_true", help="started under the system call filter")
    args = parser.parse_args()
    return serve(args.fd, args.device, isolated=False, filtered=args.filtered)


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # the judge waits for this exit: no teardown of torch, as a forked worker leaves
