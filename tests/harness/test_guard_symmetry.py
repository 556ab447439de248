"""Both sides' calls carry the same guards: the candidate's enforced, the baseline's observed only
(`aka.harness.sides.set_up`, `Worker._guarded`). With the dispatch mode on the candidate's side
alone, an unchanged candidate came late to its timed pairs far more often than its baseline on an
H100 (session 52), and its late pairs were counted against it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from aka.harness import sides
from aka.harness.guard import ENFORCE, OBSERVE, OFF, ForbiddenOps, LaunchCounter
from aka.harness.worker import Worker


def _worker(policy: str, instrumented: bool) -> Worker:
    worker = Worker.__new__(Worker)
    worker.policy, worker.allowed = policy, frozenset()
    worker.launches = LaunchCounter()
    if instrumented:
        worker.launches.instrumented.add("kernel")
    return worker


@pytest.mark.parametrize("policy", [ENFORCE, OBSERVE, OFF])
def test_the_baseline_runs_under_the_same_mode_and_is_never_judged(policy: str) -> None:
    worker = _worker(policy, instrumented=True)
    findings: list[str] = []
    with worker._guarded(findings):
        mode = _get_current_dispatch_mode()
        torch.ones(4).sum()  # a torch operator, and no target kernel launched
    assert isinstance(mode, ForbiddenOps) is (policy != OFF)
    if policy == ENFORCE:
        assert [f.partition(":")[0] for f in findings] == ["policy_violation", "no_launch"]
    else:
        assert findings == []


def test_each_side_gets_its_policy_by_role_and_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel families: the candidate enforced, the baseline observed; e2e (exempt): neither."""
    monkeypatch.setattr(sides.syscall_filter, "filtered", lambda pid: True)
    monkeypatch.setattr(sides.syscall_filter, "closed_to_sockets", lambda pid: True)
    monkeypatch.setattr(sides, "tree", lambda pid: [pid])
    given: list[tuple[str, str]] = []

    class Side:
        role = ""
        isolated = True
        process = SimpleNamespace(pid=1)

        def setup(self, directory: Path, task_file: str, name: str, device: str, policy: str, *rest: Any) -> None:
            given.append((self.role, policy))

    task = SimpleNamespace(name="t", allowed_torch_ops=frozenset(), forbidden_torch_ops=frozenset())
    for family in ("triton2triton", "e2e"):
        ctx = SimpleNamespace(family=family, device=torch.device("cpu"), target_kernels=("kernel",))
        for role in ("candidate", "baseline"):
            sides.set_up(Side(), task, ctx, tmp_path / "harness.py", role)  # type: ignore[arg-type]
    assert given == [("candidate", ENFORCE), ("baseline", OBSERVE), ("candidate", OFF), ("baseline", OFF)]
