"""The judge's verdict on one call: what the worker delivered against what the reference says.

Everything that decides the verdict is here, in the judge: the expected output (computed by the
reference in the judge's process), the tolerances, the comparison, and the judge's own copy of
the inputs. From the worker it takes the bytes it copied into the judge's output buffers and its
description of what its function returned (type, shape, dtype, layout); a worker that lies
about these only makes its own output fail to match. Its guard findings (forbidden torch work,
no target kernel launched, persisting L2) are taken as they come: a first line of defence only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from aka.evaluation.wire import (
    CRASH,
    IMPOSSIBLE_SPEEDUP,
    INCORRECT,
    INFRA_ERROR,
    PERFORMANCE_ERROR,
    POLICY_VIOLATION,
    TAMPERING,
    TIMEOUT,
)
from aka.harness.compare import Output, Overrides, compare_outputs, tolerance_for
from aka.harness.link import ProtocolError, Reply

POLICY, IMPOSSIBLE, UNTIMEABLE, INFRA = POLICY_VIOLATION, IMPOSSIBLE_SPEEDUP, PERFORMANCE_ERROR, INFRA_ERROR
_SEVERITY = {TAMPERING: 4, POLICY: 3, IMPOSSIBLE: 2, CRASH: 1, TIMEOUT: 1, INCORRECT: 0, UNTIMEABLE: -1, INFRA: -2}
_FINDINGS = {"policy_violation": POLICY, "no_launch": POLICY, "persisting_l2": POLICY}


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str


class ProblemError(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def worst(problems: Sequence[Problem]) -> Problem | None:
    """Cheating outranks a wrong answer, so the reported kind is never the milder one."""
    return max(problems, key=lambda p: _SEVERITY.get(p.kind, 0), default=None)


def _described(reply: Reply) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    records = reply.records("outputs")
    if not records:
        raise ProtocolError("a call's answer describes no output", reply.side)
    return records[0], records[1:]


def _mismatch(meta: dict[str, Any], expected: torch.Tensor) -> str | None:
    """What the worker said it returned, against the expected tensor (None: it matched and was copied)."""
    if meta.get("type") != "Tensor":
        return f"output is a {str(meta.get('type'))[:40]}, expected a tensor"
    shape = meta.get("shape")
    if not isinstance(shape, list) or shape != list(expected.shape):
        shown = tuple(shape) if isinstance(shape, list) else shape
        return f"shape mismatch: got {shown}, expected {tuple(expected.shape)}"
    dtype = str(meta.get("dtype"))[:20]
    if dtype != str(expected.dtype).removeprefix("torch."):
        return f"dtype mismatch: got {dtype}, expected {str(expected.dtype).removeprefix('torch.')}"
    if meta.get("device") != expected.device.type:
        return f"device mismatch: got {str(meta.get('device'))[:10]}, expected {expected.device.type}"
    if meta.get("copied") is not True:
        return "the output was not delivered"
    return None


def delivered_problems(
    reply: Reply,
    snapshots: Sequence[torch.Tensor],
    expected: Output,
    tolerances: Overrides,
    changed_inputs: Sequence[int],
) -> list[Problem]:
    """Every problem of one call's delivered output (empty: correct)."""
    found = [
        Problem(_FINDINGS.get(f.partition(":")[0], POLICY), f.partition(":")[2].strip() or f)
        for f in reply.texts("findings")
    ]
    found += [Problem(INCORRECT, f"input {k} was modified by the candidate") for k in changed_inputs]
    container, metas = _described(reply)
    wanted = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    sequence = not isinstance(expected, torch.Tensor)
    if sequence and (container.get("container") not in ("tuple", "list") or container.get("count") != len(wanted)):
        found.append(
            Problem(
                INCORRECT, f"expected a sequence of {len(wanted)} tensors, got {str(container.get('container'))[:40]}"
            )
        )
        return found
    if not sequence and container.get("container") != "Tensor":
        found.append(Problem(INCORRECT, f"output is a {str(container.get('container'))[:40]}, expected a tensor"))
        return found
    if len(metas) != len(wanted):
        raise ProtocolError("a call's answer describes the wrong number of outputs", reply.side)
    for position, (meta, want) in enumerate(zip(metas, wanted, strict=True)):
        problem = _mismatch(meta, want)
        if problem is not None:
            found.append(Problem(INCORRECT, f"output {position}: {problem}" if sequence else problem))
            return found
        if meta.get("aliases_input") is True:
            found.append(Problem(INCORRECT, "the output shares memory with an input"))
    verdict = compare_outputs(snapshots[0] if not sequence else list(snapshots), expected, tolerances)
    if not verdict.correct:
        found.append(Problem(INCORRECT, verdict.message))
    else:
        for meta, want in zip(metas, wanted, strict=True):
            if want.is_contiguous() and meta.get("contiguous") is False:
                found.append(Problem(INCORRECT, f"output strides are not contiguous (shape {tuple(want.shape)})"))
    return found


def max_abs_error(snapshots: Sequence[torch.Tensor], expected: Output, tolerances: Overrides) -> float:
    got = snapshots[0] if isinstance(expected, torch.Tensor) else list(snapshots)
    return compare_outputs(got, expected, tolerances).max_abs_error or 0.0


def nonfinite_reference(expected: Output) -> str | None:
    """Where the reference itself is NaN or Inf (None: it is finite everywhere)."""
    for position, tensor in enumerate([expected] if isinstance(expected, torch.Tensor) else list(expected)):
        if tensor.dtype.is_floating_point and tensor.numel() and not bool(torch.isfinite(tensor).all()):
            count = int((~torch.isfinite(tensor)).sum().item())
            return f"output {position} of the reference holds {count} NaN/Inf value(s)"
    return None


__all__ = [
    "CRASH",
    "IMPOSSIBLE",
    "INCORRECT",
    "INFRA",
    "POLICY",
    "TAMPERING",
    "TIMEOUT",
    "UNTIMEABLE",
    "Problem",
    "ProblemError",
    "delivered_problems",
    "max_abs_error",
    "nonfinite_reference",
    "tolerance_for",
    "worst",
]
