"""Everything the dashboard shows, read from run directories alone: each run's manifest, its
counted results (`task_result.yaml`, the newest per trial, as the reports count them), `aka
compare`'s output where it was written (computed here for a multi-arm run or several runs where
not), the held-out results, and the validation reports where there are any.

A column of the dashboard is a run, or one arm of a multi-arm run. Its numbers are the reports'
(`aka.reports.writers.compute_stats`: skipped tasks left out, failures counted), its words the
verdicts (`aka.results.verdict`). Paths to a trial's files are relative to the site's folder, so
its links work from `file://` and through `aka dashboard --serve`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from aka import __version__
from aka.compare.comparison import Comparison, compare_arms
from aka.compare.render import JSON_NAME
from aka.compare.runs import load_arms
from aka.dashboard.validation import ValidationReport, find_validation
from aka.errors import AkaError
from aka.reports.heldout import heldout_summary
from aka.reports.rebuild import counted_workspaces
from aka.reports.writers import compute_stats, counted_score, failure_text, trusted_speedup
from aka.results.task_result import CaseTiming, TaskResult
from aka.results.verdict import Verdict, is_smoke_test, verdict
from aka.run.events import now
from aka.run.layout import MANIFEST_NAME, REPORTS_DIR
from aka.run.runner import RunManifest

SITE_SCHEMA_VERSION = 1
COMPARE_DIR = "compare"  # RUN/reports/compare/: where `aka compare` writes by default
TRIAL_FILES = (
    ("result", "task_result.yaml"),
    ("prompt", "prompt.md"),
    ("agent log", "agent.log"),
    ("agent transcript", "agent_transcript.jsonl"),
    ("evaluation log", "evaluation.log"),
    ("held-out log", "evaluation_heldout.log"),
    ("autotune variants", "autotune_variants.json"),
)


class ColumnStats(BaseModel):
    """A column's (or one family's) numbers, as the reports count them."""

    tasks: int
    skipped: int
    infra_errors: int
    correct: int
    faster: int
    slower: int
    unchanged: int
    geomean_speedup: float | None
    mean_score: float
    total_score: float
    failures: dict[str, int]


class Column(BaseModel):
    key: str
    run: str
    arm: str | None
    agent: str
    device: str
    target_gpu_model: str
    created: str
    smoke_test: bool
    run_dir: str
    stats: ColumnStats
    families: dict[str, ColumnStats]
    verdicts: dict[str, int]
    heldout: dict[str, object] | None


class Case(BaseModel):
    id: str
    params: str
    correct: bool | None
    base_ms: float | None
    optimized_ms: float | None
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    paired: bool
    method: str | None
    message: str | None


class Link(BaseModel):
    label: str
    href: str


class Heldout(BaseModel):
    outcome: str
    baseline_correct: bool
    candidate_correct: bool
    speedup: float | None
    generalization_gap: float | None
    message: str | None
    cases: list[Case]


class Trial(BaseModel):
    """One counted result: a task in a column (one repeat of it)."""

    column: str
    task: str
    family: str
    repeat: int | None
    status: str
    verdict: str
    correct: bool
    score: float
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    failure: str
    agent: str | None
    agent_seconds: float | None
    agent_tokens: str | None
    evaluation_seconds: float | None
    cases: list[Case]
    heldout: Heldout | None
    links: list[Link]


class PairRow(BaseModel):
    task: str
    family: str
    control_speedup: float
    treatment_speedup: float
    log_diff: float
    tie_band: float
    outcome: str


class Pair(BaseModel):
    control: str
    treatment: str
    tasks: int
    ratio: float
    ratio_low: float
    ratio_high: float
    p_value: float
    holm_p: float
    log_mean: float
    log_low: float
    log_high: float
    wins: int
    losses: int
    ties: int
    verdict: str
    warnings: list[str]
    rows: list[PairRow]


class ComparisonView(BaseModel):
    title: str
    source: str
    pairs: list[Pair]
    note: str | None = None


class ValidationView(BaseModel):
    run: str
    summary: ValidationReport | None
    reports: list[ValidationReport]


class SiteData(BaseModel):
    """The data of one dashboard: embedded in its page and written beside it as data.json."""

    schema_version: int = SITE_SCHEMA_VERSION
    generated_at: str
    aka_version: str
    columns: list[Column]
    trials: list[Trial]
    comparisons: list[ComparisonView]
    validation: list[ValidationView]
    run_dirs: list[str]


def column_stats(results: Sequence[TaskResult]) -> ColumnStats:
    stats = compute_stats(results)
    verdicts = Counter(verdict(r) for r in results)
    return ColumnStats(
        tasks=stats.task_count,
        skipped=stats.skipped_count,
        infra_errors=stats.infra_error_count,
        correct=stats.correct_count,
        faster=verdicts[Verdict.FASTER],
        slower=verdicts[Verdict.SLOWER],
        unchanged=verdicts[Verdict.UNCHANGED],
        geomean_speedup=stats.geomean_speedup,
        mean_score=stats.average_score,
        total_score=stats.total_score,
        failures={kind: n for kind, n in stats.failure_kinds.items() if kind != "skipped"},
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _case(case: CaseTiming) -> Case:
    params = ", ".join(f"{name}={value}" for name, value in case.params.items())
    return Case(
        id=case.id,
        params=params,
        correct=case.correct,
        base_ms=_finite(case.base_ms),
        optimized_ms=_finite(case.optimized_ms),
        speedup=_finite(case.speedup),
        ci_low=_finite(case.speedup_ci_low),
        ci_high=_finite(case.speedup_ci_high),
        paired=case.paired,
        method=case.optimized_method,
        message=case.message,
    )


def _links(workspace: Path, site: Path) -> list[Link]:
    found = [(label, workspace / name) for label, name in TRIAL_FILES if (workspace / name).is_file()]
    return [Link(label=label, href=quote(Path(os.path.relpath(path, site)).as_posix())) for label, path in found]


def _tokens(result: TaskResult) -> str | None:
    agent = result.agent
    if agent is None or (agent.input_tokens is None and agent.output_tokens is None):
        return None
    cost = f", ${agent.cost_usd:.2f}" if agent.cost_usd is not None else ""
    return f"{agent.input_tokens or 0} in, {agent.output_tokens or 0} out{cost}"


def _trial(column: str, workspace: Path, result: TaskResult, site: Path) -> Trial:
    heldout = result.heldout
    return Trial(
        column=column,
        task=result.task_name,
        family=result.task_type,
        repeat=result.repeat,
        status=result.status.value,
        verdict=verdict(result).value,
        correct=result.pass_correctness,
        score=counted_score(result),
        speedup=trusted_speedup(result),
        ci_low=_finite(result.speedup_ci_low),
        ci_high=_finite(result.speedup_ci_high),
        failure=failure_text(result),
        agent=result.agent.agent if result.agent else None,
        agent_seconds=result.agent.wall_seconds if result.agent else None,
        agent_tokens=_tokens(result),
        evaluation_seconds=result.evaluation_seconds,
        cases=[_case(c) for c in result.cases],
        heldout=None
        if heldout is None
        else Heldout(
            outcome=heldout.outcome.value,
            baseline_correct=heldout.baseline_correct,
            candidate_correct=heldout.candidate_correct,
            speedup=_finite(heldout.speedup_ratio),
            generalization_gap=_finite(heldout.generalization_gap),
            message=heldout.message,
            cases=[_case(c) for c in heldout.cases],
        ),
        links=_links(workspace, site),
    )


def read_run_manifest(run_dir: Path) -> RunManifest:
    path = run_dir / MANIFEST_NAME
    if not path.is_file():
        raise AkaError(f"{run_dir}: not a run directory (no {MANIFEST_NAME}); pass folders made by aka run")
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AkaError(
            f"{path}: not a run manifest this aka can read ({first}); pass a run made by aka {__version__} or re-run it"
        ) from None


def _run_labels(run_dirs: list[Path]) -> list[str]:
    """Each run's name, with its experiment folder's name where two runs share a name."""
    names = [d.name for d in run_dirs]
    return [d.name if names.count(d.name) == 1 else f"{d.parent.name}/{d.name}" for d in run_dirs]


def _arm_agent(manifest: RunManifest, arm: str | None) -> str:
    """The agent of an arm (its template in the run's config), or the run's agent."""
    declared = manifest.config.get("arms")
    for entry in declared if isinstance(declared, list) else []:
        agent = entry.get("agent") if isinstance(entry, dict) else None
        if isinstance(entry, dict) and entry.get("label") == arm and isinstance(agent, dict):
            return str(agent.get("template", arm))
    return manifest.agent if arm is None else arm


def _columns(
    run_dir: Path, label: str, manifest: RunManifest, found: list[tuple[Path, TaskResult]], site: Path
) -> tuple[list[Column], list[Trial]]:
    arms: list[str | None] = list(manifest.arms) or [None]
    arms += sorted({r.arm for _, r in found if r.arm not in arms and r.arm is not None})
    columns, trials = [], []
    for arm in arms:
        mine = [(w, r) for w, r in found if r.arm == arm]
        key = f"{label}:{arm}" if arm is not None else label
        results = [r for _, r in mine]
        families = sorted({r.task_type for r in results})
        device = manifest.device
        columns.append(
            Column(
                key=key,
                run=label,
                arm=arm,
                agent=_arm_agent(manifest, arm),
                device=str(device.get("name", "")),
                target_gpu_model=manifest.target_gpu_model,
                created=manifest.created_at,
                smoke_test=is_smoke_test(str(device.get("name", ""))),
                run_dir=str(run_dir),
                stats=column_stats(results),
                families={f: column_stats([r for r in results if r.task_type == f]) for f in families},
                verdicts=dict(Counter(verdict(r).value for r in results)),
                heldout=heldout_summary(results),
            )
        )
        trials += [_trial(key, w, r, site) for w, r in mine]
    return columns, trials


def _pairs(comparison: Comparison) -> list[Pair]:
    return [
        Pair(
            control=p.control,
            treatment=p.treatment,
            tasks=p.tasks,
            ratio=p.speedup_ratio,
            ratio_low=p.speedup_ratio_low,
            ratio_high=p.speedup_ratio_high,
            p_value=p.log_speedup.p_value,
            holm_p=p.holm["log_speedup_t"],
            log_mean=p.log_speedup.mean,
            log_low=p.log_speedup.low,
            log_high=p.log_speedup.high,
            wins=p.wins,
            losses=p.losses,
            ties=p.ties,
            verdict=p.verdict,
            warnings=p.warnings,
            rows=[
                PairRow(
                    task=r.task,
                    family=r.family,
                    control_speedup=r.control_speedup,
                    treatment_speedup=r.treatment_speedup,
                    log_diff=r.log_diff,
                    tie_band=r.tie_band,
                    outcome=r.outcome,
                )
                for r in p.rows
            ],
        )
        for p in comparison.pairs
    ]


def _written_comparison(run_dir: Path) -> ComparisonView | None:
    path = run_dir / REPORTS_DIR / COMPARE_DIR / JSON_NAME
    if not path.is_file():
        return None
    try:
        comparison = Comparison.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AkaError(
            f"{path}: not a comparison written by aka compare ({first}); run `aka compare "
            f"{run_dir}` again or remove the file"
        ) from None
    return ComparisonView(title=run_dir.name, source=str(path), pairs=_pairs(comparison))


def _computed_comparison(title: str, run_dirs: list[Path]) -> ComparisonView:
    try:
        comparison = compare_arms(load_arms(run_dirs))
    except AkaError as exc:
        return ComparisonView(title=title, source="computed by aka dashboard", pairs=[], note=str(exc))
    return ComparisonView(
        title=title, source="computed by aka dashboard (aka compare's statistics)", pairs=_pairs(comparison)
    )


def _comparisons(run_dirs: list[Path], manifests: list[RunManifest]) -> list[ComparisonView]:
    """Per multi-arm run: `aka compare`'s file, or the comparison computed the same way; across
    several runs: their comparison as arms (the first the control)."""
    views = []
    for run_dir, manifest in zip(run_dirs, manifests, strict=True):
        written = _written_comparison(run_dir)
        if written is not None:
            views.append(written)
        elif len(manifest.arms) > 1:
            views.append(_computed_comparison(run_dir.name, [run_dir]))
    if len(run_dirs) > 1:
        views.append(_computed_comparison("across the runs given (the first is the control)", run_dirs))
    return views


def load_site_data(run_dirs: Sequence[Path], site: Path) -> SiteData:
    """The dashboard's data for `run_dirs`, with the trials' links relative to `site`."""
    if not run_dirs:
        raise AkaError("aka dashboard: pass one or more run directories (run_<timestamp>...)")
    resolved = [d.resolve() for d in run_dirs]
    manifests = [read_run_manifest(d) for d in resolved]
    columns, trials, validation = [], [], []
    for run_dir, label, manifest in zip(resolved, _run_labels(resolved), manifests, strict=True):
        found = counted_workspaces(run_dir)
        run_columns, run_trials = _columns(run_dir, label, manifest, found, site.resolve())
        columns += run_columns
        trials += run_trials
        summary, reports = find_validation(run_dir)
        if summary is not None or reports:
            validation.append(ValidationView(run=label, summary=summary, reports=reports))
    return SiteData(
        generated_at=now(),
        aka_version=__version__,
        columns=columns,
        trials=trials,
        comparisons=_comparisons(resolved, manifests),
        validation=validation,
        run_dirs=[str(d) for d in resolved],
    )
