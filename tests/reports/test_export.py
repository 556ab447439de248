"""`aka export`: one row per episode of real (toy) runs, from the run directory's files only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import toy_kernel_source
from typer.testing import CliRunner

from aka.cli import app
from aka.reports.export import EpisodeRow, run_rows
from aka.run.runner import run_experiment


@pytest.fixture
def resumed_run(make_toy_task, write_run_config) -> Path:
    """A run whose broken task was retried on resume (two episodes), next to a task that passed once."""
    task_dir = make_toy_task("triton2triton/toy/bad_baseline", kernel=toy_kernel_source(value=1))
    make_toy_task("triton2triton/toy/fine")
    config = write_run_config(agent={"template": "noop", "model": "policy-7b"})
    first = run_experiment(config)
    (task_dir / "kernel.py").write_text(toy_kernel_source())
    run_experiment(config, resume_run=first.run_dir)
    return Path(first.run_dir)


def test_rows_are_episodes_with_the_reward_components(resumed_run: Path) -> None:
    rows = run_rows(resumed_run)
    by_task = {task: [(r.status, r.latest) for r in rows if r.task == task] for task in {r.task for r in rows}}
    assert by_task == {
        "triton2triton/toy/bad_baseline": [("INFRA", False), ("PASS", True)],
        "triton2triton/toy/fine": [("PASS", True)],
    }
    fine = next(r for r in rows if r.task == "triton2triton/toy/fine")
    assert (fine.agent, fine.model, fine.arm, fine.repeat, fine.run) == (
        "noop",
        "policy-7b",
        None,
        None,
        resumed_run.name,
    )
    assert fine.compiled and fine.correct and fine.speedup == pytest.approx(1.0) and fine.score == pytest.approx(220.0)
    assert fine.failure_kind == "none" and fine.task_identity and fine.evaluation_seconds is not None
    prompt = resumed_run / fine.workspace / "prompt.md"
    assert fine.prompt_sha256 == hashlib.sha256(prompt.read_bytes()).hexdigest()
    infra = next(r for r in rows if r.status == "INFRA")
    assert infra.failure_kind == "infra_error" and infra.prompt_sha256 is None and infra.agent == "noop"


def test_cli_writes_jsonl_and_parquet(resumed_run: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["export", str(resumed_run), str(resumed_run)])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 6 and set(lines[0]) == set(EpisodeRow.model_fields)

    target = tmp_path / "out" / "episodes.jsonl"
    assert runner.invoke(app, ["export", str(resumed_run), "-o", str(target)]).exit_code == 0
    assert len(target.read_text().splitlines()) == 3

    pq = pytest.importorskip("pyarrow.parquet")
    parquet = tmp_path / "episodes.parquet"
    done = runner.invoke(app, ["export", str(resumed_run), "--format", "parquet", "--output", str(parquet)])
    assert done.exit_code == 0, done.output
    table = pq.read_table(parquet)
    assert table.num_rows == 3 and table.column_names == list(EpisodeRow.model_fields)
    assert str(table.schema.field("arm").type) == "string" and str(table.schema.field("repeat").type) == "int64"
    assert sorted(table.column("task").to_pylist()) == sorted(r.task for r in run_rows(resumed_run))


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, message in [
        (["export", str(tmp_path)], "not a run directory (no run_manifest.json)"),
        (["export", str(tmp_path), "--format", "csv"], "--format csv: use jsonl or parquet"),
    ]:
        out = runner.invoke(app, args)
        assert out.exit_code == 2 and message in " ".join(out.output.split()), out.output


def test_parquet_without_pyarrow_says_how_to_get_it(resumed_run: Path, tmp_path: Path, monkeypatch) -> None:
    import sys

    from aka.errors import AkaError
    from aka.reports.export import ExportFormat, export_runs

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(AkaError, match=r"needs pyarrow: pip install 'agentkernelarena\[export\]'"):
        export_runs([resumed_run], ExportFormat.PARQUET, tmp_path / "x.parquet")
    with pytest.raises(AkaError, match="needs --output FILE"):
        export_runs([resumed_run], ExportFormat.PARQUET, None)


def test_a_multi_arm_run_exports_each_trial_with_its_arm_repeat_and_model(make_toy_task, write_run_config) -> None:
    make_toy_task("triton2triton/toy/one")
    arms = [
        {"label": "small", "agent": {"template": "noop", "model": "policy-1b"}},
        {"label": "large", "agent": {"template": "noop", "model": "policy-70b"}},
    ]
    config = write_run_config(arms=arms, repeats=2)
    config.write_text(config.read_text().replace("agent:\n  template: noop\n", "", 1))
    run_dir = run_experiment(config).run_dir
    rows = run_rows(run_dir)
    assert sorted((r.arm, r.repeat, r.model, r.latest) for r in rows) == [
        ("large", 1, "policy-70b", True),
        ("large", 2, "policy-70b", True),
        ("small", 1, "policy-1b", True),
        ("small", 2, "policy-1b", True),
    ]
