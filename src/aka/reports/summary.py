"""The table printed at the end of a run and by `aka report`: per task family and overall, how many
tasks were correct, how many faster than their baseline, their geometric-mean speedup, the score,
and the failures by kind; one table per arm in a multi-arm run.

The counts follow the reports' denominator rule (`aka.reports.writers`: skipped tasks are left out
and listed apart, everything else counts). "Faster" and "slower" are verdicts (`aka.results.verdict`):
a speedup whose recorded interval holds 1.0 is neither.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from aka.reports.writers import TaskStats, compute_stats
from aka.results.task_result import FailureKind, TaskResult
from aka.results.verdict import SMOKE_TEST_NOTE, Verdict, is_smoke_test, verdict

COLUMNS = (
    "family",
    "tasks",
    "correct",
    "faster",
    "slower",
    "unchanged",
    "geomean speedup",
    "mean score",
    "total score",
    "failures",
)


def _row(name: str, results: Sequence[TaskResult]) -> list[str]:
    stats: TaskStats = compute_stats(results)
    verdicts = Counter(verdict(r) for r in results)
    failures = (
        ", ".join(f"{kind} {count}" for kind, count in stats.failure_kinds.items() if kind != FailureKind.SKIPPED.value)
        or "-"
    )
    skipped = f" (+{stats.skipped_count} skipped)" if stats.skipped_count else ""
    geomean = "n/a" if stats.geomean_speedup is None else f"{stats.geomean_speedup:.3f}x"
    return [
        name,
        f"{stats.task_count}{skipped}",
        f"{stats.correct_count}",
        f"{verdicts[Verdict.FASTER]}",
        f"{verdicts[Verdict.SLOWER]}",
        f"{verdicts[Verdict.UNCHANGED]}",
        geomean,
        f"{stats.average_score:.1f}",
        f"{stats.total_score:.1f}",
        failures,
    ]


def summary_table(results: Sequence[TaskResult]) -> Table:
    """Per family, then overall; a smoke-test run says so in the speedup column."""
    smoke = any(is_smoke_test(r.device) for r in results)
    table = Table(*(c + (" (smoke test)" if smoke and c == "geomean speedup" else "") for c in COLUMNS))
    for family in sorted({r.task_type for r in results}):
        table.add_row(*_row(family, [r for r in results if r.task_type == family]))
    table.add_section()
    table.add_row(*_row("overall", results), style="bold")
    return table


def verdict_line(results: Sequence[TaskResult]) -> str:
    counts = Counter(verdict(r).value for r in results)
    return "verdicts: " + ", ".join(f"{word} {counts[word]}" for word in (v.value for v in Verdict) if counts[word])


def print_summary(results: Sequence[TaskResult], console: Console) -> None:
    """The run's summary tables (one per arm when the results carry arms), their verdict counts and,
    for a CPU run, the smoke-test warning."""
    arms = sorted({r.arm for r in results if r.arm is not None})
    groups = [(f"arm {arm}", [r for r in results if r.arm == arm]) for arm in arms] or [("summary", list(results))]
    for title, group in groups:
        console.print(f"[bold]{title}[/]", highlight=False)
        console.print(summary_table(group))
        console.print(verdict_line(group), highlight=False, soft_wrap=True)
    if any(is_smoke_test(r.device) for r in results):
        console.print(f"[yellow]{SMOKE_TEST_NOTE}[/]", highlight=False, soft_wrap=True)
