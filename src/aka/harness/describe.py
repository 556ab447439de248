"""What the judge checks and how it times, in words, from a task's real configuration: the part
of an agent's prompt that no task restates by hand (a restated timing method drifts from the
harness; eleven of the suite's prompts had)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from aka.harness.cases import Case
from aka.harness.compare import tolerance_for
from aka.harness.task import KernelTask, expected_output, make_case_inputs, policy_applies

HARNESS_FILE = "harness.py"
CPU = torch.device("cpu")


def load_kernel_task(task_dir: Path) -> KernelTask | None:
    """The `KernelTask` a pristine task's `harness.py` declares (None for a task without one)."""
    path = task_dir / HARNESS_FILE
    if not path.is_file() or "run_task(" not in path.read_text(encoding="utf-8", errors="replace"):
        return None
    name = f"_aka_described_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(task_dir))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(task_dir))
    return next((value for value in vars(module).values() if isinstance(value, KernelTask)), None)


def _case_dtype(case: Case) -> torch.dtype | None:
    try:
        return case.dtype()
    except (KeyError, TypeError, ValueError):
        return None


def output_dtypes(task: KernelTask) -> list[torch.dtype]:
    """The dtypes the judge compares, which its tolerances are by: the reference's outputs on the
    small CI cases, on the CPU (a loss is float32 whatever the logits); a full case's own dtype
    where no CI case shares it, or where the reference does not run on the CPU."""
    found: list[torch.dtype] = []
    seen_inputs: set[torch.dtype | None] = set()
    for case in task.ci_cases:
        try:
            outputs = expected_output(task, make_case_inputs(task, case, case.seed, CPU), CPU)
        except Exception:  # noqa: BLE001 - a reference that needs a GPU: fall back to the cases' dtypes
            break
        seen_inputs.add(_case_dtype(case))
        found += [o.dtype for o in ([outputs] if isinstance(outputs, torch.Tensor) else list(outputs))]
    found += [d for case in task.cases if (d := _case_dtype(case)) is not None and d not in seen_inputs]
    return [d for i, d in enumerate(found) if d not in found[:i]]


def _number(value: float) -> str:
    """1e-3, 1.6e-2, 0: as task authors write tolerances."""
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def judging_notes(task: KernelTask, family: str, gpu: bool) -> list[str]:
    """Markdown lines: correctness (seeds, distributions, tolerances per dtype), the policy, timing."""
    tolerances = [
        f"{str(d).removeprefix('torch.')} atol {_number(t.atol)} / rtol {_number(t.rtol)}"
        for d in output_dtypes(task)
        if d.is_floating_point
        for t in [tolerance_for(d, task.tolerances)]
    ]
    lines = [
        "- Correctness: every case, on three seeds (one drawn at evaluation time) and two input "
        "distributions; every output of every call, timed calls included, is compared element by element "
        "with the PyTorch reference: |got - expected| <= atol + rtol * |expected|, NaN and Inf only where "
        "the reference has them, the same dtype and shape, contiguous where the reference is."
        + (f" Tolerances: {'; '.join(tolerances)}; integer outputs exactly." if tolerances else ""),
        "- Your function must not modify its inputs, and its output must not share memory with them.",
    ]
    if policy_applies(family):
        allowed = f" (also allowed here: {', '.join(sorted(task.allowed_torch_ops))})" if task.allowed_torch_ops else ""
        if task.forbidden_torch_ops:
            allowed += f" (not allowed here, the copy being the work: {', '.join(sorted(task.forbidden_torch_ops))})"
        lines.append(
            "- The work must be done by your kernels: torch operators beyond allocation, views, copies and "
            f"fills are rejected{allowed} (an operator of your own made with torch.library among them: launch "
            "your kernels directly), and each target kernel must be launched in every call."
        )
    if gpu:
        budget = task.paired.for_cases(len(task.cases))
        lines.append(
            "- Timing: per case, your code and the baseline run in two separate processes and are called in turn "
            "(pairs, alternating which goes first), on freshly drawn inputs for every pair, with the L2 cache "
            "flushed before every call; each call is timed by CUDA events, bounded by the judge's own clock. "
            "A case's speedup is the trimmed mean of the per-pair time ratios (baseline / yours) with a 95% "
            f"interval, from up to {budget.budget_s:.2g} s of pairs; the task's speedup is the mean over its cases. "
            "A time below the case's speed-of-light floor (its bytes at the memory's peak) is rejected."
        )
    else:
        lines.append(
            "- Timing: this machine has no GPU. Triton kernels run in its interpreter on small cases, "
            "so times and speedups here are a smoke test only; the GPU's evaluation decides."
        )
    lines.append(
        "- Run the step commands above by hand to check your work: each prints its report and a one-line "
        "verdict, and exits 1 when the step fails."
    )
    return lines
