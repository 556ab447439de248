"""Rule-generated held-out cases for a task whose author wrote none (no hidden `heldout.py`).

From each of the task's own cases, every integer size parameter is varied by one rule at a time:
scaled up (x2) and down (/2), made odd, made the next prime, and misaligned (+3, off every power of
two above 2). Each new case is checked on the reference first, in a child process (the task's code
runs there): its inputs are made and the reference runs and is finite, in bounded time and memory;
one whose inputs are identical to an original case's is dropped. Which were generated and which
were rejected, and why, is recorded.

    python3 -m aka.heldout.generate TASK_DIR PROFILE   (prints one JSON object)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from aka.device import CPU_MODEL, DeviceInfo
from aka.evaluation.device_lock import run_sharing_device
from aka.harness.cases import Case, Param, case_id
from aka.harness.compare import zeros_would_pass
from aka.harness.describe import load_kernel_task
from aka.harness.task import KernelTask, make_case_inputs
from aka.harness.verify import nonfinite_reference

CPU_DEVICE = DeviceInfo("cpu", CPU_MODEL, "cpu", None, 0)

RULES = ("scaled_up", "scaled_down", "odd", "prime", "misaligned")
NOT_SIZES = frozenset({"seed"})
MAX_GROWTH = 8  # a generated case may hold at most this many times the largest original case's input bytes
CASE_SECONDS = 60.0
GENERATE_TIMEOUT_S = 900.0
SEED_OFFSET = 1_000_003  # generated cases draw other inputs than any original case


def _next_prime(value: int) -> int:
    candidate = max(value + 1, 2)
    while any(candidate % d == 0 for d in range(2, int(candidate**0.5) + 1)):
        candidate += 1
    return candidate


def vary(rule: str, value: int) -> int:
    return {
        "scaled_up": value * 2,
        "scaled_down": max(value // 2, 1),
        "odd": value | 1,
        "prime": _next_prime(value),
        "misaligned": value + 3,
    }[rule]


def size_params(case: Case) -> list[str]:
    return [
        k
        for k, v in case.params.items()
        if isinstance(v, int) and not isinstance(v, bool) and v > 1 and k not in NOT_SIZES
    ]


def candidates(cases: Sequence[Case]) -> list[tuple[str, str, Case]]:
    """(rule, origin case id, new case) for every rule and size parameter of every case."""
    found: list[tuple[str, str, Case]] = []
    for case in cases:
        for key in size_params(case):
            for rule in RULES:
                value = case.params[key]
                assert isinstance(value, int)
                params: dict[str, Param] = {**case.params, key: vary(rule, value)}
                if params != dict(case.params):
                    ident = case_id(params)
                    seed = zlib.crc32(ident.encode()) + SEED_OFFSET
                    found.append((f"{rule}:{key}", case.id, Case(ident, params, seed)))
    return found


@dataclass
class Generated:
    """What a task's generation produced: the accepted cases (as `Case` constructor arguments)
    and the rejected ones with why."""

    accepted: list[dict[str, object]] = field(default_factory=list)
    rejected: list[dict[str, object]] = field(default_factory=list)
    origin_cases: list[str] = field(default_factory=list)
    error: str | None = None


def _nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def generate(task: KernelTask, profile: str, device: torch.device) -> Generated:
    """Every candidate of `task.cases_for(profile)`, checked on the reference."""
    originals = list(task.cases_for(profile))
    result = Generated(origin_cases=[c.id for c in originals])
    original_inputs = [make_case_inputs(task, c, c.seed, device) for c in originals]
    largest = max((_nbytes(i) for i in original_inputs), default=0)
    seen = {c.id for c in originals}
    for rule, origin, case in candidates(originals):
        record: dict[str, object] = {
            "id": case.id,
            "params": dict(case.params),
            "seed": case.seed,
            "rule": rule,
            "from": origin,
        }
        reason = None
        if case.id in seen:
            reason = "the same case as one already kept or an original"
        else:
            reason = _check(task, case, device, largest, original_inputs)
        seen.add(case.id)
        (result.rejected if reason else result.accepted).append({**record, **({"reason": reason} if reason else {})})
    return result


def _check(
    task: KernelTask, case: Case, device: torch.device, largest: int, original_inputs: Sequence[Sequence[torch.Tensor]]
) -> str | None:
    started = time.monotonic()
    try:
        inputs = make_case_inputs(task, case, case.seed, device)
        if largest and _nbytes(inputs) > MAX_GROWTH * largest:
            return f"inputs of {_nbytes(inputs)} bytes: over {MAX_GROWTH}x the largest original case's"
        if any(
            len(o) == len(inputs) and all(a.shape == b.shape for a, b in zip(o, inputs, strict=True))
            for o in original_inputs
        ):
            return "its inputs have the shapes of an original case's (the parameter does not size them)"
        expected = task.reference(*(t.clone() for t in inputs))
    except Exception as exc:  # noqa: BLE001 - the reference refusing the size is the finding
        return f"the reference fails on it: {type(exc).__name__}: {exc}"[:300]
    problem = None if task.nonfinite_reference else nonfinite_reference(expected)
    if problem is not None:
        return f"the reference is not finite on it: {problem}"
    if zeros_would_pass(expected, task.tolerances):
        return "an all-zeros output matches the reference on it within tolerance (it would tell no wrong kernel)"
    if time.monotonic() - started > CASE_SECONDS:
        return f"the reference took over {CASE_SECONDS:g} s"
    return None


def heldout_source(generated: Generated) -> str:
    """A `heldout.py` holding the accepted cases as `CASES` (and `CI_CASES`)."""
    lines = [
        f"    Case({c['id']!r}, {c['params']!r}, seed={c['seed']}),  # {c['rule']} of {c['from']}"
        for c in generated.accepted
    ]
    return (
        '"""Held-out cases generated by `aka heldout` from the task\'s own cases and checked on its reference '
        '(aka.heldout.generate)."""\n\nfrom aka.harness import Case\n\nCASES = [\n'
        + "\n".join(lines)
        + "\n]\nCI_CASES = CASES\n"
    )


def _load_task(task_dir: Path) -> KernelTask:
    task = load_kernel_task(task_dir)
    if task is None:
        raise ImportError("harness.py declares no KernelTask (only aka.harness tasks get generated cases)")
    return task


def generate_in_child(
    task_dir: Path, profile: str, device: DeviceInfo = CPU_DEVICE, timeout_s: float = GENERATE_TIMEOUT_S
) -> Generated:
    """`generate` on the task folder's harness.py in a child process (on `device`, the CPU by
    default; a GPU held shared, never beside a timed step); a failure is recorded, not raised."""
    on = "cuda" if device.is_gpu else "cpu"
    env = {**os.environ, "AKA_DEVICE": on, "TRITON_INTERPRET": "1" if on == "cpu" else ""}
    argv = [sys.executable, "-m", "aka.heldout.generate", str(task_dir), profile, on]
    try:
        done = run_sharing_device(device, argv, task_dir, env, timeout_s)
    except subprocess.TimeoutExpired:
        return Generated(error=f"generation took over {timeout_s:g} s")
    lines = done.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines and done.returncode == 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Generated(error=f"exit {done.returncode}: {tail}"[:500])
    return Generated(**data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m aka.heldout.generate")
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("profile", choices=("full", "ci"))
    parser.add_argument("device", nargs="?", default="cpu")
    args = parser.parse_args(argv)
    task_dir = args.task_dir.resolve()
    sys.path.insert(0, str(task_dir))
    result = generate(_load_task(task_dir), args.profile, torch.device(args.device))
    sys.stdout.write(json.dumps(asdict(result)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
