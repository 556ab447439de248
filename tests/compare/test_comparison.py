"""`aka compare` on run directories written from synthetic results: loading, statistics, output, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aka.cli import app
from aka.compare.comparison import CompareOptions, compare_arms
from aka.compare.render import pair_facts
from aka.compare.runs import CompareError, load_arms
from aka.results.task_result import CaseTiming, TaskResult, TaskStatus, write_task_result
from aka.run.layout import MANIFEST_NAME

runner = CliRunner()


def _result(
    task: str,
    speedup: float | None,
    arm: str | None = None,
    repeat: int | None = None,
    ci: float = 0.01,
    status: TaskStatus | None = None,
) -> TaskResult:
    correct = speedup is not None
    return TaskResult(
        task_name=task,
        task_type=task.split("/")[0],
        pass_compilation=True,
        pass_correctness=correct,
        speedup_ratio=speedup,
        speedup_ci_low=speedup * (1 - ci) if speedup else None,
        speedup_ci_high=speedup * (1 + ci) if speedup else None,
        score=120 + 100 * speedup if speedup else 20.0,
        status=status or (TaskStatus.PASS if correct else TaskStatus.PARTIAL),
        arm=arm,
        repeat=repeat,
        cases=[CaseTiming(id="c1", speedup=speedup)],
    )


def _run(root: Path, name: str, results: list[TaskResult]) -> Path:
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / MANIFEST_NAME).write_text("{}")
    for i, result in enumerate(results):
        slug = result.task_name.replace("/", "_") + (f"__{result.arm}__r{result.repeat}" if result.arm else "")
        write_task_result(run_dir / f"{slug}_20261202_0000{i % 60:02d}", result)
    return run_dir


TASKS = [f"triton2triton/s/t{i:02d}" if i % 2 else f"cuda2cuda/s/t{i:02d}" for i in range(12)]


def test_two_single_arm_runs_compare_paired_on_the_task(tmp_path: Path) -> None:
    base = [1.0 + 0.1 * i for i in range(12)]
    a = _run(tmp_path, "run_20261202_000000_a", [_result(t, s) for t, s in zip(TASKS, base, strict=True)])
    b = _run(
        tmp_path,
        "run_20261202_000001_b",
        [_result(t, s * (1.2 if i != 3 else 1.0)) for i, (t, s) in enumerate(zip(TASKS, base, strict=True))],
    )
    comparison = compare_arms(load_arms([a, b]))
    pair = comparison.pairs[0]
    assert (pair.control, pair.treatment, pair.tasks) == ("run_20261202_000000_a", "run_20261202_000001_b", 12)
    assert pair.speedup_ratio == pytest.approx(math.exp((11 * math.log(1.2)) / 12))
    assert (pair.wins, pair.losses, pair.ties) == (11, 0, 1)
    assert pair.log_speedup.p_value < 0.001 and pair.log_speedup.low > 0
    assert pair.bootstrap_low <= pair.log_speedup.mean <= pair.bootstrap_high
    assert pair.correlation is not None and pair.correlation > 0.9
    assert any("one repeat per task" in w for w in pair.warnings)
    assert any("only 12 paired tasks" in w for w in pair.warnings)
    assert pair.power.repeats_needed is None and pair.power.within_control is None
    assert "is faster than" in pair.verdict
    arm = comparison.arms[1]
    assert arm.fast_p["1.2"] == pytest.approx(11 / 12) and arm.fast_p["2"] == pytest.approx(5 / 12)
    assert set(arm.seed_by_family) == {"cuda2cuda", "triton2triton"}
    assert arm.seed_overall.task_count == 12 and arm.seed_by_family["cuda2cuda"].task_count == 6


def test_multi_arm_run_clusters_repeats_and_plans_repeats(tmp_path: Path) -> None:
    results = []
    for i, task in enumerate(TASKS):
        for k in (1, 2):
            jitter, other = 1.0 + 0.03 * ((i + k) % 3 - 1), 1.0 + 0.03 * ((i + 2 * k) % 3 - 1)
            results.append(_result(task, 1.1 * jitter, arm="noop", repeat=k))
            results.append(_result(task, 1.1 * other * (1.04 if i % 3 else 0.99), arm="tuned", repeat=k))
    results.append(_result(TASKS[0], None, arm="tuned", repeat=3, status=TaskStatus.INFRA))
    results.append(_result(TASKS[1], None, arm="noop", repeat=3, status=TaskStatus.SKIP))
    run = _run(tmp_path, "run_20261202_000000", results)
    comparison = compare_arms(load_arms([run]), CompareOptions(target_ratio=1.02))
    pair = comparison.pairs[0]
    assert (pair.control, pair.treatment) == ("noop", "tuned")
    assert comparison.arms[0].repeats == 2.0
    assert pair.power.within_control is not None and pair.power.within_control > 0
    assert pair.power.repeats_needed is not None and pair.power.repeats_needed > 2
    assert f"repeats per arm for 1.02x: {pair.power.repeats_needed}" in pair_facts(pair)[2]
    assert any("1 attempts were infrastructure errors" in w for w in pair.warnings)
    assert any("'noop': 1 attempts were skipped" in w for w in pair.warnings)
    picked = compare_arms(load_arms([run], ["tuned", "noop"]))
    assert picked.pairs[0].control == "tuned" and picked.pairs[0].log_speedup.mean < 0


def test_incorrect_attempts_follow_the_declared_convention_and_mcnemar_counts_them(tmp_path: Path) -> None:
    a = _run(tmp_path, "a/run_1", [_result(t, 1.5) for t in TASKS])
    b = _run(tmp_path, "b/run_1", [_result(t, None if i < 8 else 1.5) for i, t in enumerate(TASKS)])
    arms = load_arms([a, b])
    assert [arm.label for arm in arms] == ["a/run_1", "b/run_1"]
    pair = compare_arms(arms).pairs[0]
    assert (pair.correct_b_only, pair.correct_a_only) == (0, 8)
    assert pair.mcnemar_p == pytest.approx(2 / 2**8)
    assert pair.log_speedup.mean == pytest.approx(-8 * math.log(1.5) / 12)
    assert "more often correct" in pair.verdict
    harsh = compare_arms(arms, CompareOptions(failed_speedup=0.5)).pairs[0]
    assert harsh.log_speedup.mean == pytest.approx(8 * (math.log(0.5) - math.log(1.5)) / 12)


def test_newest_workspace_of_a_task_counts(tmp_path: Path) -> None:
    run = _run(tmp_path, "run_x", [_result(TASKS[0], 1.0), _result(TASKS[1], 1.0)])
    write_task_result(run / f"{TASKS[0].replace('/', '_')}_20261203_000000", _result(TASKS[0], 3.0))
    other = _run(tmp_path, "run_y", [_result(TASKS[0], 1.0), _result(TASKS[1], 1.0)])
    arms = load_arms([run, other])
    assert sorted(a.speedup or 0 for a in arms[0].attempts) == [1.0, 3.0]


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    a = _run(tmp_path, "run_a", [_result(TASKS[0], 1.0)])
    b = _run(tmp_path, "run_b", [_result(TASKS[1], 1.0)])
    with pytest.raises(CompareError, match="no such run directory"):
        load_arms([tmp_path / "missing", a])
    (tmp_path / "plain").mkdir()
    with pytest.raises(CompareError, match="no run_manifest.json"):
        load_arms([tmp_path / "plain", a])
    with pytest.raises(CompareError, match="no task in common"):
        compare_arms(load_arms([a, b]))
    with pytest.raises(CompareError, match="unknown arm 'nope'"):
        load_arms([a, b], ["run_a", "nope"])
    with pytest.raises(CompareError, match="needs two arms"):
        load_arms([a])
    with pytest.raises(CompareError, match="'run_a' is given twice"):
        load_arms([a, b], ["run_a", "run_a"])
    multi = [
        _run(tmp_path / str(i), "run_m", [_result(TASKS[0], 1.0, arm=arm, repeat=1) for arm in ("x", "y")])
        for i in (1, 2)
    ]
    with pytest.raises(CompareError, match="'x' names several arms"):
        load_arms(multi, ["x", "y"])
    assert [a.label for a in load_arms(multi, ["2/run_m:x", "1/run_m:x"])] == ["2/run_m:x", "1/run_m:x"]
    assert [a.label for a in load_arms(multi[:1], ["y", "x"])] == ["y", "x"]
    done = runner.invoke(app, ["compare", str(a), str(b), "--no-plots"])
    assert done.exit_code == 2 and "no task in common" in done.output


def test_cli_writes_json_markdown_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    a = _run(
        tmp_path,
        "run_a",
        [_result(t, 1.0 + 0.05 * i, arm="A", repeat=1) for i, t in enumerate(TASKS)]
        + [_result(t, 1.3 + 0.05 * i, arm="B", repeat=1) for i, t in enumerate(TASKS)],
    )
    out = tmp_path / "cmp"
    done = runner.invoke(app, ["compare", str(a), "--format", "json", "--out", str(out)])
    assert done.exit_code == 0, done.output
    data = json.loads((out / "comparison.json").read_text())
    assert data["pairs"][0]["treatment"] == "B" and data["pairs"][0]["wins"] == 12
    assert set(data["pairs"][0]["holm"]) == {"log_speedup_t", "log_speedup_wilcoxon", "correctness_mcnemar", "score_t"}
    assert (out / "forest_B_vs_A.png").stat().st_size > 1000 and (out / "speedup_distribution.png").is_file()
    assert "## B vs A" in (out / "comparison.md").read_text()
    table = runner.invoke(app, ["compare", str(a), "--no-plots", "--out", str(out)])
    assert table.exit_code == 0 and "verdict" in table.output and "Seed aggregates" in table.output
    assert runner.invoke(app, ["compare", str(a), "--format", "yaml"]).exit_code == 2


def test_a_tie_is_a_difference_inside_the_recorded_timing_intervals(tmp_path: Path) -> None:
    """2% apart with +-2% intervals: a tie for one attempt each, a win once four repeats narrow the means."""

    def run(name: str, speedup: float, repeats: int) -> Path:
        return _run(
            tmp_path / str(repeats),
            name,
            [_result(t, speedup, ci=0.02, arm="x", repeat=k) for t in TASKS[:3] for k in range(1, repeats + 1)],
        )

    for repeats, outcome in ((1, "tie"), (4, "win")):
        pair = compare_arms(load_arms([run("a", 1.0, repeats), run("b", 1.02, repeats)])).pairs[0]
        assert {r.outcome for r in pair.rows} == {outcome}, (repeats, pair.rows[0])
        assert pair.rows[0].tie_band == pytest.approx(math.sqrt(2 / repeats) * 0.02, rel=0.01)


def test_an_unsettled_difference_says_how_many_more_repeats_would_settle_it(tmp_path: Path) -> None:
    results = []
    for i, task in enumerate(TASKS):
        for k in (1, 2):
            results.append(_result(task, 1.0 + 0.05 * ((i + k) % 3 - 1), arm="A", repeat=k))
            results.append(_result(task, 1.01 * (1.0 + 0.05 * ((i + 2 * k + 1) % 3 - 1)), arm="B", repeat=k))
    pair = compare_arms(load_arms([_run(tmp_path, "run_x", results)]), CompareOptions(target_ratio=1.02)).pairs[0]
    assert pair.log_speedup.p_value > 0.05 and pair.power.power_at_target < 0.8
    k = pair.power.repeats_needed
    assert k is not None and k > 2
    assert pair.verdict.startswith("no significant speed difference")
    assert f"{k} repeats per arm ({k - 2} more than now) would detect 1.02x with 80% power" in pair.verdict
