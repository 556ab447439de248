"""Reports: exact numbers, the denominator rule (failures counted, skips excluded) and empty runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from aka.reports.writers import (
    BREAKDOWN_JSON_NAME,
    REPORT_TXT_NAME,
    SUMMARY_CSV_NAME,
    RunHeader,
    compute_stats,
    percentile,
    task_line,
    write_reports,
)
from aka.results.task_result import FailureKind, TaskResult, TaskStatus

HEADER = RunHeader(
    run_name="run_20250101_120000_ab",
    agent="claude_code",
    target_gpu_model="H200",
    device_name="NVIDIA H200",
    created="2025-01-01T12:00:00",
    scorer="default",
)


def _results() -> list[TaskResult]:
    """Seven tasks in two families, deliberately not in name order."""
    return [
        TaskResult(
            task_name="g_skip",
            task_type="cuda2cuda",
            status=TaskStatus.SKIP,
            failure_kind=FailureKind.SKIPPED,
            failure_message="no CUDA device",
        ),
        TaskResult(
            task_name="b_slow",
            task_type="triton2triton",
            pass_compilation=True,
            pass_correctness=True,
            speedup_ratio=0.8,
            score=200.0,
            status=TaskStatus.PASS,
            optimization_summary="tiled",
        ),
        TaskResult(
            task_name="a_fast",
            task_type="triton2triton",
            pass_compilation=True,
            pass_correctness=True,
            speedup_ratio=1.5,
            score=270.0,
            status=TaskStatus.PASS,
            optimization_summary="fused loads, wider blocks",
        ),
        TaskResult(
            task_name="c_partial",
            task_type="cuda2cuda",
            pass_compilation=True,
            score=20.0,
            status=TaskStatus.PARTIAL,
            failure_kind=FailureKind.INCORRECT,
            correctness_error_message="case n=1024: max abs error 0.5",
        ),
        TaskResult(
            task_name="d_compile",
            task_type="cuda2cuda",
            status=TaskStatus.FAIL,
            failure_kind=FailureKind.COMPILE_ERROR,
            compilation_error_message="nvcc: error: expected ';'\n  at kernel.cu:12",
        ),
        TaskResult(
            task_name="e_infra",
            task_type="triton2triton",
            pass_compilation=True,
            speedup_ratio=1.0,
            status=TaskStatus.INFRA,
            failure_kind=FailureKind.INFRA_ERROR,
            failure_message="GPU lost during timing",
        ),
        TaskResult(
            task_name="f_timeout",
            task_type="cuda2cuda",
            pass_compilation=True,
            score=20.0,
            status=TaskStatus.FAIL,
            failure_kind=FailureKind.TIMEOUT,
            failure_message="correctness step timed out after 3600 s",
        ),
    ]


@pytest.fixture
def reports_dir(tmp_path: Path) -> Path:
    paths = write_reports(tmp_path / "reports", _results(), HEADER)
    assert [p.name for p in paths] == [SUMMARY_CSV_NAME, BREAKDOWN_JSON_NAME, REPORT_TXT_NAME]
    return tmp_path / "reports"


def test_percentile_matches_linear_interpolation() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 25) == pytest.approx(1.75)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 75) == pytest.approx(3.25)
    assert percentile([1.0, 2.0, 3.0, 4.0], 90) == pytest.approx(3.7)
    assert percentile([1.0, 2.0, 3.0, 4.0], 100) == pytest.approx(4.0)
    assert percentile([2.0], 90) == 2.0
    assert percentile([], 50) is None


def test_summary_csv_has_seed_columns_then_ours(reports_dir: Path) -> None:
    with (reports_dir / SUMMARY_CSV_NAME).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == [
        "Task Name",
        "Task Type",
        "Score",
        "Speedup",
        "Optimization_summary",
        "Status",
        "Failure Kind",
    ]
    assert rows[1:] == [
        ["a_fast", "triton2triton", "270.0", "1.5", "fused loads, wider blocks", "PASS", "none"],
        ["b_slow", "triton2triton", "200.0", "0.8", "tiled", "PASS", "none"],
        ["c_partial", "cuda2cuda", "20.0", "", "", "PARTIAL", "incorrect"],
        ["d_compile", "cuda2cuda", "0.0", "", "", "FAIL", "compile_error"],
        ["e_infra", "triton2triton", "0.0", "", "", "INFRA", "infra_error"],
        ["f_timeout", "cuda2cuda", "20.0", "", "", "FAIL", "timeout"],
        ["g_skip", "cuda2cuda", "0.0", "", "", "SKIP", "skipped"],
    ]


def test_overall_counts_failures_and_excludes_skips(reports_dir: Path) -> None:
    overall = json.loads((reports_dir / BREAKDOWN_JSON_NAME).read_text())["overall"]
    assert overall == {
        "task_count": 6,
        "total_score": 510.0,
        "average_score": 85.0,
        "compiled_count": 5,
        "compile_rate": 0.8333,
        "correct_count": 2,
        "correct_rate": 0.3333,
        "speedup_gt1_count": 1,
        "speedup_gt1_rate": 0.1667,
        "average_speedup": 1.15,
        "median_speedup": 1.15,
        "std_speedup": 0.35,
        "p25_speedup": 0.975,
        "p75_speedup": 1.325,
        "p90_speedup": 1.43,
        "geomean_speedup": 1.0954,
        "skipped_count": 1,
        "infra_error_count": 1,
        "failure_kinds": {
            "compile_error": 1,
            "incorrect": 1,
            "infra_error": 1,
            "skipped": 1,
            "timeout": 1,
        },
    }


def test_breakdown_splits_by_family(reports_dir: Path) -> None:
    by_type = json.loads((reports_dir / BREAKDOWN_JSON_NAME).read_text())["by_task_type"]
    assert list(by_type) == ["cuda2cuda", "triton2triton"]
    cuda, triton = by_type["cuda2cuda"], by_type["triton2triton"]
    assert (cuda["task_count"], cuda["skipped_count"], cuda["total_score"]) == (3, 1, 40.0)
    assert (cuda["average_score"], cuda["compiled_count"], cuda["compile_rate"]) == (13.3333, 2, 0.6667)
    assert (cuda["correct_count"], cuda["correct_rate"], cuda["speedup_gt1_rate"]) == (0, 0.0, 0.0)
    assert cuda["median_speedup"] is None and cuda["p90_speedup"] is None
    assert cuda["geomean_speedup"] is None
    assert cuda["failure_kinds"] == {"compile_error": 1, "incorrect": 1, "skipped": 1, "timeout": 1}
    assert (triton["task_count"], triton["total_score"], triton["average_score"]) == (3, 470.0, 156.6667)
    assert (triton["compile_rate"], triton["correct_rate"], triton["speedup_gt1_rate"]) == (
        1.0,
        0.6667,
        0.3333,
    )
    assert triton["average_speedup"] == 1.15
    assert (triton["infra_error_count"], triton["failure_kinds"]) == (1, {"infra_error": 1})


def test_text_report_header_best_worst_and_task_lines(reports_dir: Path) -> None:
    text = (reports_dir / REPORT_TXT_NAME).read_text()
    lines = text.splitlines()
    assert lines[:6] == [
        "Run: run_20250101_120000_ab",
        "Agent: claude_code",
        "Target GPU: H200",
        "Device: NVIDIA H200",
        "Created: 2025-01-01T12:00:00",
        "Scorer: default",
    ]
    assert "  Compiled: 5/6 (83.3%)  correct: 2/6 (33.3%)  speedup>1: 1/6 (16.7%)" in lines
    assert "  cuda2cuda" in lines and "  triton2triton" in lines
    assert "Best task: a_fast (score=270.00)" in lines
    assert "Worst task: d_compile (score=0.00)" in lines
    tasks = lines[lines.index("Tasks") + 1 : lines.index("Tasks") + 7]
    assert tasks == [
        "PASS     a_fast  score=270.00  speedup=1.500x  correct-and-faster",
        "PASS     b_slow  score=200.00  speedup=0.800x  correct-but-slower",
        "PARTIAL  c_partial  score=20.00  speedup=n/a  incorrect  [incorrect: case n=1024: max abs error 0.5]",
        "FAIL     d_compile  score=0.00  speedup=n/a  compile failure  "
        "[compile_error: nvcc: error: expected ';' at kernel.cu:12]",
        "INFRA    e_infra  score=0.00  speedup=n/a  infrastructure  [infra_error: GPU lost during timing]",
        "FAIL     f_timeout  score=20.00  speedup=n/a  incorrect  [timeout: correctness step timed out after 3600 s]",
    ]
    skipped = lines[lines.index("Skipped tasks (not in rates or averages)") + 1 :]
    assert skipped == ["SKIP     g_skip  score=0.00  speedup=n/a  skipped  [skipped: no CUDA device]"]


def test_infra_task_never_scores_or_contributes_a_speedup() -> None:
    infra = TaskResult(
        task_name="x",
        task_type="triton2triton",
        pass_compilation=True,
        pass_correctness=True,
        speedup_ratio=1.0,
        score=220.0,
        status=TaskStatus.INFRA,
        failure_kind=FailureKind.INFRA_ERROR,
    )
    stats = compute_stats([infra])
    assert (stats.task_count, stats.total_score, stats.average_score) == (1, 0.0, 0.0)
    assert stats.average_speedup is None and stats.speedup_gt1_count == 0
    assert task_line(infra) == "INFRA    x  score=0.00  speedup=n/a  infrastructure  [infra_error]"


def test_reports_are_deterministic(tmp_path: Path) -> None:
    first = write_reports(tmp_path / "one", _results(), HEADER)
    second = write_reports(tmp_path / "two", list(reversed(_results())), HEADER)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_empty_run_still_writes_valid_files(tmp_path: Path) -> None:
    paths = write_reports(tmp_path / "reports", [], HEADER)
    assert all(p.is_file() for p in paths)
    with paths[0].open(newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [
            ["Task Name", "Task Type", "Score", "Speedup", "Optimization_summary", "Status", "Failure Kind"],
        ]
    data = json.loads(paths[1].read_text())
    assert data["by_task_type"] == {}
    assert data["overall"]["task_count"] == 0 and data["overall"]["average_score"] == 0.0
    assert data["overall"]["p90_speedup"] is None and data["overall"]["failure_kinds"] == {}
    text = paths[2].read_text()
    assert "Best task: none" in text and "Worst task: none" in text
    assert text.endswith("Skipped tasks (not in rates or averages)\nnone\n")


def test_a_failure_message_prints_without_its_terminal_escapes() -> None:
    """A candidate's exception message with terminal escapes redrew `aka run`'s FAIL line and the
    text report's as a green PASS (red team, session 50)."""
    from aka.reports.writers import failure_text, task_line

    result = TaskResult(
        task_name="triton2triton/toy/answer",
        task_type="triton2triton",
        status=TaskStatus.FAIL,
        failure_kind=FailureKind.COMPILE_ERROR,
        failure_message="boom\x1b[2K\x1b[G\x1b[32mPASS score=312.5\x1b]52;c;aGk=\x07",
    )
    for text in (failure_text(result), task_line(result)):
        assert "\x1b" not in text and "\x07" not in text and "PASS score=312.5" in text
