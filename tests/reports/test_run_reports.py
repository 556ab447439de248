"""A run's reports made again from its directory alone (`aka report`), under another scorer
(`aka score`), and a report added through the writer registry."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import toy_kernel_source
from typer.testing import CliRunner

from aka.cli import app
from aka.reports.rebuild import counted_results, rereport
from aka.reports.writers import REPORT_WRITERS, report_writer
from aka.results.task_result import RESULT_FILE_NAME, read_task_result
from aka.run.runner import run_experiment


@pytest.fixture
def finished_run(make_toy_task, write_run_config) -> Path:
    """Two tasks; one had a broken baseline and was retried on resume (its old workspace is kept)."""
    task_dir = make_toy_task("triton2triton/toy/bad_baseline", kernel=toy_kernel_source(value=1))
    make_toy_task("triton2triton/toy/fine")
    config = write_run_config()
    first = run_experiment(config)
    (task_dir / "kernel.py").write_text(toy_kernel_source())
    run_experiment(config, resume_run=first.run_dir)
    return Path(first.run_dir)


def _reports(run_dir: Path) -> dict[str, str]:
    root = run_dir / "reports"
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_reports_are_made_again_from_the_run_directory_alone(finished_run: Path) -> None:
    made_by_the_run = _reports(finished_run)
    assert [r.status.value for r in counted_results(finished_run)] == ["PASS", "PASS"]  # the retry counts
    shutil.rmtree(finished_run / "reports")
    done = CliRunner().invoke(app, ["report", str(finished_run)])
    assert done.exit_code == 0, done.output
    assert _reports(finished_run) == made_by_the_run


def test_another_scorer_scores_the_same_results_beside_the_runs_own(finished_run: Path) -> None:
    own = _reports(finished_run)
    results_before = sorted(p.read_text() for p in finished_run.glob(f"*/{RESULT_FILE_NAME}"))
    done = CliRunner().invoke(app, ["score", str(finished_run), "--scorer", "test_run_reports:correct_only"])
    assert done.exit_code == 0, done.output
    assert "2 result(s), total score 2.0" in done.output
    rescored = finished_run / "reports" / "scores" / "test_run_reports_correct_only"
    assert "Score" in (rescored / "overall_summary.csv").read_text()
    assert "test_run_reports:correct_only" in (rescored / "overall_report.txt").read_text()
    assert {k: v for k, v in _reports(finished_run).items() if not k.startswith("scores/")} == own
    assert sorted(p.read_text() for p in finished_run.glob(f"*/{RESULT_FILE_NAME}")) == results_before
    assert all(
        read_task_result(p).scorer != "test_run_reports:correct_only"
        for p in finished_run.glob(f"*/{RESULT_FILE_NAME}")
    )


def correct_only(result) -> float:
    return 1.0 if result.pass_correctness else 0.0


def test_a_report_is_added_by_registering_one_writer(finished_run: Path) -> None:
    @report_writer("task_count.txt")
    def count(results, header) -> str:
        return f"{header.run_name}: {len(results)} tasks\n"

    try:
        rereport(finished_run)
        assert (finished_run / "reports" / "task_count.txt").read_text() == f"{finished_run.name}: 2 tasks\n"
        with pytest.raises(ValueError, match="already registered"):
            report_writer("task_count.txt")(count)
    finally:
        REPORT_WRITERS.pop("task_count.txt")


def test_a_folder_that_is_not_a_run_is_a_one_line_error(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert done.exit_code == 2 and "not a run directory" in done.output


def test_aka_report_remakes_the_verdicts_and_smoke_test_marks_and_prints_the_summary(
    toy_ab_run: Path, tmp_path: Path
) -> None:
    copy = tmp_path / toy_ab_run.name
    shutil.copytree(toy_ab_run, copy, symlinks=True)
    made_by_the_run = (copy / "reports" / "overall_report.txt").read_text()
    shutil.rmtree(copy / "reports")
    done = CliRunner().invoke(app, ["report", str(copy)])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == str(copy / "reports")
    assert "arm noop" in done.stdout and "arm sol" in done.stdout and "verdicts: correct-and-faster 1" in done.stdout
    text = (copy / "reports" / "overall_report.txt").read_text()
    assert text == made_by_the_run
    assert "Timing: smoke test: a CPU (Triton interpreter) run" in text and "Speedup (smoke test): mean" in text
    assert "triton2triton/toy/slow  score=182.50  speedup=0.625x  correct-but-slower" in text
    arm = (copy / "reports" / "arms" / "sol" / "overall_report.txt").read_text()
    assert "triton2triton/toy/fast  score=320.00  speedup=2.000x  correct-and-faster" in arm
