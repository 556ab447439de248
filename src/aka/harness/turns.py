"""One side's calls on one case, as the judge makes them: its memory, its inputs, its clock.

For each call the judge writes the inputs into the side's input buffers (several sets, used in turn,
so consecutive calls read other addresses), and on a GPU:

    judge stream:  E0 | hold | write inputs | reset persisting L2 lines, flush the L2 | go flag |
                   wait for the done flag | E2 | copy the outputs into its own memory
    worker stream:       wait for the go flag | start | the call | end | copy the outputs out | done flag

The hold keeps the judge's stream busy while the worker enqueues its call, so the worker's events
see GPU time only. The inputs are written after the hold: a worker may run kernels on streams
the go flag does not gate, and the GPU gives its context time slices while the hold (a sleep of
clock cycles, which time slicing does not lengthen) waits; on the H200 a candidate that computed
its answer there, in a hold it had made long by enqueuing late, read 6.6x for an honest 2.25x
(docs/benchmarks/2026-12-03_session32_h200.md). Now whatever it runs during the hold sees the
previous call's inputs. The span E0..E2 is read on the judge's own stream: it contains every GPU
microsecond the worker could have spent on these inputs (they did not exist before the writes;
the output was complete at E2), so the part of it that neither the hold (timed by the judge's
own events around it) nor the worker's events explain (`unexplained`) bounds any time the worker
hides from its own events: work it squeezes in after the writes takes the GPU from the judge's
stream and lengthens the span. On the CPU the same holds with the wall clock.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from aka.evaluation.wire import allocation_shifts
from aka.harness import cuda_driver, host_memory, stall
from aka.harness.compare import Output
from aka.harness.link import Reply, WorkerFailure
from aka.harness.remote import RemoteSide
from aka.harness.shared import Arena, Slot
from aka.harness.task import HarnessError
from aka.harness.timing import l2_cache_bytes

FLAGS = "flags"
CALL_TIMEOUT_S = 300.0  # a call that compiles (the first of each load) may take minutes
TIMED_CALL_TIMEOUT_S = 30.0
MEMORY_HEADROOM = 0.9  # of the free GPU memory: the allocators' rounding and the CUDA contexts' growth
CANDIDATE_MEMORY_ALLOWANCE = 2**30  # what a candidate's code, modules and scratch may take beyond its outputs
ALLOCATION_SHIFTS = allocation_shifts()  # a side's calls shift their own temporaries in turn (worker.shift_blocks)


@dataclass(frozen=True)
class Turn:
    """One call: the worker's answer, its own time, the judge's span and whether it came late."""

    reply: Reply
    claimed_ms: float
    span_ms: float
    late: bool
    hold_ms: float = 0.0

    @property
    def unexplained_ms(self) -> float:
        return self.span_ms - self.hold_ms - self.claimed_ms


def outputs_of(expected: Output) -> list[torch.Tensor]:
    return [expected] if isinstance(expected, torch.Tensor) else list(expected)


@functools.cache
def _cycles_per_ms(index: int) -> int:
    rate_khz = getattr(torch.cuda.get_device_properties(index), "clock_rate", 0) or 1_500_000
    return int(rate_khz)


@functools.cache
def _flush(device: torch.device) -> torch.Tensor:
    """Twice the L2, zeroed after the inputs are written: none of them is left in the cache."""
    return torch.empty(2 * l2_cache_bytes(device) // 4, dtype=torch.int32, device=device)


def nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def free_gpu_bytes(device: torch.device) -> int:
    """What the GPU has free, with the judge's own cached but unused blocks (0 on the CPU)."""
    if device.type != "cuda":
        return 0
    return torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


class MemoryShortfall(HarnessError):
    """A case's buffers do not fit in the GPU's free memory."""

    def __init__(self, message: str, need: int) -> None:
        super().__init__(message)
        self.need = need


@dataclass(frozen=True)
class Placements:
    """Where a side's calls of one case land: `sets` input sets in its arena, used in turn, and
    `ring` output buffers of its worker (the last `ring - 1` outputs kept alive, so its allocator
    hands out another block each call). A kernel's time depends a little on where its buffers
    lie, and a fixed placement per side is a fixed offset between the sides; cycling both sides
    through several turns it into noise that the pairs average out."""

    sets: int = 2
    ring: int = 1


LEGACY = Placements()


def input_sets(
    device: torch.device,
    inputs: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    sides: int,
    name: str,
    wanted: int = 0,
) -> Placements:
    """How many input sets each side's arena holds and how many outputs its worker cycles through:
    `wanted` of each where the GPU has room, else two input sets, else one. A case that does not
    fit even so is a limit of this GPU and harness (`MemoryShortfall`, an `infra_error`) unless
    the candidate took the memory (`candidate_took`). Counted: `sides` arenas, the judge's
    snapshots, two live checks (inputs and expected outputs), each worker's own outputs and the
    L2 flush."""
    if device.type != "cuda":
        return Placements(host_input_sets(inputs, outputs, sides, name), 1)
    ins, outs = nbytes(inputs), nbytes(outputs)
    free = free_gpu_bytes(device)
    fixed = 2 * sides * outs + 2 * (ins + outs) + 2 * l2_cache_bytes(device)
    options = [Placements(count, count) for count in range(wanted, 2, -1)] + [LEGACY, Placements(1, 1)]
    for option in options:
        need = fixed + sides * (option.sets * ins + option.ring * outs)
        if need <= MEMORY_HEADROOM * free:
            return option
    raise MemoryShortfall(
        f"{name} needs about {need / 2**30:.1f} GiB of GPU memory (inputs {ins / 2**30:.2f} GiB, "
        f"outputs {outs / 2**30:.2f} GiB, for {sides} side(s) and the judge's own copies) and "
        f"{free / 2**30:.1f} GiB are free: a limit of this GPU, not of the candidate",
        need,
    )


def sized(
    side: RemoteSide,
    device: torch.device,
    inputs: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    sides: int,
    name: str,
    wanted: int = 0,
) -> Placements:
    """`input_sets`, once more after asking the side's worker to give back its cached blocks where
    the case does not fit: its allocator keeps what earlier cases left (the judge's poisoning, kept
    outputs), and on an H100 beside a neighbour's hoard an honest candidate holding 1.8 GiB so was
    judged `performance_error`. A worker that keeps them anyway is measured as it is."""
    try:
        return input_sets(device, inputs, outputs, sides, name, wanted)
    except MemoryShortfall:
        side.trim()
        return input_sets(device, inputs, outputs, sides, name, wanted)


def host_input_sets(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], sides: int, name: str) -> int:
    """`input_sets` on the CPU: the judge's buffers against the host memory it may still take
    (aka.harness.host_memory); a case that fits with neither count is the machine's limit."""
    budget = host_memory.available_bytes()
    if budget is None:
        return 2
    ins, outs = nbytes(inputs), nbytes(outputs)
    largest = max((t.numel() for t in outputs), default=0)
    for sets in (2, 1):
        need = host_memory.case_need(ins, outs, largest, sides, sets)
        if need <= MEMORY_HEADROOM * budget:
            return sets
    raise MemoryShortfall(
        f"{name} needs about {need / 2**20:.0f} MiB of host memory for the judge's own buffers "
        f"(inputs {ins / 2**20:.0f} MiB, outputs {outs / 2**20:.0f} MiB, for {sides} side(s), their "
        f"snapshots and the float64 comparison) and {budget / 2**20:.0f} MiB are left under the "
        "step's memory limit and the machine's free memory: a limit of this machine and harness, "
        "not of the candidate",
        need,
    )


def candidate_took(
    need: int | None,
    free_before_candidate: int | None,
    free_now: int,
    freed_by_its_end: int | None,
    where: str = "GPU",
) -> str | None:
    """Whose shortfall it is. Memory that went missing after the candidate's code loaded and that
    came back when its worker ended (`memory_freed_by_ending`) was the candidate's: where it held
    more than its allowance (and the buffers, when their need is known, fit before), the step fails
    as the candidate's (`performance_error`), not as an `infra_error` that a trainer drops. The fall
    alone is not enough: the device's free memory is every evaluation's on that GPU. Nor is what
    ending it gave back where others also took more than the allowance since then: that amount
    holds the worker's footprint from before its code loaded and what neighbours freed in the
    same moments, and on the H200 two candidates beside a 130 GiB hoard were charged so
    (docs/benchmarks/2026-12-04_session41_h200.md); a shortfall with two takers is the shared
    GPU's, an `infra_error` judged again. The same holds for the host's memory (`where`): on the
    CPU a candidate whose helpers filled the machine's memory made the judge's sizing fail, an
    `infra_error` on every attempt, until this read it there too (red team, session 43)."""
    if free_before_candidate is None or freed_by_its_end is None:
        return None
    fall = free_before_candidate - free_now
    taken = min(fall, freed_by_its_end)
    if taken <= CANDIDATE_MEMORY_ALLOWANCE or (need is not None and need > MEMORY_HEADROOM * free_before_candidate):
        return None
    if fall - freed_by_its_end > CANDIDATE_MEMORY_ALLOWANCE:
        return None
    return (
        f"the candidate's worker took {taken / 2**30:.1f} GiB of {where} memory after its code loaded (ending it "
        "freed that much), and the judge's buffers for the step no longer fit"
    )


def others_took(free_before_candidate: int | None, read_free: Callable[[], int], side: RemoteSide) -> str | None:
    """Why a candidate whose own call or load ran out of GPU memory is not at fault, or None.
    Only where the GPU is full now (less than the allowance free: a message saying "out of
    memory" is the candidate's to write, the free memory is not), ending its worker gives back no
    more than the allowance, and other processes took more than that since its code loaded: an
    evaluation beside a hoarding one (on the H200 a candidate's import failed so and was judged
    `incorrect`). The same where the GPU had less than the allowance free before its code loaded:
    beside a neighbour's 74 GiB on an H100 a candidate's import failed so, already full, and was
    judged `compile_error`. Otherwise the candidate's request was its own excess."""
    if free_before_candidate is None:
        return None
    free_now = read_free()
    if free_now >= CANDIDATE_MEMORY_ALLOWANCE:
        return None
    freed = memory_freed_by_ending(side, read_free, free_now)
    if freed > CANDIDATE_MEMORY_ALLOWANCE:
        return None
    if free_before_candidate < CANDIDATE_MEMORY_ALLOWANCE:
        return (
            f"the GPU ran out of memory in the candidate's worker with {free_now / 2**30:.2f} GiB free: it had "
            f"{free_before_candidate / 2**30:.2f} GiB free before the candidate's code loaded and its worker held "
            f"{freed / 2**30:.1f} GiB (a limit of the shared GPU, not of the candidate)"
        )
    others = free_before_candidate - free_now - freed
    if others <= CANDIDATE_MEMORY_ALLOWANCE:
        return None
    return (
        f"the GPU ran out of memory in the candidate's worker with {free_now / 2**30:.2f} GiB free: since its "
        f"code loaded other processes took {others / 2**30:.1f} GiB and its worker held {freed / 2**30:.1f} GiB "
        "(a limit of the shared GPU, not of the candidate)"
    )


SETTLE_S = 3.0  # how long the driver gets to free an ended worker's memory
SETTLE_POLL_S = 0.1


def memory_freed_by_ending(side: RemoteSide, read_free: Callable[[], int], free_now: int) -> int:
    """The GPU memory a worker held, read as what ending it (its whole tree) gives back. The fall in
    the device's free memory since its code loaded is no measure of that: on the H200 three
    evaluations beside one that hoarded 132 GiB were each blamed for it (docs/benchmarks/
    2026-12-04_session40_h200.md). Read until two polls agree (the driver frees a context as its
    process is torn down); a neighbour that frees memory within these moments still counts."""
    side.kill()
    deadline = time.monotonic() + SETTLE_S
    last = most = read_free()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
        now = read_free()
        most = max(most, now)
        if now == last:
            break
        last = now
    return max(0, most - free_now)


class CaseMemory:
    """A side's buffers for one case, lent to its worker, and the judge's copies of its outputs."""

    def __init__(
        self,
        side: RemoteSide,
        device: torch.device,
        inputs: Sequence[torch.Tensor],
        expected: Output,
        name: str = "case",
        sides: int = 1,
        placements: Placements | None = None,
        wanted: int = 0,
    ) -> None:
        self.side, self.device, self.name = side, device, name
        expected_outputs = outputs_of(expected)
        self.placements = placements or sized(side, device, inputs, expected_outputs, sides, name, wanted)
        self.sets = self.placements.sets
        # A GPU task's input that the task makes on the CPU (a 0-dim `k`) goes with each request as a
        # value and reaches the call on the CPU, as the task made it: lent in GPU memory, a kernel that
        # reads it (`int(k)`) would wait for the GPU inside its call, which the judge's hold forbids.
        self.by_value = frozenset(k for k, t in enumerate(inputs) if device.type == "cuda" and t.device.type == "cpu")
        layout = [
            Slot.like(f"in{s}_{k}", t) for s in range(self.sets) for k, t in enumerate(inputs) if k not in self.by_value
        ]
        layout += [Slot(f"out{j}", tuple(t.shape), t.dtype) for j, t in enumerate(expected_outputs)]
        layout.append(Slot(FLAGS, (16,), torch.int32))
        try:
            self.arena = Arena.allocate(device, layout)
        except OSError as exc:  # no memfd, no address space: the judge's limit, never the candidate's crash
            raise HarnessError(
                f"the judge could not make its shared buffers for {name} ({sum(s.elements() for s in layout)} "
                f"elements): {exc}; a limit of this machine and harness, not of the candidate"
            ) from exc
        self.arena.tensors[FLAGS].zero_()
        self.count = len(inputs)
        self.outputs = [f"out{j}" for j in range(len(expected_outputs))]
        self.snapshots = [torch.empty_like(t) for t in expected_outputs]
        self.serial = 0
        side.map(name, self.arena)

    def input_names(self, which: int) -> list[str | None]:
        """Each input's buffer in the arena (None: it goes with the request, `values`)."""
        return [None if k in self.by_value else f"in{which}_{k}" for k in range(self.count)]

    def inputs_in(self, which: int) -> list[torch.Tensor]:
        """The inputs lent in the arena (not those sent by value)."""
        return [self.arena.tensors[name] for name in self.input_names(which) if name is not None]

    def values(self, inputs: Sequence[torch.Tensor]) -> dict[int, torch.Tensor]:
        return {k: inputs[k].clone() for k in sorted(self.by_value)}

    def _request(
        self,
        which: int,
        load: int,
        serial: int | None,
        poison: bool,
        inputs: Sequence[torch.Tensor],
        without_targets: bool = False,
    ) -> dict[str, object]:
        return {
            "op": "call",
            "arena": self.name,
            "inputs": self.input_names(which),
            "values": self.values(inputs),
            "outputs": self.outputs,
            "load": load,
            "serial": serial,
            "poison": poison,
            "keep": self.placements.ring,
            "shift": (self.serial // self.sets) % ALLOCATION_SHIFTS,
            "without_targets": without_targets,
        }

    def _write(self, which: int, inputs: Sequence[torch.Tensor]) -> None:
        lent = [value for k, value in enumerate(inputs) if k not in self.by_value]
        for slot, value in zip(self.inputs_in(which), lent, strict=True):
            slot.copy_(value)

    def call(
        self,
        inputs: Sequence[torch.Tensor],
        load: int,
        poison: bool = False,
        timeout: float = CALL_TIMEOUT_S,
        without_targets: bool = False,
    ) -> Turn:
        """An untimed call (checks, warm-up): inputs written, the call made, the outputs copied.
        `without_targets`: the candidate's target kernels launch nothing in it (`checks._ablation`)."""
        self.serial += 1
        which = self.serial % self.sets
        self._write(which, inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        reply = self.side.request(self._request(which, load, None, poison, inputs, without_targets), timeout)
        if reply.ok:
            self._snapshot()
        span_ms = (time.perf_counter() - started) * 1000.0
        return Turn(reply, reply.number("t_ms") if reply.ok else 0.0, span_ms, False)

    def _snapshot(self) -> None:
        for snapshot, name in zip(self.snapshots, self.outputs, strict=True):
            snapshot.copy_(self.arena.tensors[name])
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def timed_call(
        self,
        inputs: Sequence[torch.Tensor],
        load: int,
        hold_ms: float,
        timeout: float = TIMED_CALL_TIMEOUT_S,
        without_targets: bool = False,
    ) -> Turn:
        """A timed call (see the module docstring); on the CPU, wall clock on both sides.
        `without_targets`: the target kernels launch nothing in it (`perf.CasePairs`' ablation)."""
        self.serial += 1
        which = self.serial % self.sets
        if self.device.type != "cuda":
            started = time.perf_counter()
            self._write(which, inputs)
            reply = self.side.request(self._request(which, load, None, False, inputs, without_targets), timeout)
            if reply.ok:
                self._snapshot()
            span_ms = (time.perf_counter() - started) * 1000.0
            return Turn(reply, reply.number("t_ms") if reply.ok else 0.0, span_ms, False)
        return self._timed_gpu(which, inputs, load, hold_ms, timeout, without_targets)

    def _timed_gpu(
        self,
        which: int,
        inputs: Sequence[torch.Tensor],
        load: int,
        hold_ms: float,
        timeout: float,
        without_targets: bool,
    ) -> Turn:
        stream = torch.cuda.current_stream()
        flags = self.arena.tensors[FLAGS].data_ptr()
        serial = self.serial
        start, end, finished = _event(True), _event(True), _event(False)
        held, released = _event(True), _event(True)
        cuda_driver.reset_persisting_l2()
        start.record()
        hold_from = time.perf_counter()
        held.record()
        torch.cuda._sleep(int(hold_ms * _cycles_per_ms(self.device.index or 0)))  # type: ignore[no-untyped-call]
        released.record()
        self._write(which, inputs)  # after the hold: nothing the worker runs during it has these inputs
        _flush(self.device).zero_()
        cuda_driver.write_flag(stream, flags, serial)
        cuda_driver.wait_flag(stream, flags + 4, serial)
        end.record()
        for snapshot, name in zip(self.snapshots, self.outputs, strict=True):
            snapshot.copy_(self.arena.tensors[name])
        finished.record()
        try:
            reply = self.side.request(self._request(which, load, serial, False, inputs, without_targets), timeout)
        except WorkerFailure:
            self._release(serial)
            raise
        if not _wait(finished, timeout):
            self._release(serial)
            raise WorkerFailure("timeout", f"the {self.side.role}'s call did not complete on the GPU")
        return Turn(
            reply,
            reply.number("t_ms") if reply.ok else 0.0,
            start.elapsed_time(end),
            came_late(reply, hold_from, hold_ms),
            held.elapsed_time(released),
        )

    def _release(self, serial: int) -> None:
        """Unblock the judge's stream (it waits for a done flag the worker never wrote)."""
        side_stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        cuda_driver.write_flag(side_stream, self.arena.tensors[FLAGS].data_ptr() + 4, serial)
        torch.cuda.synchronize()

    def changed_inputs(self, inputs: Sequence[torch.Tensor]) -> list[int]:
        """Positions of the inputs the last call changed in the side's buffers (one sent by value is
        the worker's own copy: nothing of the judge's to change)."""
        which = self.serial % self.sets
        lent = [k for k in range(self.count) if k not in self.by_value]
        return [k for k, now in zip(lent, self.inputs_in(which), strict=True) if not torch.equal(now, inputs[k])]

    def close(self) -> None:
        self.side.unmap(self.name)


def came_late(reply: Reply, hold_from: float, hold_ms: float) -> bool:
    """Whether the worker may have left the GPU waiting for its launches inside its events: it
    finished enqueuing after the hold by the shared monotonic clock (`hold_from` is when the judge
    enqueued the hold, which can run later), or it saw its start event already passed when it
    finished (a worker descheduled mid-call on a loaded host)."""
    if not reply.ok:
        return False
    return reply.number("enqueued") - hold_from > hold_ms / 1000.0 or reply.boolean("gpu_went_first", False)


def _event(timing: bool) -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=timing)  # type: ignore[no-untyped-call]


def _wait(event: torch.cuda.Event, timeout: float) -> bool:
    """Spin, then sleep, until `event` completes or `timeout` passes."""
    stall.expect(timeout)
    deadline = time.perf_counter() + timeout
    spins = 0
    while not event.query():  # type: ignore[no-untyped-call]
        if time.perf_counter() > deadline:
            return False
        spins += 1
        if spins > 10_000:
            time.sleep(0.0005)
    return True
