from __future__ import annotations

import pytest

from aka.errors import ConfigError
from aka.results.scoring import default_score, register_scorer, resolve_scorer
from aka.results.task_result import TaskResult


def _result(**fields: object) -> TaskResult:
    return TaskResult(task_name="t", task_type="triton2triton", **fields)  # type: ignore[arg-type]


def test_default_score_formula() -> None:
    assert default_score(_result()) == 0
    assert default_score(_result(pass_compilation=True)) == 20
    correct = _result(pass_compilation=True, pass_correctness=True, speedup_ratio=1.58)
    assert default_score(correct) == pytest.approx(278)
    assert default_score(_result(pass_compilation=True, pass_correctness=True)) == 120


def test_registry_and_module_paths() -> None:
    @register_scorer("binary")
    def binary(result: TaskResult) -> float:
        return float(result.pass_correctness)

    assert resolve_scorer("binary") is binary
    assert resolve_scorer("aka.results.scoring:default_score") is default_score
    with pytest.raises(ConfigError, match="unknown scorer 'nope'"):
        resolve_scorer("nope")
    with pytest.raises(ConfigError, match="cannot load"):
        resolve_scorer("aka.results.scoring:missing")
