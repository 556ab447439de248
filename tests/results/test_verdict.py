"""Verdict words: what happened to a candidate, told apart where the status says PASS for all."""

from __future__ import annotations

import pytest

from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.results.verdict import Verdict, is_smoke_test, verdict


def _result(**fields: object) -> TaskResult:
    return TaskResult.model_validate({"task_name": "t", "task_type": "triton2triton", **fields})


CORRECT = {"pass_compilation": True, "pass_correctness": True, "status": TaskStatus.PASS}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({**CORRECT, "speedup_ratio": 1.5, "speedup_ci_low": 1.3, "speedup_ci_high": 1.7}, Verdict.FASTER),
        ({**CORRECT, "speedup_ratio": 0.415, "speedup_ci_low": 0.4, "speedup_ci_high": 0.43}, Verdict.SLOWER),
        ({**CORRECT, "speedup_ratio": 1.04, "speedup_ci_low": 0.97, "speedup_ci_high": 1.11}, Verdict.UNCHANGED),
        ({**CORRECT, "speedup_ratio": 6.03, "speedup_ci_low": 2.2, "speedup_ci_high": 16.9}, Verdict.FASTER),
        ({**CORRECT, "speedup_ratio": 1.0}, Verdict.UNCHANGED),
        ({**CORRECT, "speedup_ratio": 1.2}, Verdict.FASTER),
        ({**CORRECT, "speedup_ratio": 0.9}, Verdict.SLOWER),
        ({**CORRECT}, Verdict.UNTIMED),
        ({**CORRECT, "speedup_ratio": 2.0, "failure_kind": FailureKind.TAMPERING}, Verdict.CHEATING),
        (
            {"pass_compilation": True, "status": TaskStatus.PARTIAL, "failure_kind": FailureKind.INCORRECT},
            Verdict.INCORRECT,
        ),
        (
            {"status": TaskStatus.FAIL, "failure_kind": FailureKind.COMPILE_ERROR, "compilation_error_message": "nvcc"},
            Verdict.COMPILE_FAILURE,
        ),
        ({"status": TaskStatus.FAIL, "failure_kind": FailureKind.MISSING_KERNEL}, Verdict.COMPILE_FAILURE),
        ({"status": TaskStatus.FAIL, "failure_kind": FailureKind.AGENT_TIMEOUT}, Verdict.NO_CANDIDATE),
        (
            {"status": TaskStatus.FAIL, "failure_kind": FailureKind.AGENT_ERROR, "compilation_error_message": "syntax"},
            Verdict.COMPILE_FAILURE,
        ),
        ({"status": TaskStatus.FAIL, "failure_kind": FailureKind.POLICY_VIOLATION}, Verdict.CHEATING),
        (
            {"status": TaskStatus.INFRA, "failure_kind": FailureKind.INFRA_ERROR, "pass_correctness": True},
            Verdict.INFRASTRUCTURE,
        ),
        ({"status": TaskStatus.SKIP, "failure_kind": FailureKind.SKIPPED}, Verdict.SKIPPED),
    ],
)
def test_each_outcome_gets_its_word(fields: dict[str, object], expected: Verdict) -> None:
    assert verdict(_result(**fields)) is expected


def test_a_cpu_run_is_a_smoke_test() -> None:
    assert is_smoke_test("cpu") and is_smoke_test("cpu (torch not installed)") and is_smoke_test("CPU")
    assert not is_smoke_test("NVIDIA H200") and not is_smoke_test("H200") and not is_smoke_test("")
