"""Scores: the seed's default formula, replaceable by a registered name or `module:function`."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable

from aka.errors import ConfigError
from aka.results.task_result import CHEATING_KINDS, TaskResult

Scorer = Callable[[TaskResult], float]
_SCORERS: dict[str, Scorer] = {}


def register_scorer(name: str) -> Callable[[Scorer], Scorer]:
    def decorator(function: Scorer) -> Scorer:
        _SCORERS[name] = function
        return function

    return decorator


@register_scorer("default")
def default_score(result: TaskResult) -> float:
    """Compile fails: 0; compiles but wrong: 20; both pass: 120 + 100 x speedup (0 if untimed).

    Caught cheating (a policy violation, tampering, an impossible speedup) scores 0, so a policy
    never earns more by cheating than by an honest wrong answer.
    """
    if not result.pass_compilation or result.failure_kind in CHEATING_KINDS:
        return 0.0
    if not result.pass_correctness:
        return 20.0
    return 120.0 + 100.0 * (result.speedup_ratio or 0.0)


def finite_score(scorer: Scorer, result: TaskResult) -> float:
    """The scorer's value, rounded; a score that is not a finite number is the scorer's bug, and
    nothing non-finite may reach a result or a report."""
    value = float(scorer(result))
    if not math.isfinite(value):
        raise ValueError(f"scorer {result.scorer} returned {value} for {result.task_name}: scores are finite")
    return round(value, 6)


def resolve_scorer(spec: str, source: str = "run config") -> Scorer:
    """A registered scorer name, or `package.module:function` taking a TaskResult."""
    if spec in _SCORERS:
        return _SCORERS[spec]
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ConfigError(
            f"{source}: field 'scorer': unknown scorer '{spec}' "
            f"(use one of {', '.join(sorted(_SCORERS))} or 'package.module:function')"
        )
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{source}: field 'scorer': cannot load '{spec}': {exc}") from exc
    if not callable(function):
        raise ConfigError(f"{source}: field 'scorer': '{spec}' is not a function")
    return function  # type: ignore[no-any-return]
