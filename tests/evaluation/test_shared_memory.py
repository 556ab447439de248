"""The judge's arenas: what a worker maps is the judge's memory, with each input's layout kept."""

import collections
import os
from pathlib import Path

import pytest
import torch

from aka.harness import cuda_driver, turns
from aka.harness.link import Link, ProtocolError, Reply
from aka.harness.shared import Arena, OpenedArena, Slot
from aka.harness.task import HarnessError


def _opened(arena: Arena) -> OpenedArena:
    return OpenedArena.open(arena.descriptor(), [os.dup(fd) for fd in arena.fds])


def test_a_column_major_input_keeps_its_strides_and_its_memory_is_shared() -> None:
    b = torch.arange(12, dtype=torch.float32).reshape(4, 3).t()  # (3, 4), column-major
    arena = Arena.allocate(torch.device("cpu"), [Slot.like("b", b), Slot("out", (2,), torch.float16)])
    arena.tensors["b"].copy_(b)
    worker = _opened(arena)
    assert worker.tensors["b"].stride() == b.stride() == (1, 3)
    assert torch.equal(worker.tensors["b"], b)
    worker.tensors["out"].fill_(7)
    assert arena.tensors["out"].tolist() == [7.0, 7.0]
    worker.close()
    arena.close()


def test_an_expanded_input_is_lent_contiguous_and_fp8_travels() -> None:
    row = torch.arange(4, dtype=torch.float32).expand(3, 4)
    fp8 = torch.linspace(-2, 2, 16).to(torch.float8_e4m3fn).reshape(4, 4)
    arena = Arena.allocate(torch.device("cpu"), [Slot.like("row", row), Slot.like("fp8", fp8)])
    arena.tensors["row"].copy_(row)
    arena.tensors["fp8"].copy_(fp8)
    worker = _opened(arena)
    assert worker.tensors["row"].is_contiguous() and torch.equal(worker.tensors["row"], row)
    assert worker.tensors["fp8"].dtype == torch.float8_e4m3fn
    assert torch.equal(worker.tensors["fp8"].float(), fp8.float())
    worker.close()
    arena.close()


def test_a_cpu_arena_past_the_file_limit_is_several_memfds_back_to_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memfd is a file, bounded by the step's RLIMIT_FSIZE: a larger arena is several, mapped as
    one range on both sides (a tensor may straddle two of them)."""
    from aka.harness import shared

    monkeypatch.setattr(shared, "_file_limit", lambda: 64 * 1024 + 100)  # whole pages below it
    values = torch.arange(50_000, dtype=torch.float32)  # with "out": 368 000 bytes, six memfds
    arena = Arena.allocate(torch.device("cpu"), [Slot.like("x", values), Slot("out", (3, 7000), torch.float64)])
    assert len(arena.fds) == len(arena.chunks) == 6 and set(arena.chunks[:-1]) == {64 * 1024}
    arena.tensors["x"].copy_(values)
    worker = _opened(arena)
    assert torch.equal(worker.tensors["x"], values)
    worker.tensors["out"].fill_(2.5)
    assert bool((arena.tensors["out"] == 2.5).all())
    worker.close()
    arena.close()
    assert arena.fds == []
    monkeypatch.setattr(shared, "_file_limit", lambda: 4096)
    with pytest.raises(OSError, match="at most 32"):
        Arena.allocate(torch.device("cpu"), [Slot.like("x", values)])


def test_a_cpu_arena_outgrows_a_real_file_limit(tmp_path: Path) -> None:
    """Under a real RLIMIT_FSIZE of 1 MiB (the step's is 1 GiB), an arena of 5 MiB is made, shared
    and read back: one memfd that size failed `ftruncate` with EFBIG, and the judge's own failure
    was charged to the candidate as a crash."""
    import subprocess
    import sys

    script = (
        "import os, resource, torch\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20))\n"
        "try:\n"
        "    os.ftruncate(os.memfd_create('one'), 5 * 2**20)\n"
        "    raise SystemExit('one memfd grew past the limit')\n"
        "except OSError as exc:\n"
        "    assert exc.errno == 27, exc  # EFBIG\n"
        "from aka.harness.shared import Arena, OpenedArena, Slot\n"
        "x = torch.randn(5 * 2**18)\n"
        "arena = Arena.allocate(torch.device('cpu'), [Slot.like('x', x)])\n"
        "arena.tensors['x'].copy_(x)\n"
        "opened = OpenedArena.open(arena.descriptor(), [os.dup(fd) for fd in arena.fds])\n"
        "assert len(arena.fds) == 5 and torch.equal(opened.tensors['x'], x)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_worker_cannot_resize_the_judges_cpu_arena() -> None:
    """The memfds are sealed at their size: shrunk by the candidate's worker, the judge's next read
    of its own mapping would be a SIGBUS (its crash, charged to nobody it should be)."""
    x = torch.ones(4096)
    arena = Arena.allocate(torch.device("cpu"), [Slot.like("x", x)])
    for fd in arena.fds:
        for size in (0, 1 << 30):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size)
    arena.tensors["x"].copy_(x)
    assert float(arena.tensors["x"].sum()) == 4096.0
    arena.close()


def test_buffers_the_judge_cannot_make_are_its_own_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from aka.harness import shared

    def refuse(*_: object) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(shared.os, "memfd_create", refuse)

    class Side:
        def map(self, *_: object) -> None:
            raise AssertionError("never lent")

    x = torch.ones(8)
    with pytest.raises(HarnessError, match="could not make its shared buffers .* not of the candidate"):
        turns.CaseMemory(Side(), torch.device("cpu"), [x], x)  # type: ignore[arg-type]


def _gpu_with(monkeypatch: pytest.MonkeyPatch, free_gib: float) -> torch.device:
    monkeypatch.setattr(turns.torch.cuda, "mem_get_info", lambda device: (int(free_gib * 2**30), 141 * 2**30))
    monkeypatch.setattr(turns.torch.cuda, "memory_reserved", lambda device: 0)
    monkeypatch.setattr(turns.torch.cuda, "memory_allocated", lambda device: 0)
    monkeypatch.setattr(turns, "l2_cache_bytes", lambda device: 60 * 2**20)
    return torch.device("cuda", 0)


class _Sized:
    """A stand-in for a GPU tensor of `gib` GiB (only its size is read)."""

    def __init__(self, gib: float) -> None:
        self.count = int(gib * 2**30)

    def numel(self) -> int:
        return self.count

    def element_size(self) -> int:
        return 1


@pytest.mark.parametrize(("free_gib", "sets"), [(140.0, 2), (85.0, 1)])
def test_paired_buffers_take_two_input_sets_where_they_fit_and_one_where_only_that_does(
    monkeypatch: pytest.MonkeyPatch, free_gib: float, sets: int
) -> None:
    """A 6 GiB elementwise case (KernelBench 19_relu) on both sides of a paired case."""
    device = _gpu_with(monkeypatch, free_gib)
    assert turns.input_sets(device, [_Sized(6)], [_Sized(6)], 2, "paired-relu").sets == sets  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("free_gib", "placements"),
    [
        (170.0, turns.Placements(4, 4)),
        (135.0, turns.Placements(3, 3)),
        (100.0, turns.LEGACY),
        (85.0, turns.Placements(1, 1)),
    ],
)
def test_more_placements_are_taken_only_where_they_fit(
    monkeypatch: pytest.MonkeyPatch, free_gib: float, placements: turns.Placements
) -> None:
    """Asked for four input sets and four outputs per worker, a case takes fewer where the GPU
    has less room, down to the two-set default, then one."""
    device = _gpu_with(monkeypatch, free_gib)
    assert turns.input_sets(device, [_Sized(6)], [_Sized(6)], 2, "paired-relu", wanted=4) == placements  # type: ignore[list-item]


def test_the_worker_keeps_the_last_outputs_alive_so_the_next_lands_elsewhere() -> None:
    from aka.harness.worker import Worker

    worker = Worker.__new__(Worker)
    worker.kept = collections.deque()
    outputs = [object() for _ in range(5)]
    for output in outputs:
        worker._keep(output, {"keep": 3})
    assert list(worker.kept) == outputs[-2:]
    worker._keep(outputs[0], {})  # the default: nothing kept
    assert not worker.kept


def test_a_case_that_does_not_fit_is_the_harness_limit_not_the_candidates_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device = _gpu_with(monkeypatch, 40.0)
    with pytest.raises(HarnessError, match=r"paired-relu needs about .* GiB .* 40.0 GiB are free: a limit of this GPU"):
        turns.input_sets(device, [_Sized(6)], [_Sized(6)], 2, "paired-relu")  # type: ignore[list-item]
    assert turns.input_sets(torch.device("cpu"), [], [], 2, "anything") == turns.LEGACY


@pytest.mark.parametrize("gives_back", [True, False], ids=["gives its cache back", "keeps it"])
def test_a_case_that_does_not_fit_is_sized_again_after_the_worker_gives_its_cache_back(
    monkeypatch: pytest.MonkeyPatch, gives_back: bool
) -> None:
    """On an H100 beside a neighbour's hoard, an honest candidate's worker held 1.8 GiB of blocks
    its allocator kept from earlier cases, and the next case's buffers did not fit: judged
    `performance_error`. The judge asks the worker to give them back and sizes the case again; a
    worker that keeps them is measured as it is (the shortfall stands)."""
    free = {"gib": 40.0}
    _gpu_with(monkeypatch, 40.0)
    monkeypatch.setattr(turns.torch.cuda, "mem_get_info", lambda device: (int(free["gib"] * 2**30), 141 * 2**30))
    asked: list[str] = []

    class Side:
        def trim(self) -> None:
            asked.append("trim")
            if gives_back:
                free["gib"] = 100.0

    args = (torch.device("cuda", 0), [_Sized(6)], [_Sized(6)], 2, "paired-relu")
    if gives_back:
        assert turns.sized(Side(), *args) == turns.LEGACY  # type: ignore[arg-type]
    else:
        with pytest.raises(turns.MemoryShortfall, match="40.0 GiB are free"):
            turns.sized(Side(), *args)  # type: ignore[arg-type]
    assert asked == ["trim"]
    free["gib"] = 170.0
    assert turns.sized(Side(), *args) == turns.LEGACY  # type: ignore[arg-type]
    assert asked == ["trim"]  # a case that fits asks nothing


def test_the_worker_gives_back_its_kept_outputs_when_asked() -> None:
    from aka.harness.worker import Worker

    worker = Worker.__new__(Worker)
    worker.kept = collections.deque([object(), object()])
    worker.device = torch.device("cpu")
    assert worker.trim({"op": "trim"}, []) == {"ok": True}
    assert not worker.kept


def test_memory_the_candidate_took_after_loading_is_its_shortfall() -> None:
    gib = 2**30
    assert turns.candidate_took(None, None, 0, None) is None  # no candidate code ran: the GPU's limit
    assert turns.candidate_took(None, 100 * gib, 99 * gib + gib // 2, gib // 2) is None  # within its allowance
    blame = turns.candidate_took(None, 100 * gib, gib // 10, 100 * gib)
    assert blame is not None and "took 99.9 GiB" in blame
    assert turns.candidate_took(95 * gib, 100 * gib, gib, 99 * gib) is None  # the buffers never fit: not its doing
    assert turns.candidate_took(10 * gib, 100 * gib, gib, 99 * gib) is not None
    # the device's free memory fell by 99 GiB, but ending the worker gave back 0.3: a neighbour took it
    assert turns.candidate_took(None, 100 * gib, gib, 3 * gib // 10) is None
    # what ending it freed counts only up to the fall since it loaded (a neighbour freed memory then)
    blame = turns.candidate_took(None, 100 * gib, 98 * gib, 50 * gib)
    assert blame is not None and "took 2.0 GiB" in blame
    # a neighbour took 96 GiB while the worker's end gave back 2.6 (its context, a neighbour's exit):
    # two takers, the shared GPU's shortfall (on the H200 beside a 130 GiB hoard, session 41)
    assert turns.candidate_took(None, 100 * gib, gib // 2, 26 * gib // 10) is None
    assert turns.candidate_took(None, 100 * gib, gib // 2, 99 * gib) is not None  # it alone took it


def test_what_ending_a_worker_frees_is_read_until_it_settles() -> None:
    gib = 2**30

    class Worker:
        killed = False

        def kill(self) -> None:
            self.killed = True

    worker = Worker()
    # the driver gives the memory back over a few polls after the process ends
    readings = iter([gib, 40 * gib, 99 * gib, 99 * gib])

    def read() -> int:
        assert worker.killed, "read before the worker ended"
        return next(readings, 99 * gib)

    assert turns.memory_freed_by_ending(worker, read, gib) == 98 * gib  # type: ignore[arg-type]
    assert next(readings, None) is None
    assert turns.memory_freed_by_ending(Worker(), lambda: gib // 2, gib) == 0  # type: ignore[arg-type]


class _Side:
    def __init__(self, free_before_load: int | None, holds: int) -> None:
        self.free_before_load = self.host_before_load = free_before_load  # the GPU's, the host's
        self.holds = holds  # the memory its worker holds, given back when it is killed
        self.killed = False

    def kill(self) -> None:
        self.killed = True


class _Workers:
    def __init__(self, free_before_load: int | None, holds: int = 99 * 2**30) -> None:
        self.candidate = _Side(free_before_load, holds)
        self.baseline = None


_SHORTFALLS = {
    "judge's sizing": lambda: turns.MemoryShortfall("check-c needs about 3.0 GiB", 3 * 2**30),
    "caching allocator": lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB"),
    # a launch or cudaMalloc outside the caching allocator (seen on the H200 with hoards_the_gpu_memory)
    "CUDA runtime": lambda: torch.AcceleratorError("CUDA error: out of memory"),
    # the judge's shared buffers, made with the driver (seen on the H200 beside a hoarding exploit)
    "CUDA driver": lambda: cuda_driver._check("cuMemCreate", 2),
    # on the CPU: the judge's sizing against the host's memory, and its own allocations failing
    "judge's host sizing": lambda: turns.MemoryShortfall("check-c needs about 3072 MiB of host memory", 3 * 2**30),
    "judge's host allocation": lambda: MemoryError(),
    "torch's host allocator": lambda: RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to"),
}


@pytest.mark.parametrize("shortfall", sorted(_SHORTFALLS))
@pytest.mark.parametrize("free_before_load", [100 * 2**30, None])
@pytest.mark.parametrize("holds", [99 * 2**30, 2**28], ids=["its own", "a neighbour's"])
def test_a_step_short_of_memory_is_charged_to_the_candidate_only_when_it_took_it(
    monkeypatch: pytest.MonkeyPatch, free_before_load: int | None, shortfall: str, holds: int
) -> None:
    """The judge's step with 1 GiB left of a GPU (or a host) that had 100 free before the candidate
    loaded: the candidate's fault only where ending its worker gives the memory back (on the H200 a
    neighbour's hoard was taken for three candidates' while only the fall in free memory was read;
    on the CPU a candidate whose helpers filled the machine's memory was an `infra_error`, a dropped
    reward, on every attempt: red team, session 43)."""
    from aka.harness import runner
    from aka.harness.task import KernelTask, StepContext

    def short(*_: object) -> None:
        raise _SHORTFALLS[shortfall]()

    monkeypatch.setattr(runner, "set_up", lambda *_: None)
    monkeypatch.setattr(runner, "correctness_step", short)
    workers = _Workers(free_before_load, holds)
    side = workers.candidate

    def free(*_: object) -> int:  # the GPU's free memory or the host's: 1 GiB, and what the worker gives back
        return 2**30 + (side.holds if side.killed else 0)

    monkeypatch.setattr(runner, "free_gpu_bytes", free)
    monkeypatch.setattr(runner, "available_bytes", free)
    ctx = StepContext.from_env("correctness", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"})
    task = KernelTask(
        name="t", cases=[], make_inputs=lambda *_: (), reference=lambda: None, load_candidate=lambda directory: None
    )
    if free_before_load is None or holds < 2**30:  # no candidate code ran, or a neighbour took the memory
        with pytest.raises(HarnessError, match="out of (GPU |host )?memory"):
            runner.run_step(task, ctx, workers, Path("harness.py"))  # type: ignore[arg-type]
        return
    result = runner.run_step(task, ctx, workers, Path("harness.py"))  # type: ignore[arg-type]
    assert (result.status, result.failure_kind) == ("failed", "performance_error")
    assert "took 99.0 GiB" in (result.message or "") and side.killed
    if "host" in shortfall or shortfall == "judge's sizing":  # the step runs on the CPU: its sizing is the host's
        assert "of host memory" in (result.message or ""), result.message
    else:
        assert "of GPU memory" in (result.message or ""), result.message


def test_a_cuda_error_other_than_memory_stays_the_harnesss_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from aka.harness import runner
    from aka.harness.task import KernelTask, StepContext

    def broken(*_: object) -> None:
        raise torch.AcceleratorError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(runner, "set_up", lambda *_: None)
    monkeypatch.setattr(runner, "correctness_step", broken)
    ctx = StepContext.from_env("correctness", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"})
    task = KernelTask(
        name="t", cases=[], make_inputs=lambda *_: (), reference=lambda: None, load_candidate=lambda directory: None
    )
    with pytest.raises(torch.AcceleratorError, match="illegal memory access"):
        runner.run_step(task, ctx, _Workers(100 * 2**30), Path("harness.py"))  # type: ignore[arg-type]


def test_inputs_the_task_makes_on_the_cpu_go_by_value_and_the_rest_from_the_arena() -> None:
    """A GPU task's 0-dim `k` reaches the call as the CPU tensor the task made (lent in GPU memory,
    `int(k)` would wait for the GPU inside the call); the other inputs are the judge's buffers."""
    from aka.harness.worker import _inputs

    arena = {"in1_0": torch.arange(4.0), "in1_2": torch.ones(2)}
    k = torch.tensor(3)
    got = _inputs(arena, {"inputs": ["in1_0", None, "in1_2"], "values": {1: k}})
    assert got[0] is arena["in1_0"] and got[2] is arena["in1_2"]
    assert got[1].device.type == "cpu" and int(got[1]) == 3
    assert _inputs(arena, {"inputs": ["in1_0"]}) == [arena["in1_0"]]


def test_a_call_is_late_by_the_clock_or_by_the_gpu_having_started_before_its_enqueue_ended() -> None:
    def reply(enqueued: float, **extra: object) -> Reply:
        return Reply({"ok": True, "enqueued": enqueued, **extra})

    assert not turns.came_late(reply(10.0003, gpu_went_first=False), hold_from=10.0, hold_ms=0.4)
    assert turns.came_late(reply(10.0005, gpu_went_first=False), hold_from=10.0, hold_ms=0.4)  # after the hold
    assert turns.came_late(reply(10.0001, gpu_went_first=True), hold_from=10.0, hold_ms=0.4)  # the GPU went first
    assert not turns.came_late(reply(10.0001), hold_from=10.0, hold_ms=0.4)  # a CPU worker does not say
    assert not turns.came_late(Reply({"ok": False}), hold_from=10.0, hold_ms=0.4)  # a failed call is not timed
    with pytest.raises(ProtocolError):  # a worker that answers anything but a boolean broke the protocol
        turns.came_late(reply(10.0001, gpu_went_first="yes"), hold_from=10.0, hold_ms=0.4)


@pytest.mark.parametrize(
    ("free_before", "free_now", "holds", "neighbours"),
    [
        (100 * 2**30, 2**26, 2**28, r"other processes took 99\.7 GiB and its worker held 0\.2 GiB"),
        (100 * 2**30, 2**26, 99 * 2**30, None),
        (100 * 2**30, 50 * 2**30, 2**28, None),
        (2**29, 2**26, 2**28, r"it had 0\.50 GiB free before the candidate's code loaded and its worker held 0\.2"),
        (2**29, 2**26, 2 * 2**30, None),
    ],
    ids=[
        "a neighbour filled the GPU",
        "it filled the GPU itself",
        "the GPU has room: its own request",
        "full before its code loaded",
        "full before, but it holds more than its allowance",
    ],
)
@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: out of memory",
        # torch's allocator failing to build its out-of-memory message on a full GPU (H200, session 41)
        'loading the candidate failed: RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/pytorch/c10/'
        'cuda/CUDACachingAllocator.cpp"',
    ],
    ids=["out of memory", "NVML assert"],
)
def test_a_candidate_short_of_gpu_memory_is_excused_only_when_others_filled_the_gpu(
    monkeypatch: pytest.MonkeyPatch, free_before: int, free_now: int, holds: int, neighbours: str | None, message: str
) -> None:
    """The candidate's own load or call ran out of GPU memory (its message says so, which it could
    forge): the harness's fault only where the GPU is full, ending its worker gives back little and
    others took the rest since it loaded (on the H200 beside a hoarding evaluation, a candidate's
    import failed and was judged `incorrect`), or the GPU was already full before its code loaded
    (on an H100 beside a neighbour's 74 GiB, an import judged `compile_error`)."""
    import dataclasses

    from aka.harness import runner
    from aka.harness.report import CaseResult, StepResult
    from aka.harness.task import Case, KernelTask, StepContext

    case = Case("n1", {})
    failed = StepResult("correctness", "failed", "1 of 1 cases wrong", [CaseResult(case, False, message=message)])
    monkeypatch.setattr(runner, "set_up", lambda *_: None)
    monkeypatch.setattr(runner, "correctness_step", lambda *_: failed)
    workers = _Workers(free_before, holds)
    side = workers.candidate
    monkeypatch.setattr(runner, "free_gpu_bytes", lambda device: free_now + (side.holds if side.killed else 0))
    ctx = StepContext.from_env("correctness", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"})
    ctx = dataclasses.replace(ctx, device=torch.device("cuda"))
    task = KernelTask(
        name="t", cases=[], make_inputs=lambda *_: (), reference=lambda: None, load_candidate=lambda directory: None
    )
    if neighbours:
        with pytest.raises(HarnessError, match=neighbours):
            runner.run_step(task, ctx, workers, Path("harness.py"))  # type: ignore[arg-type]
        return
    assert runner.run_step(task, ctx, workers, Path("harness.py")) is failed  # type: ignore[arg-type]
    assert side.killed == (free_now < 2**30)  # a GPU with room: nothing to measure, its worker left alone


@pytest.mark.parametrize(
    "answer",
    [b"[" * 100_000 + b"]" * 100_000, b'{"ok": true, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b"\xff", b"NaN"],
    ids=["nested past the parser", "nested inside an answer", "not text", "a bare constant"],
)
def test_an_answer_no_parser_reads_is_tampering_not_a_crash(answer: bytes) -> None:
    """A red team's worker answered with JSON nested 5,000 deep: the parser's RecursionError
    ended the judge (`crash`, score 20) where a malformed answer is `tampering` (score 0)."""
    judge, theirs = Link.pair()
    worker = Link(theirs)
    try:
        worker.send_bytes(answer)
        with pytest.raises(ProtocolError) as raised:
            judge.receive_reply(5.0)
        assert raised.value.kind == "tampering"
    finally:
        judge.close()
        worker.close()


def test_a_judge_whose_gpu_is_full_before_candidate_code_ran_is_the_platforms_fault() -> None:
    """On an H100, beside another evaluation's candidate that held 76 GiB, three neighbours'
    compile steps failed in the judge's first CUDA call (`mem_get_info`: out of memory) before
    their candidates' code loaded, and were charged `compile_error`. The judge never runs candidate
    code, so its own out-of-memory before the load is another process's doing: `infra_error`
    (exit TASK_FAULT), judged again. Once candidate code has run, or for any other error, it stays
    the step's (HARNESS_BUG, charged like a crash)."""
    from types import SimpleNamespace

    from aka.harness import runner

    def raised(error: BaseException) -> BaseException:
        try:
            try:
                raise error
            except BaseException as inner:
                raise RuntimeError("during the load") from inner
        except BaseException as outer:
            return outer

    full = raised(torch.AcceleratorError("CUDA error: out of memory"))
    illegal = raised(torch.AcceleratorError("CUDA error: an illegal memory access was encountered"))
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    unloaded = SimpleNamespace(candidate=SimpleNamespace(loaded=False))
    loaded = SimpleNamespace(candidate=SimpleNamespace(loaded=True))
    assert runner._gpu_full_before_candidate_code(full, gpu, unloaded)  # type: ignore[arg-type]
    assert runner._gpu_full_before_candidate_code(full, gpu, None)  # workers not even started
    assert runner._gpu_full_before_candidate_code(raised(torch.OutOfMemoryError("x")), gpu, unloaded)  # type: ignore[arg-type]
    assert not runner._gpu_full_before_candidate_code(full, gpu, loaded)  # type: ignore[arg-type]
    assert not runner._gpu_full_before_candidate_code(illegal, gpu, unloaded)  # type: ignore[arg-type]
    assert not runner._gpu_full_before_candidate_code(full, cpu, unloaded)  # type: ignore[arg-type]
    assert not runner._gpu_full_before_candidate_code(full, None, unloaded)  # type: ignore[arg-type]


def test_a_sides_calls_go_through_the_allocation_shifts_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """With shifts on, each call asks its worker for the next shift (the same on both sides of a
    pair: their memories count calls alike), checked and timed calls alike; a CPU worker makes no
    blocks. Off (the default), every call asks for none."""
    from aka.harness.worker import shift_blocks

    monkeypatch.setattr(turns, "ALLOCATION_SHIFTS", 8)  # AKA_ALLOCATION_SHIFTS=8
    memory = turns.CaseMemory.__new__(turns.CaseMemory)
    memory.name, memory.outputs, memory.count, memory.by_value = "case", ["out0"], 1, frozenset()
    memory.sets, memory.placements = 2, turns.LEGACY
    shifts: list[int] = []
    for serial in range(1, 2 * 2 * turns.ALLOCATION_SHIFTS + 1):
        memory.serial = serial
        shifts.append(int(memory._request(serial % 2, 0, None, False, [torch.zeros(1)])["shift"]))  # type: ignore[call-overload]
    assert sorted(set(shifts)) == list(range(turns.ALLOCATION_SHIFTS))
    assert shifts[:4] == [0, 1, 1, 2]  # two input sets: each shift meets both
    assert shift_blocks(3, torch.device("cpu")) == []
    monkeypatch.setattr(turns, "ALLOCATION_SHIFTS", 1)
    assert memory._request(0, 0, None, False, [torch.zeros(1)])["shift"] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_a_calls_own_temporaries_land_elsewhere_under_each_shift() -> None:
    """The temporaries a call allocates (small and large) start at a new address under each shift,
    where without one the allocator hands the same block back every call."""
    from aka.harness.worker import shift_blocks

    device = torch.device("cuda")
    for size in (4096, 3 * 2**20):
        seen = set()
        for shift in range(8):
            held = shift_blocks(shift, device)
            seen.add(torch.empty(size, dtype=torch.uint8, device=device).data_ptr())
            del held
        assert len(seen) == 8, size
        unshifted = {torch.empty(size, dtype=torch.uint8, device=device).data_ptr() for _ in range(4)}
        assert len(unshifted) == 1


def test_the_allocation_shifts_setting_reaches_the_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """`AKA_ALLOCATION_SHIFTS` is passed to the step processes (the judge reads it there); a bad
    value is the default (off), and the count is capped."""
    from aka.evaluation.step_spec import PASSED_THROUGH
    from aka.evaluation.wire import ENV_ALLOCATION_SHIFTS, allocation_shifts

    assert ENV_ALLOCATION_SHIFTS in PASSED_THROUGH
    for raw, shifts in (("8", 8), ("", 1), ("eight", 1), ("0", 1), ("1000", 64)):
        monkeypatch.setenv(ENV_ALLOCATION_SHIFTS, raw)
        assert allocation_shifts() == shifts, raw
