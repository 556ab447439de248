"""Is a task's reference a usable judge on its own inputs? Finite, not matched by a zeros kernel, not
matched by one constant output whatever the inputs: a task whose reference fails these accepts wrong
kernels (KernelBench issue #165: level-1 problems a zeros kernel passes).

    python3 -m aka.authoring.reference_probe TASK_DIR [--seeds N] [--device cuda]   (one JSON object)

Runs in its own process (the task's code is executed), on the CPU (`--device cuda` on a GPU, where a
problem's inputs outgrow the host's memory), from the task folder. `aka import
kernelbench` records its verdict per problem in the import report; `aka validate` can call
`probe_task` as one of its checks (the same `ProbeCheck` entries).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch

from aka.harness.compare import Output, compare_outputs, zeros_would_pass
from aka.harness.describe import load_kernel_task
from aka.harness.host_memory import available_bytes, host_allocation_failed
from aka.harness.task import KernelTask, exact_float32, make_case_inputs
from aka.harness.verify import nonfinite_reference

Status = Literal["PASS", "WARN", "FAIL"]
SECOND_SEED_OFFSET = 7919  # the correctness step's second seed (aka.harness.checks)
SEED_COUNT = 3
PROBE_TIMEOUT_S = 600.0
_RANK = {"PASS": 0, "WARN": 1, "FAIL": 2}


@dataclass(frozen=True)
class ProbeCheck:
    name: str
    status: Status
    message: str


@dataclass(frozen=True)
class ProbeResult:
    """One task's probe: the worst check's status, every check, how long it took."""

    status: Status
    checks: list[ProbeCheck]
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return {"status": self.status, "seconds": round(self.seconds, 3), "checks": [asdict(c) for c in self.checks]}


def _outputs(value: Output) -> list[torch.Tensor]:
    return [value] if isinstance(value, torch.Tensor) else [v for v in value if isinstance(v, torch.Tensor)]


def _like(expected: Output, fill: str) -> Output:
    """A stand-in output: NaN (floating outputs; zeros for the rest), or each tensor's first element
    everywhere (a constant kernel)."""

    def one(t: torch.Tensor) -> torch.Tensor:
        if fill == "nan" and t.is_floating_point():
            return torch.full_like(t, float("nan"))
        return torch.zeros_like(t) if fill != "first" or t.numel() == 0 else torch.full_like(t, t.reshape(-1)[0].item())

    return one(expected) if isinstance(expected, torch.Tensor) else tuple(one(t) for t in expected)


def probe_task(task: KernelTask, seeds: int = SEED_COUNT, device: torch.device | None = None) -> ProbeResult:
    """The reference on each case's seeds (the correctness step's first two, then more): finite, the
    same twice on the same inputs, not passed by zeros or NaN, not passed by a constant per element,
    not the same output for every seed."""
    started = time.monotonic()
    device = device or torch.device("cpu")
    exact_float32()  # as the judge computes its references
    checks: list[ProbeCheck] = []
    for case in task.cases_for("ci") or task.cases:
        case_seeds = [case.seed, case.seed + SECOND_SEED_OFFSET, *(case.seed + 104729 * k for k in range(2, seeds))]
        try:
            expected = [task.reference(*make_case_inputs(task, case, seed, device)) for seed in case_seeds[:seeds]]
            again = task.reference(*make_case_inputs(task, case, case_seeds[0], device))
        except Exception as exc:  # noqa: BLE001 - the task's own code failing is the finding
            if _out_of_memory(exc):
                checks.append(_did_not_fit(f"{case.id}: ", device, exc))
                continue
            checks.append(ProbeCheck("reference runs", "FAIL", f"{case.id}: {type(exc).__name__}: {exc}"[:500]))
            continue
        checks += _case_checks(task, case.id, expected, again)
    if not checks:
        checks.append(ProbeCheck("reference runs", "FAIL", "the task has no cases"))
    worst: Status = max((c.status for c in checks), key=_RANK.__getitem__)
    return ProbeResult(worst, checks, time.monotonic() - started)


def _out_of_memory(exc: BaseException) -> bool:
    return host_allocation_failed(exc) or isinstance(exc, torch.OutOfMemoryError)


def _did_not_fit(where: str, device: torch.device, exc: BaseException) -> ProbeCheck:
    message = f"{where}out of memory on {device.type} ({exc})"[:300] + (
        ": the problem's inputs and reference did not fit; not probed here (a limit of the machine, not a task defect)"
    )
    return ProbeCheck("reference runs", "WARN", message)


def _case_checks(task: KernelTask, case_id: str, expected: Sequence[Output], again: Output) -> list[ProbeCheck]:
    """`again`: the reference once more on the first seed's inputs."""
    problems = [p for p in (nonfinite_reference(e) for e in expected) if p is not None]
    if problems and not task.nonfinite_reference:
        return [ProbeCheck("finite", "FAIL", f"{case_id}: the reference is not finite: {problems[0]}")]
    checks = [ProbeCheck("finite", "PASS", f"{case_id}: {len(expected)} seeds")]
    tolerances = task.tolerances
    if not compare_outputs(again, expected[0], tolerances).correct:  # dropout in training mode, say
        return [
            *checks,
            ProbeCheck(
                "deterministic",
                "FAIL",
                f"{case_id}: two calls on the same inputs differ beyond the tolerance: no kernel can match it",
            ),
        ]
    checks.append(ProbeCheck("deterministic", "PASS", case_id))
    # the judge's own reading (no zeros copy of an output that may fill the GPU); an output with
    # nothing in it is matched by zeros too
    if all(zeros_would_pass(e, tolerances) or not any(t.numel() for t in _outputs(e)) for e in expected):
        checks.append(
            ProbeCheck(
                "zeros kernel rejected", "FAIL", f"{case_id}: an all-zeros output matches the reference on every seed"
            )
        )
    else:
        checks.append(ProbeCheck("zeros kernel rejected", "PASS", case_id))
    if all(compare_outputs(_like(e, "nan"), e, tolerances).correct for e in expected):
        checks.append(ProbeCheck("NaN kernel rejected", "FAIL", f"{case_id}: an all-NaN output matches the reference"))
    else:
        checks.append(ProbeCheck("NaN kernel rejected", "PASS", case_id))
    if all(t.numel() <= 1 for t in _outputs(expected[0])):  # one value: "inputs matter" is the check
        checks.append(ProbeCheck("constant kernel rejected", "PASS", f"{case_id}: n/a, one value per output"))
    elif all(compare_outputs(_like(e, "first"), e, tolerances).correct for e in expected):
        checks.append(
            ProbeCheck(
                "constant kernel rejected",
                "FAIL",
                f"{case_id}: near-constant: one value everywhere matches it on every seed (the judge stops on it)",
            )
        )
    else:
        checks.append(ProbeCheck("constant kernel rejected", "PASS", case_id))
    if len(expected) > 1 and all(compare_outputs(expected[0], e, tolerances).correct for e in expected[1:]):
        checks.append(
            ProbeCheck(
                "inputs matter",
                "WARN",
                f"{case_id}: the same output for every seed's inputs: a kernel returning a stored answer passes",
            )
        )
    else:
        checks.append(ProbeCheck("inputs matter", "PASS", case_id))
    return checks


def _load_task(task_dir: Path) -> KernelTask:
    task = load_kernel_task(task_dir)
    if task is None:
        raise ImportError("harness.py declares no KernelTask")
    return task


def memory_share(jobs: int = 1) -> int | None:
    """The host memory one of `jobs` probes at once may take: nine tenths of what is available,
    shared (None: unknown)."""
    available = available_bytes()
    return None if available is None else int(available * 0.9) // max(jobs, 1)


def probe_in_child(
    task_dir: Path,
    seeds: int = SEED_COUNT,
    timeout_s: float = PROBE_TIMEOUT_S,
    device: str = "cpu",
    memory_limit: int | None = None,
) -> ProbeResult:
    """`probe_task` on the task folder's harness.py in a child process (the task's code runs there).
    On the CPU the child's address space is capped (`memory_limit`, by default `memory_share()`):
    a problem too large for the host fails its allocation, a WARN, instead of waking the kernel's
    out-of-memory killer, which may stop another process than the probe."""
    started = time.monotonic()
    env = {**os.environ, "AKA_DEVICE": device}
    command = [sys.executable, "-m", "aka.authoring.reference_probe", str(task_dir), "--seeds", str(seeds)]
    if device == "cpu":
        env |= {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"}
        limit = memory_share() if memory_limit is None else memory_limit
        command += ["--memory-limit", str(limit or 0)]
    try:
        done = subprocess.run(
            [*command, "--device", device],
            cwd=task_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(
            "FAIL",
            [ProbeCheck("reference runs", "FAIL", f"no answer within {timeout_s:g} s")],
            time.monotonic() - started,
        )
    lines = done.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    if done.returncode == -signal.SIGKILL:  # the kernel's out-of-memory killer, as a rule: a limit of this machine
        gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        message = (
            f"the probe was killed by signal 9, most likely out of memory: the problem's inputs and reference "
            f"did not fit in this machine's {gib:.0f} GiB; not probed here (a limit of the machine, not a task "
            "defect): run `python3 -m aka.authoring.reference_probe TASK_DIR` on a larger one, or with `--device cuda`"
        )
        return ProbeResult("WARN", [ProbeCheck("reference runs", "WARN", message)], time.monotonic() - started)
    if done.returncode != 0 or not isinstance(data, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return ProbeResult(
            "FAIL",
            [ProbeCheck("reference runs", "FAIL", f"exit {done.returncode}: {tail}"[:500])],
            time.monotonic() - started,
        )
    checks = [ProbeCheck(str(c["name"]), c["status"], str(c["message"])) for c in data["checks"]]
    return ProbeResult(data["status"], checks, float(data["seconds"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m aka.authoring.reference_probe")
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("--seeds", type=int, default=SEED_COUNT)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where the inputs outgrow the host")
    parser.add_argument("--memory-limit", type=int, default=0, help="address space in bytes (0: none)")
    args = parser.parse_args(argv)
    if args.memory_limit > 0:  # above what is mapped already (torch's libraries)
        mapped = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = max(args.memory_limit, mapped + 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    task_dir = args.task_dir.resolve()
    sys.path.insert(0, str(task_dir))
    torch.manual_seed(0)
    device = torch.device(args.device)
    started = time.monotonic()
    try:
        task = _load_task(task_dir)  # an imported problem's cases are sized by calling get_inputs()
    except Exception as exc:
        if not _out_of_memory(exc):
            raise
        result = ProbeResult("WARN", [_did_not_fit("", device, exc)], time.monotonic() - started)
    else:
        result = probe_task(task, max(args.seeds, 1), device)
    sys.stdout.write(json.dumps(result.to_dict()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
