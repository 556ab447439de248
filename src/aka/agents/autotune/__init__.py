"""`autotune`: searches a task's declared tunables and keeps the fastest correct variant.

Every variant is judged by the platform's own compile, correctness and performance steps
(`aka.evaluation.steps.evaluate_candidate`) in a scratch folder next to the agent log, never in the
workspace; only the winner is written back, by changing the knobs' values and nothing else.
No model and no API key are needed, so it is the quickstart's agent and a baseline for LLM agents.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from aka.agents.autotune.knobs import KnobError, TunedSources
from aka.agents.autotune.tuner import LOG_NAME, Tuner, TuningLog
from aka.agents.registry import AgentContext, register_agent
from aka.results.task_result import AgentOutcome, FailureKind


class AutotuneOptions(BaseModel):
    """`agent:` options: `margin` is the relative speedup a variant needs to replace the best."""

    model_config = ConfigDict(extra="forbid")

    margin: float = Field(default=0.01, ge=0, lt=1)
    seed: int = 0


def _values(log: TuningLog, index: int | None) -> str:
    record = next((v for v in log.variants if v.index == index), None)
    return ", ".join(f"{k}={v}" for k, v in record.values.items()) if record else "?"


def _summary(log: TuningLog) -> str:
    correct = sum(v.correct for v in log.variants)
    head = (
        f"autotune ({log.strategy}) tried {len(log.variants)} of {log.grid_size} variant(s) of "
        f"{', '.join(log.tunables)}, {correct} correct, stopped: {log.stop_reason}"
    )
    best, start = log.best, next((v for v in log.variants if v.start), None)
    if best is None:
        tail = "no correct variant; sources unchanged"
    elif best.start:
        tail = f"kept the starting values ({_values(log, best.index)}) at {best.mean_speedup:.2f}x"
    else:
        before = f"{start.mean_speedup:.2f}x" if start and start.mean_speedup else "incorrect or untimed"
        tail = f"chose {_values(log, best.index)} at {best.mean_speedup:.2f}x (start: {before})"
    return f"{head}; {tail}; speedups vs {log.speedup_reference}; log: {LOG_NAME}"


@register_agent("autotune", options=AutotuneOptions)
def launch_agent(eval_config: AgentContext, task_config_dir: Path, workspace: Path) -> AgentOutcome:
    options = eval_config.options
    assert isinstance(options, AutotuneOptions)
    name, config = eval_config.agent_name, eval_config.task.config
    if not config.tunables:
        return AgentOutcome(
            agent=name,
            exit_reason="no_tunables",
            message="the task declares no tunables; nothing to search, sources unchanged",
        )
    try:
        sources = TunedSources.load(workspace, config)
    except KnobError as exc:
        return AgentOutcome(agent=name, ok=False, exit_reason="tunable_not_found", message=str(exc))
    if not config.performance_command:
        return AgentOutcome(
            agent=name,
            exit_reason="no_performance_step",
            message="the task has no performance_command, so variants cannot be compared; sources unchanged",
        )
    if eval_config.baseline.status is FailureKind.SKIPPED:
        return AgentOutcome(
            agent=name,
            exit_reason="skipped",
            message=f"variants cannot be measured here ({eval_config.baseline.message}); sources unchanged",
        )
    tuner = Tuner(eval_config, workspace, sources, options.margin, options.seed)
    log = tuner.run()
    best = tuner.best_variant
    changed = sources.write(best, workspace) if best is not None else []
    return AgentOutcome.ended(
        name, log.stop_reason, len(log.variants), ok=True, message=_summary(log), files_changed=changed
    )
