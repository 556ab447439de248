"""The judge's own host memory on the CPU: budgeted before any call, and a shortfall is an infra
error with the sizes, never the candidate's failure (a real step under a real address-space limit)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aka.evaluation.wire import StepExit
from aka.harness import HarnessError, KernelTask, StepContext, host_memory
from aka.harness.sides import StepWorkers

HARNESS = textwrap.dedent("""
    import torch
    from aka.harness import Case, KernelTask, run_task

    CASE = Case.make(n=N)

    def make_inputs(case, generator, device):
        return (torch.randn(case.int_param("n"), generator=generator, device=device),)

    TASK = KernelTask(name="big_copy", cases=[CASE], make_inputs=make_inputs, reference=lambda x: x * 2,
                      load_candidate=lambda directory: (lambda x: x * 2))

    if __name__ == "__main__":
        raise SystemExit(run_task(TASK))
    """)
# The step under an address-space limit this far above what the process holds once torch is in:
# what `step_limits` does to a CPU step, made small.
LIMITED = textwrap.dedent("""
    import resource, runpy, sys
    import torch  # noqa: F401  (the judge's baseline, counted before the limit)
    room = int(sys.argv[1])
    used = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (used + room, used + room))
    sys.argv = ["harness.py", "correctness"]
    runpy.run_path("harness.py", run_name="__main__")
    """)
ELEMENTS = 8 * 2**20  # 32 MiB per float32 tensor


def _step(tmp_path: Path, room: int) -> subprocess.CompletedProcess[str]:
    (tmp_path / "harness.py").write_text(HARNESS.replace("N)", f"{ELEMENTS})"))
    (tmp_path / "limited.py").write_text(LIMITED)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "AKA_DEVICE": "cpu",
        "AKA_TASK_FAMILY": "e2e",
        "AKA_CASE_PROFILE": "full",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
    }
    return subprocess.run(
        [sys.executable, "limited.py", str(room)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_comparison_chunk_shrinks_to_the_budget() -> None:
    assert host_memory.comparison_chunk(10**9, budget=None) >= host_memory.MIN_CHUNK
    assert host_memory.comparison_chunk(10**9, budget=40 * 4 * 2**20) == 2**20
    assert host_memory.comparison_chunk(10**9, budget=1) == host_memory.MIN_CHUNK
    assert host_memory.comparison_chunk(10**9, budget=2**40) == host_memory.MAX_CHUNK
    assert host_memory.case_need(100, 10, 5, sides=2, sets=2) == 2 * (200 + 10) + 20 + 5 * 40


def test_available_bytes_reads_the_machine() -> None:
    available = host_memory.available_bytes()
    assert available is None or available > 0


@pytest.mark.skipif((host_memory.available_bytes() or 0) < 2**30, reason="needs 1 GiB of free memory")
def test_a_case_that_does_not_fit_is_an_infra_error_not_the_candidates(tmp_path: Path) -> None:
    fits = _step(tmp_path, 1024 * 2**20)
    assert fits.returncode == StepExit.REPORTED and "correctness: PASS" in fits.stderr, fits.stderr[-2000:]
    short = _step(tmp_path, 170 * 2**20)  # the live inputs and expected fit; the arena and snapshots do not
    assert short.returncode == StepExit.TASK_FAULT, short.stderr[-3000:]
    assert "host memory" in short.stderr and "not of the candidate" in short.stderr, short.stderr[-3000:]
    assert "FAIL" not in short.stderr


ALLOCATOR_FAILED = "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to ..."


@pytest.mark.parametrize("error", [MemoryError(), RuntimeError(ALLOCATOR_FAILED)])
def test_the_judges_own_failed_allocation_is_a_harness_error(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    from aka.harness import runner

    def short(*_: object) -> None:
        raise error

    monkeypatch.setattr(runner, "correctness_step", short)
    ctx = StepContext.from_env("correctness", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"})
    task = KernelTask(
        name="t", cases=[], make_inputs=lambda *_: (), reference=lambda: None, load_candidate=lambda directory: None
    )
    with pytest.raises(HarnessError, match="host memory .* not of the candidate"):
        runner.run_step(task, ctx, StepWorkers(Path(".")), Path("harness.py"))
    monkeypatch.setattr(runner, "correctness_step", lambda *_: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        runner.run_step(task, ctx, StepWorkers(Path(".")), Path("harness.py"))


HOARDS_AT_IMPORT = textwrap.dedent("""
    import torch
    from aka.harness import Case, KernelTask, candidate_function

    HOARD = torch.ones(2**30)  # 4 GiB, every page written: the machine's available memory falls
    TASK = KernelTask(name="hoard", cases=[Case.make(n=1)], make_inputs=lambda *_: (), reference=lambda: None,
                      load_candidate=candidate_function("kernel", "f"))
    """)


@pytest.mark.skipif((host_memory.available_bytes() or 0) < 10 * 2**30, reason="needs 10 GiB of free memory")
def test_what_a_worker_held_of_the_hosts_memory_is_read_by_ending_it(tmp_path: Path) -> None:
    """The reading a host shortfall is judged by (`runner._short_of_memory`): a real worker that
    holds 4 GiB gives it back to the machine when the judge ends it: well over the 1 GiB a candidate
    may hold (`turns.CANDIDATE_MEMORY_ALLOWANCE`). On this repository's CPU machine (a VM) the
    machine's available memory moved by about 1 GiB less than the hoard, both ways (3.0-3.3 GiB
    for 4 GiB written), so the reading is the lower bound it is meant to be."""
    from aka.harness.remote import RemoteSide
    from aka.harness.turns import memory_freed_by_ending

    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "harness.py").write_text(HOARDS_AT_IMPORT)
    side = RemoteSide("candidate", "cpu", tmp_path / "home", None, dict(os.environ))
    try:
        side.setup(tmp_path / "task", "harness.py", "hoard", "cpu", "off", [], [], [], 120.0)
        now = host_memory.available_bytes() or 0
        freed = memory_freed_by_ending(side, lambda: host_memory.available_bytes() or 0, now)
        assert not side.alive()
        assert 2 * 2**30 < freed < 6 * 2**30, freed / 2**30  # its 4 GiB (other tests' memory moves too)
    finally:
        side.close()
