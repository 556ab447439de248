"""The original's three run reports, for tools written against its files (`report_format: original`).

Same file names as ours, the original's content (its `postprocessing.py` at d6f7c8a):
`task_type_breakdown.json` (`run_timestamp`, `agent`, `target_gpu`, `overall`, `task_types`;
rates in percent), `overall_report.txt` (its line format) and `overall_summary.csv` (its five
columns, `%.4f` numbers). Its rules: every task with a result counts; the family is the task
name's first part; the speedup is `speedup_ratio` (else base/optimized time); speedup statistics
cover the tasks that compiled and are correct with a positive speedup (sample standard deviation,
percentiles from `statistics.quantiles(n=100)`). Ours on top: an `INFRA` task counts with score 0
and no speedup (its error says why), and a `SKIP` task is left out, as the original never wrote a
result for a task it did not run.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Sequence
from typing import Any

from aka.reports.writers import (
    BREAKDOWN_JSON_NAME,
    REPORT_TXT_NAME,
    SUMMARY_CSV_NAME,
    RunHeader,
    counted_score,
    failure_text,
    report_writer,
)
from aka.results.task_result import TaskResult, TaskStatus

ORIGINAL_FORMAT = "original"
RULE, THIN = "=" * 80, "-" * 80


def _speedup(result: TaskResult) -> float:
    if result.status is TaskStatus.INFRA:
        return 0.0
    if result.speedup_ratio is not None and result.speedup_ratio > 0:
        return result.speedup_ratio
    base, best = result.base_execution_time or 0.0, result.best_optimized_execution_time or 0.0
    return base / best if base > 0 and best > 0 else 0.0


def _rows(results: Sequence[TaskResult]) -> list[dict[str, Any]]:
    return [
        {
            "task_name": r.task_name,
            "score": counted_score(r),
            "pass_compilation": r.pass_compilation,
            "pass_correctness": r.pass_correctness,
            "speedup_ratio": _speedup(r),
            "error": failure_text(r) or None,
            "summary": r.optimization_summary,
        }
        for r in sorted(results, key=lambda r: r.task_name)
        if r.status is not TaskStatus.SKIP
    ]


def _speedup_stats(values: list[float]) -> dict[str, float]:
    if not values:
        return dict.fromkeys(
            ("average_speedup", "median_speedup", "std_dev_speedup", "p25_speedup", "p75_speedup", "p90_speedup"), 0.0
        )
    if len(values) == 1:
        p25 = p75 = p90 = values[0]
    else:
        cuts = statistics.quantiles(values, n=100)
        p25, p75, p90 = cuts[24], cuts[74], cuts[89]
    return {
        "average_speedup": sum(values) / len(values),
        "median_speedup": statistics.median(values),
        "std_dev_speedup": statistics.stdev(values) if len(values) > 1 else 0.0,
        "p25_speedup": p25,
        "p75_speedup": p75,
        "p90_speedup": p90,
    }


def _stats(rows: list[dict[str, Any]], count_key: str) -> dict[str, Any]:
    n = len(rows)
    total = sum(row["score"] for row in rows)
    compiled = sum(1 for row in rows if row["pass_compilation"])
    correct = sum(1 for row in rows if row["pass_correctness"])
    judged = [row["speedup_ratio"] for row in rows if row["pass_compilation"] and row["pass_correctness"]]
    faster = sum(1 for s in judged if s > 1.0)
    valid = [s for s in judged if s > 0]
    return {
        count_key: n,
        "total_score": total,
        "average_score": total / n if n else 0.0,
        "compilation_pass_count": compiled,
        "compilation_pass_rate": compiled / n * 100 if n else 0.0,
        "correctness_pass_count": correct,
        "correctness_pass_rate": correct / n * 100 if n else 0.0,
        "speedup_gt_1_count": faster,
        "speedup_gt_1_rate": faster / n * 100 if n else 0.0,
        **_speedup_stats(valid),
        "valid_speedup_count": len(valid),
    }


def _family(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "unknown"


def _by_type(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        family: _stats([row for row in rows if _family(row["task_name"]) == family], "count")
        for family in sorted({_family(row["task_name"]) for row in rows})
    }


def _timestamp(header: RunHeader) -> str:
    return header.run_name[4:] if header.run_name.startswith("run_") else "unknown"


@report_writer(BREAKDOWN_JSON_NAME, report_format=ORIGINAL_FORMAT)
def render_breakdown(results: Sequence[TaskResult], header: RunHeader) -> str:
    rows = _rows(results)
    return json.dumps(
        {
            "run_timestamp": _timestamp(header),
            "agent": header.agent,
            "target_gpu": header.target_gpu_model,
            "overall": _stats(rows, "total_tasks"),
            "task_types": _by_type(rows),
        },
        indent=2,
    )


def _overall_lines(o: dict[str, Any]) -> list[str]:
    n = o["total_tasks"]
    return [
        "OVERALL STATISTICS:",
        f"  Total Tasks:           {n}",
        f"  Total Score:           {o['total_score']:.2f}",
        f"  Average Score:         {o['average_score']:.2f}",
        "Compilation:",
        f"  Pass Count:            {o['compilation_pass_count']}/{n}",
        f"  Pass Rate:             {o['compilation_pass_rate']:.1f}%",
        "Correctness:",
        f"  Pass Count:            {o['correctness_pass_count']}/{n}",
        f"  Pass Rate:             {o['correctness_pass_rate']:.1f}%",
        "Performance:",
        f"  Speedup > 1.0 Count:   {o['speedup_gt_1_count']}/{n}",
        f"  Speedup > 1.0 Rate:    {o['speedup_gt_1_rate']:.1f}%",
        f"  Average Speedup:       {o['average_speedup']:.2f}x",
        f"  Median Speedup:        {o['median_speedup']:.2f}x",
        f"  Std Dev Speedup:       {o['std_dev_speedup']:.2f}x",
        f"  P25/P75/P90 Speedup:   {o['p25_speedup']:.2f}x / {o['p75_speedup']:.2f}x / {o['p90_speedup']:.2f}x",
        f"  Valid Speedup Count:   {o['valid_speedup_count']}",
    ]


def _type_lines(family: str, s: dict[str, Any]) -> list[str]:
    n = s["count"]
    return [
        f"  {family} ({n} tasks):",
        f"    Average Speedup:     {s['average_speedup']:.2f}x",
        f"    Median Speedup:      {s['median_speedup']:.2f}x",
        f"    Std Dev Speedup:     {s['std_dev_speedup']:.2f}x",
        f"    P25/P75/P90 Speedup: {s['p25_speedup']:.2f}x / {s['p75_speedup']:.2f}x / {s['p90_speedup']:.2f}x",
        f"    Compilation Pass:     {s['compilation_pass_count']}/{n}",
        f"    Compilation Pass Rate: {s['compilation_pass_rate']:.1f}%",
        f"    Correctness Pass:     {s['correctness_pass_count']}/{n}",
        f"    Correctness Pass Rate: {s['correctness_pass_rate']:.1f}%",
        f"    Speedup > 1.0:        {s['speedup_gt_1_count']}/{n} ({s['speedup_gt_1_rate']:.1f}%)",
        f"    Average Score:        {s['average_score']:.2f}",
        "",
    ]


@report_writer(REPORT_TXT_NAME, report_format=ORIGINAL_FORMAT)
def render_report(results: Sequence[TaskResult], header: RunHeader) -> str:
    rows = _rows(results)
    overall, types = _stats(rows, "total_tasks"), _by_type(rows)
    n = overall["total_tasks"]
    lines = [
        RULE,
        "AgentKernelArena Task Results Report",
        RULE,
        f"Run: {_timestamp(header)}",
        f"Agent: {header.agent}",
        f"Target GPU: {header.target_gpu_model}",
        RULE,
        *_overall_lines(overall),
    ]
    if types:
        lines += ["", "TASK TYPE BREAKDOWN:", ""]
        for family, stats in types.items():
            lines += _type_lines(family, stats)
    lines += [
        "TOTAL PERFORMANCE SUMMARY:",
        f"  Overall Average Speedup:  {overall['average_speedup']:.2f}x",
        f"  Tasks with Speedup > 1.0: {overall['speedup_gt_1_count']}/{n} ({overall['speedup_gt_1_rate']:.1f}%)",
    ]
    judged = [
        (row["speedup_ratio"], row["task_name"])
        for row in rows
        if row["pass_compilation"] and row["pass_correctness"] and row["speedup_ratio"] > 0
    ]
    if judged:
        best, worst = max(judged, key=lambda item: item[0]), min(judged, key=lambda item: item[0])
        lines += [
            f"  Best Speedup:            {best[0]:.2f}x (task: {best[1]})",
            f"  Worst Speedup:           {worst[0]:.2f}x (task: {worst[1]})",
        ]
    lines += ["", "TASK DETAILS:", THIN]
    for row in rows:
        status = "PASS" if row["pass_correctness"] else ("PARTIAL" if row["pass_compilation"] else "FAIL")
        lines.append(
            f"{status:<8} {row['task_name']:<40} Score: {row['score']:>6.1f}  Speedup: {row['speedup_ratio']:.2f}x"
        )
        if row["error"]:
            lines.append(f"         Error: {row['error']}")
    lines.append(RULE)
    return "\n".join(lines) + "\n"


@report_writer(SUMMARY_CSV_NAME, report_format=ORIGINAL_FORMAT)
def render_summary_csv(results: Sequence[TaskResult], header: RunHeader) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["Task Name", "Task Type", "Score", "Speedup", "Optimization_summary"])
    writer.writeheader()
    for row in _rows(results):
        name = row["task_name"]
        writer.writerow(
            {
                "Task Name": name,
                "Task Type": name.split("/", 1)[0] if "/" in name else "",
                "Score": f"{float(row['score']):.4f}",
                "Speedup": f"{float(row['speedup_ratio']):.4f}",
                "Optimization_summary": row["summary"].strip(),
            }
        )
    return buffer.getvalue()
