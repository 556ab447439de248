"""Run-level reports, aggregated once from the `task_result.yaml` records of a run.

Three files go into `reports/`: `overall_summary.csv`, `task_type_breakdown.json` and
`overall_report.txt` (SEED_SPEC 3). They are derived data: re-running `write_reports` on the same
results rewrites them byte for byte.

Denominator rule: every task that was attempted counts in every denominator (task_count, the
rates, the average score), including tasks that crashed, timed out or hit an infrastructure
error, so failures can never make a run look better by vanishing. An `INFRA` task counts with
score 0 and never contributes a speedup, because its timing cannot be trusted. Only `SKIP` tasks
(the task could not run on this machine, e.g. a CUDA task without a GPU) are left out of rates and
averages; they are counted in `skipped_count` and listed separately.

Speedup statistics cover the correct, non-INFRA tasks with a positive finite speedup; the CSV
and the task lines show the same counted score and speedup, so every file agrees with the totals.
Percentiles interpolate linearly between closest ranks (numpy's default); `std_speedup` is the
population standard deviation (numpy's default, ddof=0). All of them are null when no task
qualifies. Rates and averages of a group with no counted task are 0.0.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aka.evaluation.wire import valid_text
from aka.reports.heldout import heldout_lines, heldout_summary
from aka.reports.tree import replace_tree
from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.results.verdict import SMOKE_TEST_NOTE, is_smoke_test, verdict

SUMMARY_CSV_NAME = "overall_summary.csv"
BREAKDOWN_JSON_NAME = "task_type_breakdown.json"
REPORT_TXT_NAME = "overall_report.txt"
SUMMARY_CSV_COLUMNS = (
    "Task Name",
    "Task Type",
    "Score",
    "Speedup",
    "Optimization_summary",
    "Status",
    "Failure Kind",
)
_DECIMALS = 4
_MESSAGE_LIMIT = 160


@dataclass(frozen=True)
class RunHeader:
    """Who and what produced the run; printed at the top of the text report."""

    run_name: str
    agent: str
    target_gpu_model: str
    device_name: str
    created: str
    scorer: str
    report_format: str = "aka"  # `report_format` of the run config: whose report files (REPORT_FORMATS)


@dataclass(frozen=True)
class TaskStats:
    """Aggregates over one group of tasks (the whole run or one task family)."""

    task_count: int
    total_score: float
    average_score: float
    compiled_count: int
    compile_rate: float
    correct_count: int
    correct_rate: float
    speedup_gt1_count: int
    speedup_gt1_rate: float
    average_speedup: float | None
    median_speedup: float | None
    std_speedup: float | None
    p25_speedup: float | None
    p75_speedup: float | None
    p90_speedup: float | None
    geomean_speedup: float | None
    skipped_count: int
    infra_error_count: int
    failure_kinds: dict[str, int] = field(default_factory=dict)


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Linear interpolation between closest ranks, matching numpy.percentile's default."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def counted_score(result: TaskResult) -> float:
    """The score a task contributes: an infrastructure error is worth 0 whatever was recorded."""
    return 0.0 if result.status is TaskStatus.INFRA else result.score


def trusted_speedup(result: TaskResult) -> float | None:
    """The speedup a task contributes, or None: an incorrect or INFRA task's timing means nothing."""
    speedup: float | None = result.speedup_ratio
    if result.status in (TaskStatus.SKIP, TaskStatus.INFRA) or not result.pass_correctness:
        return None
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return None
    return speedup


def _rate(part: float, total: int) -> float:
    """Share of `total`; 0.0 for an empty group so every field stays a number."""
    return part / total if total else 0.0


def compute_stats(results: Sequence[TaskResult]) -> TaskStats:
    """Aggregate one group of results under the module's denominator rule."""
    counted = [r for r in results if r.status is not TaskStatus.SKIP]
    n = len(counted)
    total = sum(counted_score(r) for r in counted)
    compiled = sum(1 for r in counted if r.pass_compilation)
    correct = sum(1 for r in counted if r.pass_correctness)
    speedups = [s for s in (trusted_speedup(r) for r in counted) if s is not None]
    faster = sum(1 for s in speedups if s > 1.0)
    kinds = Counter(r.failure_kind.value for r in results if r.failure_kind is not FailureKind.NONE)
    return TaskStats(
        task_count=n,
        total_score=total,
        average_score=_rate(total, n),
        compiled_count=compiled,
        compile_rate=_rate(compiled, n),
        correct_count=correct,
        correct_rate=_rate(correct, n),
        speedup_gt1_count=faster,
        speedup_gt1_rate=_rate(faster, n),
        average_speedup=statistics.fmean(speedups) if speedups else None,
        median_speedup=statistics.median(speedups) if speedups else None,
        std_speedup=statistics.pstdev(speedups) if speedups else None,
        p25_speedup=percentile(speedups, 25),
        p75_speedup=percentile(speedups, 75),
        p90_speedup=percentile(speedups, 90),
        geomean_speedup=statistics.geometric_mean(speedups) if speedups else None,
        skipped_count=len(results) - n,
        infra_error_count=sum(1 for r in counted if r.status is TaskStatus.INFRA),
        failure_kinds=dict(sorted(kinds.items())),
    )


def _ordered(results: Sequence[TaskResult]) -> list[TaskResult]:
    """Reports list tasks by name (then arm and repeat) so that reruns produce identical files."""
    return sorted(results, key=lambda r: (r.task_name, r.task_type, r.arm or "", r.repeat or 0))


def _stats_json(stats: TaskStats) -> dict[str, object]:
    return {key: round(value, _DECIMALS) if isinstance(value, float) else value for key, value in asdict(stats).items()}


ReportWriter = Callable[[Sequence[TaskResult], RunHeader], str]
REPORT_WRITERS: dict[str, ReportWriter] = {}
REPORT_FORMATS: dict[str, dict[str, ReportWriter]] = {}  # other formats' writers, replacing ours by file name
FORMAT_MODULES = {"original": "aka.compat.original_reports"}  # where a format's writers register, imported on use


def report_writer(name: str, report_format: str | None = None) -> Callable[[ReportWriter], ReportWriter]:
    """Register a report: `name` is its file in `reports/`, the function renders it from the
    results and the run's header alone (a run's reports can be re-made from its directory).
    With `report_format`, it replaces the report of that name in runs that ask for the format
    (`report_format: original`: aka.compat.original_reports)."""

    def register(writer: ReportWriter) -> ReportWriter:
        registry = REPORT_WRITERS if report_format is None else REPORT_FORMATS.setdefault(report_format, {})
        if name in registry:
            raise ValueError(f"a report named {name} is already registered")
        registry[name] = writer
        return writer

    return register


def render_breakdown(results: Sequence[TaskResult]) -> str:
    """The `task_type_breakdown.json` text: overall stats and one block per task family."""
    families = sorted({r.task_type for r in results})
    data = {
        "overall": _stats_json(compute_stats(results)),
        "by_task_type": {
            family: _stats_json(compute_stats([r for r in results if r.task_type == family])) for family in families
        },
    }
    heldout = heldout_summary(results)
    if heldout is not None:
        data["heldout"] = heldout
    return json.dumps(data, indent=2) + "\n"


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(value, _DECIMALS))


def render_summary_csv(results: Sequence[TaskResult]) -> str:
    """The seed's five summary columns, then our Status and Failure Kind columns.

    Score and Speedup are the values that count (see the module docstring), so the column sums
    match the JSON totals and an INFRA task never shows a speedup.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SUMMARY_CSV_COLUMNS)
    for r in _ordered(results):
        writer.writerow(
            [
                r.task_name,
                r.task_type,
                _number(counted_score(r)),
                _number(trusted_speedup(r)),
                r.optimization_summary,
                r.status.value,
                r.failure_kind.value,
            ]
        )
    return buffer.getvalue()


def failure_text(result: TaskResult) -> str:
    """One line naming the failure kind and its first recorded message, or "" on success."""
    if result.failure_kind is FailureKind.NONE:
        return ""
    message = (
        result.failure_message
        or result.compilation_error_message
        or result.correctness_error_message
        or result.speedup_calculation_error_message
        or ""
    )
    message = " ".join(valid_text(message).split())  # a candidate's terminal escapes redrew its line
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 3] + "..."
    return f"{result.failure_kind.value}: {message}" if message else result.failure_kind.value


def task_line(result: TaskResult) -> str:
    """One report line: status, name, score, speedup, what happened (`aka.results.verdict`) and,
    on failure, why."""
    speedup, score, said = _optional(trusted_speedup(result)), counted_score(result), verdict(result).value
    line = f"{result.status.value:<7}  {result.task_name}  score={score:.2f}  speedup={speedup}  {said}"
    reason = failure_text(result)
    return f"{line}  [{reason}]" if reason else line


def _fraction(count: int, total: int) -> str:
    return f"{count}/{total} ({100.0 * _rate(count, total):.1f}%)"


def _optional(value: float | None, suffix: str = "x") -> str:
    return "n/a" if value is None else f"{value:.3f}{suffix}"


def _stats_lines(stats: TaskStats, indent: str, smoke: bool = False) -> list[str]:
    n, opt = stats.task_count, _optional
    speedup = "Speedup (smoke test)" if smoke else "Speedup"
    kinds = ", ".join(f"{k}={v}" for k, v in stats.failure_kinds.items()) or "none"
    compiled = _fraction(stats.compiled_count, n)
    correct = _fraction(stats.correct_count, n)
    faster = _fraction(stats.speedup_gt1_count, n)
    lines = [
        f"Tasks counted: {n}  skipped: {stats.skipped_count}  infra errors: {stats.infra_error_count}",
        f"Total score: {stats.total_score:.2f}  average score: {stats.average_score:.2f}",
        f"Compiled: {compiled}  correct: {correct}  speedup>1: {faster}",
        f"{speedup}: mean {opt(stats.average_speedup)}  median {opt(stats.median_speedup)}  "
        + f"geomean {opt(stats.geomean_speedup)}  std {opt(stats.std_speedup, '')}",
        f"{speedup} percentiles: p25 {opt(stats.p25_speedup)}  p75 {opt(stats.p75_speedup)}  "
        + f"p90 {opt(stats.p90_speedup)}",
        f"Failure kinds: {kinds}",
    ]
    return [indent + line for line in lines]


def best_and_worst(results: Sequence[TaskResult]) -> tuple[TaskResult | None, TaskResult | None]:
    """Highest and lowest counted score among non-skipped tasks; ties go to the first name."""
    counted = [r for r in _ordered(results) if r.status is not TaskStatus.SKIP]
    if not counted:
        return None, None
    best = max(counted, key=counted_score)
    worst = min(counted, key=counted_score)
    return best, worst


def render_text_report(results: Sequence[TaskResult], header: RunHeader) -> str:
    """The human-readable `overall_report.txt`."""
    ordered = _ordered(results)
    smoke = is_smoke_test(header.target_gpu_model)
    lines = [
        f"Run: {header.run_name}",
        f"Agent: {header.agent}",
        f"Target GPU: {header.target_gpu_model}",
        f"Device: {header.device_name}",
        *([f"Timing: {SMOKE_TEST_NOTE}"] if smoke else []),
        f"Created: {header.created}",
        f"Scorer: {header.scorer}",
        "",
        "Overall",
        *_stats_lines(compute_stats(ordered), "  ", smoke),
        "",
        "By task type",
    ]
    for family in sorted({r.task_type for r in ordered}):
        lines.append(f"  {family}")
        lines.extend(_stats_lines(compute_stats([r for r in ordered if r.task_type == family]), "    ", smoke))
    best, worst = best_and_worst(ordered)
    attempted = [task_line(r) for r in ordered if r.status is not TaskStatus.SKIP]
    skipped = [task_line(r) for r in ordered if r.status is TaskStatus.SKIP]
    lines += [
        "",
        f"Best task: {_scored_name(best)}",
        f"Worst task: {_scored_name(worst)}",
        "",
        "Tasks (smoke-test speedups)" if smoke else "Tasks",
        *(attempted or ["none"]),
        "",
        "Skipped tasks (not in rates or averages)",
        *(skipped or ["none"]),
        *heldout_lines(heldout_summary(ordered)),
    ]
    return "\n".join(lines) + "\n"


def _scored_name(result: TaskResult | None) -> str:
    return "none" if result is None else f"{result.task_name} (score={counted_score(result):.2f})"


@report_writer(SUMMARY_CSV_NAME)
def _summary_csv(results: Sequence[TaskResult], header: RunHeader) -> str:
    return render_summary_csv(results)


@report_writer(BREAKDOWN_JSON_NAME)
def _breakdown_json(results: Sequence[TaskResult], header: RunHeader) -> str:
    return render_breakdown(results)


@report_writer(REPORT_TXT_NAME)
def _report_txt(results: Sequence[TaskResult], header: RunHeader) -> str:
    return render_text_report(results, header)


def report_files(results: list[TaskResult], header: RunHeader) -> dict[str, str]:
    """Every registered report of `results`, by file name, in the header's report format."""
    if header.report_format in FORMAT_MODULES:
        importlib.import_module(FORMAT_MODULES[header.report_format])
    writers = {**REPORT_WRITERS, **REPORT_FORMATS.get(header.report_format, {})}
    return {name: writer(results, header) for name, writer in writers.items()}


def write_reports(reports_dir: Path, results: list[TaskResult], header: RunHeader) -> list[Path]:
    """Write every registered report, replaced together (`aka.reports.tree`), and return their paths."""
    files = report_files(results, header)
    replace_tree(reports_dir, files)
    return [reports_dir / name for name in files]
