"""Multi-arm runs end to end on toy tasks: config checks, the interleaved order, per-arm reports, resume, compare."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import toy_kernel_source
from rich.console import Console
from typer.testing import CliRunner

from aka.agents.check import run_checks
from aka.cli import app
from aka.config.run_config import load_run_config
from aka.errors import ConfigError
from aka.run.layout import MANIFEST_NAME, SCHEDULE_NAME
from aka.run.runner import run_experiment

TASKS = ("triton2triton/toy/one", "triton2triton/toy/two")


def _arms(solutions: Path) -> list[dict[str, object]]:
    return [
        {"label": "noop", "agent": {"template": "noop"}},
        {"label": "replayed", "agent": {"template": "replay", "solutions_dir": str(solutions)}},
    ]


@pytest.fixture
def solutions(tmp_path: Path) -> Path:
    for task in TASKS:
        target = tmp_path / "solutions" / task / "kernel.py"
        target.parent.mkdir(parents=True)
        target.write_text(toy_kernel_source(time_ms=2.0))
    return tmp_path / "solutions"


def test_arms_config_errors_name_the_field(write_run_config, solutions: Path) -> None:
    both = write_run_config(arms=_arms(solutions))
    with pytest.raises(ConfigError, match="'agent' and 'arms': give exactly one"):
        load_run_config(both)
    twice = write_run_config(arms=[_arms(solutions)[0], _arms(solutions)[0]])
    twice.write_text(twice.read_text().replace("agent:\n  template: noop\n", "", 1))
    with pytest.raises(ConfigError, match="'arms.1.label': 'noop' is used twice"):
        load_run_config(twice)
    unknown = write_run_config(arms=[_arms(solutions)[0], {"label": "x", "agent": {"template": "nope"}}])
    unknown.write_text(unknown.read_text().replace("agent:\n  template: noop\n", "", 1))
    with pytest.raises(ConfigError, match="'arms.1.agent.template': unknown agent 'nope'"):
        load_run_config(unknown)
    bad_option = write_run_config(arms=[_arms(solutions)[0], {"label": "r", "agent": {"template": "replay"}}])
    bad_option.write_text(bad_option.read_text().replace("agent:\n  template: noop\n", "", 1))
    with pytest.raises(ConfigError, match="field 'arms.1.agent.solutions_dir'"):
        load_run_config(bad_option)


def test_two_arms_with_repeats_run_interleaved_and_compare(
    make_toy_task, write_run_config, solutions: Path, tmp_path: Path
) -> None:
    for task in TASKS:
        make_toy_task(task)
    config = write_run_config(arms=_arms(solutions), repeats=2, schedule_seed=5)
    config.write_text(config.read_text().replace("agent:\n  template: noop\n", "", 1))
    shown = io.StringIO()
    outcome = run_experiment(config, console=Console(file=shown, width=200))
    run_dir = outcome.run_dir
    assert run_dir.parent.name.endswith("_arms-noop-replayed")
    assert "triton2triton/toy/one [replayed r2] score=320.0" in shown.getvalue()
    assert len(outcome.results) == 8
    assert {(r.arm, r.repeat) for r in outcome.results} == {(a, k) for a in ("noop", "replayed") for k in (1, 2)}
    assert [r.speedup_ratio for r in outcome.results if r.arm == "replayed"] == [pytest.approx(2.0)] * 4
    assert [r.speedup_ratio for r in outcome.results if r.arm == "noop"] == [pytest.approx(1.0)] * 4

    manifest = json.loads((run_dir / MANIFEST_NAME).read_text())
    assert (manifest["arms"], manifest["repeats"], manifest["schedule_seed"]) == (["noop", "replayed"], 2, 5)
    schedule = json.loads((run_dir / SCHEDULE_NAME).read_text())
    order = [(t["task"], t["arm"], t["repeat"]) for t in schedule["trials"]]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["task"], e["arm"], e["repeat"]) for e in events if e["event"] == "task_started"] == order
    assert [k for _, _, k in order] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert len(list(run_dir.glob("baselines/*.json"))) == 2  # one frozen baseline per task, shared by the arms
    for arm in ("noop", "replayed"):
        breakdown = json.loads((run_dir / "reports" / "arms" / arm / "task_type_breakdown.json").read_text())
        assert breakdown["overall"]["task_count"] == 4
    assert json.loads((run_dir / "reports" / "task_type_breakdown.json").read_text())["overall"]["task_count"] == 8

    resumed = run_experiment(config, resume_run=run_dir)
    assert sorted(r.model_dump_json() for r in resumed.results) == sorted(r.model_dump_json() for r in outcome.results)
    assert (
        sum(json.loads(line)["event"] == "task_reused" for line in (run_dir / "events.jsonl").read_text().splitlines())
        == 8
    )

    done = CliRunner().invoke(
        app, ["compare", str(run_dir), "--format", "json", "--out", str(tmp_path / "cmp"), "--no-plots"]
    )
    assert done.exit_code == 0, done.output
    pair = json.loads((tmp_path / "cmp" / "comparison.json").read_text())["pairs"][0]
    assert (pair["control"], pair["treatment"], pair["tasks"]) == ("noop", "replayed", 2)
    assert pair["speedup_ratio"] == pytest.approx(2.0)
    assert pair["wins"] == 2


def test_a_repeated_single_arm_run_labels_its_repeats(make_toy_task, write_run_config) -> None:
    make_toy_task(TASKS[0])
    outcome = run_experiment(write_run_config(repeats=2))
    assert sorted(r.repeat or 0 for r in outcome.results) == [1, 2] and {r.arm for r in outcome.results} == {None}
    assert sorted(p.name.split("__")[1][:2] for p in outcome.run_dir.glob("triton2triton_toy_one__r*")) == ["r1", "r2"]
    events = [json.loads(line) for line in (outcome.run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["repeat"]) for e in events if e["event"] != "task_phase"] == [
        ("task_started", 1),
        ("task_finished", 1),
        ("task_started", 2),
        ("task_finished", 2),
    ]
    assert [e["phase"] for e in events if e["event"] == "task_phase" and e["repeat"] == 1] == [
        "baseline",
        "agent",
        "compile",
        "correctness",
        "performance",
    ]
    assert not any("arm" in e for e in events)


def test_check_agents_checks_every_arm(write_run_config, solutions: Path) -> None:
    config = write_run_config(arms=_arms(solutions))
    config.write_text(config.read_text().replace("agent:\n  template: noop\n", "", 1))
    assert [(c.name, c.ready) for c in run_checks("all", False, config)] == [("noop", True), ("replay", True)]


def test_a_plain_single_arm_run_is_laid_out_as_before(make_toy_task, write_run_config) -> None:
    make_toy_task(TASKS[0])
    outcome = run_experiment(write_run_config())
    manifest = json.loads((outcome.run_dir / MANIFEST_NAME).read_text())
    assert not {"arms", "repeats", "schedule_seed"} & set(manifest["config"]) and manifest["agent"] == "noop"
    assert not (outcome.run_dir / SCHEDULE_NAME).exists() and not (outcome.reports_dir / "arms").exists()
    (workspace,) = outcome.run_dir.glob("triton2triton_toy_one_*")
    assert "__" not in workspace.name
    result = outcome.results[0]
    assert (result.arm, result.repeat) == (None, None)
    assert "arm: null" in (workspace / "task_result.yaml").read_text()


def test_two_single_arm_runs_with_suffixes_compare(
    make_toy_task, write_run_config, solutions: Path, tmp_path: Path
) -> None:
    """The seed's A/B: the same config twice with different --run-suffix (here one per agent), compared."""
    for task in TASKS:
        make_toy_task(task)
    noop = run_experiment(write_run_config(), suffix="a")
    replayed = run_experiment(
        write_run_config(agent={"template": "replay", "solutions_dir": str(solutions)}), suffix="b"
    )
    done = CliRunner().invoke(
        app,
        [
            "compare",
            str(noop.run_dir),
            str(replayed.run_dir),
            "--format",
            "json",
            "--out",
            str(tmp_path / "cmp"),
            "--no-plots",
        ],
    )
    assert done.exit_code == 0, done.output
    pair = json.loads(done.stdout)["pairs"][0]
    assert pair["control"].endswith("_a") and pair["treatment"].endswith("_b") and pair["tasks"] == 2
    assert pair["speedup_ratio"] == pytest.approx(2.0)
