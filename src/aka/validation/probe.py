"""`python -m aka.validation.probe PROFILE [HELDOUT_PROFILE]`, run in a copy of a task: what the
validator needs to know from the task's own `KernelTask`, printed as one JSON line.

It runs the task's code (never a candidate's), in a process of its own, so a reference that
hangs or crashes is reported with the command's exit status instead of taking the validator
down. For every case of the profile and every input set the correctness step draws (the case's
seeds and distributions, `aka.harness.checks.check_plan`), the inputs and the reference are
computed twice: both must be bit-identical, and the reference finite (unless the task declares
`nonfinite_reference`) and not matched by an all-zeros output on every input set of a case. It
also reports the output and input shapes (which mutants apply) and the tolerance of each
floating dtype (how far `beyond_tolerance` moves an output).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import torch

from aka.harness.cases import Case, input_distribution
from aka.harness.checks import check_plan
from aka.harness.compare import tolerance_for, zeros_would_pass
from aka.harness.task import KernelTask, expected_output, heldout_cases, make_case_inputs
from aka.harness.verify import nonfinite_reference

EVAL_SEED = 20261202  # the evaluation-time seed stands in as a fixed one: the probe must repeat
FLOAT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [v for v in value if isinstance(v, torch.Tensor)] if isinstance(value, tuple | list) else []


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Bit-identical, NaN where NaN."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.is_floating_point:
            if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _describe(tensors: list[torch.Tensor]) -> list[dict[str, Any]]:
    return [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")} for t in tensors]


def check_cases(task: KernelTask, cases: list[Case], device: torch.device) -> dict[str, Any]:
    problems: list[str] = []
    described: list[dict[str, Any]] = []
    for case in cases:
        zeros_match = True
        for seed, distribution in check_plan(case, EVAL_SEED):
            where = f"case {case.id}, seed {seed}, {distribution}"
            with input_distribution(distribution):
                inputs = make_case_inputs(task, case, seed, device)
                again = make_case_inputs(task, case, seed, device)
            if not _same(list(inputs), list(again)):
                problems.append(f"{where}: make_inputs is not deterministic for a fixed seed")
            first = _tensors(expected_output(task, inputs, device))
            second = _tensors(expected_output(task, inputs, device))
            if not _same(first, second):
                problems.append(f"{where}: the reference gave different outputs on the same inputs")
            bad = None if task.nonfinite_reference else nonfinite_reference(first)
            if bad is not None:
                problems.append(f"{where}: {bad}")
            zeros_match = zeros_match and zeros_would_pass(tuple(first), task.tolerances)
            if distribution == "normal" and seed == case.seed:
                described.append({"case": case.id, "outputs": _describe(first), "inputs": _describe(list(inputs))})
        if zeros_match:  # the judge stops on such a case as the task's defect (aka.harness.checks)
            problems.append(f"case {case.id}: an all-zeros output matches the reference on every input set")
    return {"cases": len(cases), "checks": 3 * len(cases), "problems": problems, "shapes": described}


def load_task(path: Path) -> KernelTask:
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("_aka_validated_harness", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = getattr(module, "TASK", None)
    if not isinstance(task, KernelTask):
        raise SystemExit(f"{path.name} defines no TASK (an aka.harness KernelTask)")
    return task


def main(argv: list[str]) -> int:
    profile, heldout_profile = argv[0], argv[1] if len(argv) > 1 else None
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    task = load_task(Path.cwd() / "harness.py")
    result: dict[str, Any] = {
        "task": task.name,
        "tolerances": {
            str(d).removeprefix("torch."): list(vars(tolerance_for(d, task.tolerances)).values()) for d in FLOAT_DTYPES
        },
        "cases": check_cases(task, list(task.cases_for(profile)), device),
    }
    if heldout_profile:
        try:
            held = list(heldout_cases(heldout_profile, Path.cwd()))
        except Exception as exc:  # the file's own fault, reported as the check's evidence
            result["heldout"] = {"cases": 0, "checks": 0, "problems": [f"{type(exc).__name__}: {exc}"], "shapes": []}
        else:
            result["heldout"] = check_cases(task, held, device)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
