"""One candidate call and everything that must hold after it.

After every checked or timed call (and a full device synchronize, so no stream escapes): the
output matches the reference within tolerance, with the right dtype, shape and layout; the inputs
are bit-for-bit unchanged; the output shares no memory with the inputs; no forbidden torch work
ran; a target kernel was launched; the persisting-L2 carve-out is still zero.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from aka.harness.cases import sync
from aka.harness.compare import Output, Tolerance, compare_outputs
from aka.harness.guard import ForbiddenOps, LaunchCounter, PersistingL2, overlaps, poison_allocator, storages

INCORRECT = "incorrect"
POLICY = "policy_violation"
TAMPERING = "tampering"
IMPOSSIBLE = "impossible_speedup"
UNTIMEABLE = "performance_error"  # a case that could not be timed fairly (aka.result.FailureKind)
_SEVERITY = {TAMPERING: 3, POLICY: 2, IMPOSSIBLE: 1, INCORRECT: 0, UNTIMEABLE: -1}


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
    return max(problems, key=lambda p: _SEVERITY[p.kind], default=None)


@dataclass
class CallVerifier:
    device: torch.device
    tolerances: Mapping[torch.dtype | str, Tolerance]
    enforce_policy: bool
    extra_allowed: frozenset[str] = frozenset()
    launches: LaunchCounter = field(default_factory=LaunchCounter)
    persisting_l2: PersistingL2 | None = None
    _mode: ForbiddenOps | None = None
    _launched: int = 0

    def call(self, function: Callable[..., object], inputs: Sequence[torch.Tensor], expected: Output | None) -> object:
        """Call the candidate under the torch-operator guard (where the family has the policy: the
        guard's per-operator Python hook is host time a torch-heavy e2e workload cannot afford);
        poison fresh memory first."""
        if expected is not None:
            poison_allocator(expected)
        self._mode = ForbiddenOps(self.extra_allowed) if self.enforce_policy else None
        before = self.launches.total()
        with self._mode or contextlib.nullcontext():
            output = function(*inputs)
        self._launched = self.launches.total() - before
        return output

    def problems(self, output: object, inputs: Sequence[torch.Tensor], pristine: Sequence[torch.Tensor],
                 expected: Output) -> list[Problem]:
        sync(self.device)
        found: list[Problem] = []
        if self.enforce_policy and self._mode is not None and self._mode.violations:
            found.append(Problem(POLICY, self._mode.describe()))
        if self.launches.instrumented and self._launched == 0:
            names = ", ".join(sorted(self.launches.instrumented))
            found.append(Problem(POLICY, f"no target kernel ({names}) was launched during the call"))
        if self.persisting_l2 is not None and self.persisting_l2.violated():
            found.append(Problem(POLICY, "the candidate reserved persisting L2 cache (defeats the L2 flush)"))
        for position, (now, before) in enumerate(zip(inputs, pristine, strict=True)):
            if not torch.equal(now, before):
                found.append(Problem(INCORRECT, f"input {position} was modified by the candidate"))
        if overlaps(storages(output), storages(list(inputs))):
            found.append(Problem(INCORRECT, "the output shares memory with an input"))
        verdict = compare_outputs(output, expected, self.tolerances)
        if not verdict.correct:
            found.append(Problem(INCORRECT, verdict.message))
        elif isinstance(expected, torch.Tensor) and isinstance(output, torch.Tensor):
            if expected.is_contiguous() and not output.is_contiguous():
                found.append(Problem(INCORRECT, f"output strides {output.stride()} are not contiguous"))
        return found

    def check(self, output: object, inputs: Sequence[torch.Tensor], pristine: Sequence[torch.Tensor],
              expected: Output) -> None:
        problem = worst(self.problems(output, inputs, pristine, expected))
        if problem is not None:
            raise ProblemError(problem)


def cuda_kernel_names(function: Callable[[], object]) -> list[str]:
    """Names of the GPU kernels one call launches, from the profiler (for CUDA-source targets)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        function()
        torch.cuda.synchronize()
    return sorted({event.name for event in prof.events() if event.device_type.name == "CUDA"})
