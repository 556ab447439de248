"""Whole runs in-process on toy tasks: every outcome kind, reports, resume and frozen baselines."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from conftest import toy_kernel_source

from aka.errors import ConfigError, PreflightError
from aka.evaluation.sandbox import detect_sandbox
from aka.results.task_result import FailureKind, TaskStatus, read_task_result
from aka.run.layout import MANIFEST_NAME
from aka.run.runner import run_experiment

CASES = {
    "good": toy_kernel_source(time_ms=2.0),
    "wrong": toy_kernel_source(value=41),
    "broken": "def toy_kernel(:\n",
    "renamed": "VALUE = 42\nTIME_MS = 1.0\n\ndef other():\n    return 42\n",
    "crash": "import os\nVALUE = 42\nTIME_MS = 1.0\n\ndef toy_kernel():\n    os._exit(7)\n",
    "hang": "import time\nVALUE = 42\nTIME_MS = 1.0\n\ndef toy_kernel():\n    time.sleep(600)\n",
    "import_error": "import not_a_real_module_xyz\n\ndef toy_kernel():\n    return 42\n",
}


def _events(run_dir: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.fixture
def solutions(tmp_path: Path) -> Path:
    root = tmp_path / "solutions"
    for name, source in CASES.items():
        target = root / f"triton2triton/toy/{name}" / "kernel.py"
        target.parent.mkdir(parents=True)
        target.write_text(source)
    return root


def test_replayed_candidates_get_the_right_verdicts(make_toy_task, write_run_config, solutions: Path) -> None:
    for name in CASES:
        make_toy_task(f"triton2triton/toy/{name}", correctness_timeout=3)
    make_toy_task("triton2triton/toy/unsolved")
    config = write_run_config(agent={"template": "replay", "solutions_dir": str(solutions)})
    outcome = run_experiment(config)
    results = {r.task_name.split("/")[-1]: r for r in outcome.results}

    good = results["good"]
    assert (good.status, good.failure_kind) == (TaskStatus.PASS, FailureKind.NONE)
    assert good.speedup_ratio == pytest.approx(2.0)
    assert good.score == pytest.approx(320.0)
    assert good.base_execution_time == pytest.approx(6.0) and good.best_optimized_execution_time == pytest.approx(3.0)
    assert good.benchmark_method_consistent and good.valid_baseline_cases == 2 == good.valid_optimized_cases
    assert [c.speedup for c in good.cases] == [pytest.approx(2.0), pytest.approx(2.0)]
    assert good.agent is not None and good.agent.files_changed == ["kernel.py"]

    expected = {
        "wrong": (TaskStatus.PARTIAL, FailureKind.INCORRECT, 20.0),
        "broken": (TaskStatus.FAIL, FailureKind.COMPILE_ERROR, 0.0),
        "renamed": (TaskStatus.FAIL, FailureKind.MISSING_KERNEL, 0.0),
        "crash": (TaskStatus.PARTIAL, FailureKind.CRASH, 20.0),
        "hang": (TaskStatus.PARTIAL, FailureKind.TIMEOUT, 20.0),
        "import_error": (TaskStatus.FAIL, FailureKind.COMPILE_ERROR, 0.0),
    }
    for name, (status, kind, score) in expected.items():
        assert (results[name].status, results[name].failure_kind, results[name].score) == (status, kind, score), name
    assert "timed out" in (results["hang"].correctness_error_message or "")
    assert "SyntaxError" in (results["broken"].compilation_error_message or "")
    assert "not_a_real_module_xyz" in (results["import_error"].compilation_error_message or "")

    unsolved = results["unsolved"]  # the replay agent had no solution: it failed and changed nothing
    assert unsolved.failure_kind is FailureKind.AGENT_ERROR and unsolved.agent and not unsolved.agent.ok
    assert (unsolved.status, unsolved.score, unsolved.pass_compilation) == (TaskStatus.FAIL, 0.0, False)

    reports = outcome.reports_dir
    csv_lines = (reports / "overall_summary.csv").read_text().splitlines()
    assert csv_lines[0].startswith("Task Name,Task Type,Score,Speedup,Optimization_summary")
    assert len(csv_lines) == 1 + len(results)
    breakdown = json.loads((reports / "task_type_breakdown.json").read_text())
    assert breakdown["overall"]["task_count"] == len(results)
    assert "PASS" in (reports / "overall_report.txt").read_text()


def test_broken_baseline_is_infra_and_resume_retries_it(make_toy_task, write_run_config) -> None:
    task_dir = make_toy_task("triton2triton/toy/bad_baseline", kernel=toy_kernel_source(value=1))
    make_toy_task("triton2triton/toy/fine")
    config = write_run_config()
    first = run_experiment(config)
    by_name = {r.task_name: r for r in first.results}
    bad = by_name["triton2triton/toy/bad_baseline"]
    assert bad.status is TaskStatus.INFRA and bad.failure_kind is FailureKind.INFRA_ERROR
    assert "pristine task" in (bad.failure_message or "")
    assert by_name["triton2triton/toy/fine"].speedup_ratio == pytest.approx(1.0)

    (task_dir / "kernel.py").write_text(toy_kernel_source())
    second = run_experiment(config, resume_run=first.run_dir)
    assert {r.task_name: r.status for r in second.results} == {
        "triton2triton/toy/bad_baseline": TaskStatus.PASS,
        "triton2triton/toy/fine": TaskStatus.PASS,
    }
    events = [(e["event"], e["task"]) for e in _events(first.run_dir)]
    assert ("task_reused", "triton2triton/toy/fine") in events
    assert events.count(("task_started", "triton2triton/toy/bad_baseline")) == 2
    assert events.count(("task_started", "triton2triton/toy/fine")) == 1


def test_resume_redoes_tasks_whose_evidence_changed(make_toy_task, write_run_config) -> None:
    make_toy_task("triton2triton/toy/a")
    task_b = make_toy_task("triton2triton/toy/b")
    config = write_run_config()
    first = run_experiment(config, suffix="ab")
    assert first.run_dir.name.endswith("_ab")
    baseline_file = first.run_dir / "baselines" / "triton2triton_toy_a.json"
    frozen = baseline_file.read_text()
    workspace_a = next(p for p in first.run_dir.iterdir() if p.name.startswith("triton2triton_toy_a_"))
    (workspace_a / "work" / "kernel.py").write_text(toy_kernel_source(time_ms=1.0))
    (task_b / "harness.py").write_text((task_b / "harness.py").read_text() + "\n# harness changed\n")

    second = run_experiment(config, resume_latest=True)
    assert second.run_dir == first.run_dir
    events = [(e["event"], e["task"]) for e in _events(first.run_dir)]
    assert events.count(("task_started", "triton2triton/toy/a")) == 2
    assert events.count(("task_started", "triton2triton/toy/b")) == 2
    assert baseline_file.read_text() == frozen, "resume re-measured a baseline whose task did not change"
    newest_a = sorted(p for p in first.run_dir.iterdir() if p.name.startswith("triton2triton_toy_a_"))[-1]
    assert not (newest_a / "baseline").exists()
    assert (workspace_a / "work" / "kernel.py").exists(), "the old workspace must be kept, not overwritten"
    manifest = json.loads((first.run_dir / MANIFEST_NAME).read_text())
    assert len(manifest["resumed_at"]) == 1

    third = run_experiment(config, resume_run=first.run_dir)
    assert all(r.status is TaskStatus.PASS for r in third.results)
    events = [(e["event"], e["task"]) for e in _events(first.run_dir)]
    assert events.count(("task_reused", "triton2triton/toy/a")) == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "deleted"])
def test_resume_reruns_a_task_whose_result_file_was_damaged(make_toy_task, write_run_config, damage: str) -> None:
    make_toy_task("triton2triton/toy/a")
    make_toy_task("triton2triton/toy/b")
    first = run_experiment(write_run_config())
    result = next(first.run_dir.glob("triton2triton_toy_a_*/task_result.yaml"))
    if damage == "deleted":
        result.unlink()
    else:
        text = result.read_text()
        result.write_text("{{{ not: yaml: [" if damage == "garbage" else text[: len(text) // 2])
    second = run_experiment(write_run_config(), resume_latest=True)
    events = [(e["event"], e["task"]) for e in _events(first.run_dir)]
    assert events.count(("task_started", "triton2triton/toy/a")) == 2, "the damaged result is re-run"
    assert events.count(("task_started", "triton2triton/toy/b")) == 1
    assert sorted(r.task_name for r in second.results) == ["triton2triton/toy/a", "triton2triton/toy/b"]
    assert all(r.status is TaskStatus.PASS for r in second.results)


def test_skipped_step_is_skip_not_failure(make_toy_task, write_run_config) -> None:
    task_dir = make_toy_task("cuda2cuda/toy/gpu_only")
    harness = task_dir / "harness.py"
    harness.write_text(
        harness.read_text().replace(
            'out = {"format": "aka-step-report/1", "step": step, "status": "ok", "cases": []}',
            'out = {"format": "aka-step-report/1", "step": step, "status": "ok", "cases": []}\n'
            'if step != "compile":\n'
            '    out.update(status="skipped", message="needs an NVIDIA GPU; this machine has none")\n'
            "    tok = sys.stdin.readline().strip()\n"
            '    os.write(int(os.environ["AKA_RESULT_FD"]), json.dumps({"token": tok, "report": out}).encode())\n'
            "    sys.exit(0)",
        )
    )
    outcome = run_experiment(write_run_config())
    result = outcome.results[0]
    assert result.status is TaskStatus.SKIP and result.failure_kind is FailureKind.SKIPPED
    assert result.pass_compilation and "needs an NVIDIA GPU" in (result.failure_message or "")
    assert "SKIP" in (outcome.reports_dir / "overall_report.txt").read_text()


def test_scorer_from_module_path(make_toy_task, write_run_config, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "my_scorer.py").write_text("def score(result):\n    return 7.0 if result.pass_correctness else -1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    make_toy_task()
    outcome = run_experiment(write_run_config(scorer="my_scorer:score"))
    assert outcome.results[0].score == 7.0 and outcome.results[0].scorer == "my_scorer:score"
    with pytest.raises(ConfigError, match="field 'scorer'"):
        run_experiment(write_run_config(scorer="no_such_scorer"))


def test_bad_inputs_write_nothing(make_toy_task, write_run_config, tmp_path: Path) -> None:
    make_toy_task()
    with pytest.raises(PreflightError, match="target_gpu_model.*does not match"):
        run_experiment(write_run_config(target_gpu_model="H100"))
    with pytest.raises(ConfigError, match="matches no task"):
        run_experiment(write_run_config(tasks=["cuda2cuda"]))
    broken = make_toy_task("triton2triton/toy/broken_config")
    raw = yaml.safe_load((broken / "config.yaml").read_text())
    raw["source_file_path"] = ["missing.py"]
    (broken / "config.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="broken_config/config.yaml: field 'source_file_path'"):
        run_experiment(write_run_config(tasks=["triton2triton/toy/broken_config"]))  # named: strict
    assert not any(tmp_path.glob("workspace_*")) and not (tmp_path / "logs").exists()


def test_result_file_round_trips(make_toy_task, write_run_config) -> None:
    make_toy_task()
    outcome = run_experiment(write_run_config())
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    raw = yaml.safe_load((workspace / "task_result.yaml").read_text())
    for field in (
        "task_name",
        "pass_compilation",
        "compilation_error_message",
        "pass_correctness",
        "correctness_error_message",
        "base_execution_time",
        "best_optimized_execution_time",
        "speedup_ratio",
        "baseline_benchmark_methods",
        "optimized_benchmark_methods",
        "benchmark_method_consistent",
        "valid_baseline_cases",
        "valid_optimized_cases",
        "speedup_calculation_error_message",
        "optimization_summary",
        "score",
        "schema_version",
    ):
        assert field in raw, field
    assert read_task_result(workspace / "task_result.yaml") == outcome.results[0]
    assert (workspace / "prompt.md").read_text().count("toy_kernel") >= 1


def test_exports_run_only_for_accepted_candidates(make_toy_task, write_run_config, solutions: Path) -> None:
    exports = ['cp kernel.py "$AKA_EXPORT_DIR/kernel.py"', "exit 3"]
    make_toy_task("triton2triton/toy/good", export_command=exports)
    make_toy_task("triton2triton/toy/wrong", export_command=exports)
    outcome = run_experiment(write_run_config(agent={"template": "replay", "solutions_dir": str(solutions)}))
    results = {r.task_name.split("/")[-1]: r for r in outcome.results}
    assert results["good"].exports == {exports[0]: True, exports[1]: False}
    assert results["wrong"].exports == {}
    good_ws = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_good_"))
    assert (good_ws / "exports" / "kernel.py").read_text() == CASES["good"]
    assert not any(p.name == "exports" for p in outcome.run_dir.glob("triton2triton_toy_wrong_*/*"))


@pytest.mark.skipif(not detect_sandbox().confines, reason="no read-only-filesystem sandbox here")
def test_exports_run_confined_as_a_step(
    make_toy_task, write_run_config, solutions: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export runs the candidate's code: confined like a step, it cannot write the run's files
    (a red team's export rewrote the frozen baseline and failed a later honest trial), see the
    evaluator's secrets, leave a process behind (one outlived `aka run`), or write or print past
    a step's limits (lowered here; unlimited, one could fill the disk the evaluator writes to)."""
    from aka.evaluation import disk_quota, step_process

    monkeypatch.setenv("MY_REWARD_TOKEN", "s3cr3t")
    monkeypatch.setattr(disk_quota, "STEP_DISK_QUOTA_BYTES", 2**20)
    monkeypatch.setattr(step_process, "STEP_OUTPUT_LIMIT_BYTES", 2**20)
    allowed = [
        'cp kernel.py "$AKA_EXPORT_DIR/kernel.py"',
        'test -z "$MY_REWARD_TOKEN" && ! grep -q s3cr3t /proc/self/environ',
        'setsid sh -c "sleep 2; touch "$AKA_EXPORT_DIR/lingered"" > /dev/null 2>&1 &',
    ]
    refused = [
        "touch ../../escaped",
        'head -c 3000000 /dev/zero > "$AKA_EXPORT_DIR/big"; sleep 2',
        "head -c 3000000 /dev/zero > big",
        "head -c 3000000 /dev/zero",  # printed past the limit and ended before the first check
        "head -c 3000000 /dev/zero; sleep 2",
    ]
    make_toy_task("triton2triton/toy/good", export_command=allowed + refused)
    outcome = run_experiment(write_run_config(agent={"template": "replay", "solutions_dir": str(solutions)}))
    assert outcome.results[0].exports == dict.fromkeys(allowed, True) | dict.fromkeys(refused, False)
    assert not (outcome.run_dir / "escaped").exists()
    good_ws = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_good_"))
    time.sleep(3)
    assert (good_ws / "exports" / "kernel.py").is_file() and not (good_ws / "exports" / "lingered").exists()


def test_editing_the_harness_in_the_workspace_is_tampering(make_toy_task, write_run_config) -> None:
    from aka.agents import register_agent
    from aka.results.task_result import AgentOutcome

    @register_agent("test_harness_editor")
    def launch_agent(eval_config, task_config_dir: Path, workspace: Path) -> AgentOutcome:
        (workspace / "harness.py").write_text("# the reference now agrees with anything\n")
        (workspace / "notes.txt").write_text("new files are fine")
        return AgentOutcome(agent=eval_config.agent_name)

    make_toy_task()
    result = run_experiment(write_run_config(agent={"template": "test_harness_editor"})).results[0]
    assert result.failure_kind is FailureKind.TAMPERING and result.tampered_files == ["harness.py"]
    assert result.score == 0 and result.pass_correctness, "evaluation itself used the pristine harness"


def _leave_a_sparse_terabyte(path: Path) -> None:
    path.unlink()
    with open(path, "wb") as sparse:
        sparse.truncate(2**40)


def _leave_a_linked_kernel(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.parent.parent / "planted.py")
    (path.parent.parent / "planted.py").write_text(toy_kernel_source(time_ms=0.5))


def _leave_a_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("leave", "file", "kind", "message"),
    [
        (_leave_a_sparse_terabyte, "kernel.py", FailureKind.COMPILE_ERROR, "kernel.py: 1099511627776 bytes, more than"),
        (_leave_a_linked_kernel, "kernel.py", FailureKind.COMPILE_ERROR, "kernel.py: is a symbolic link"),
        (_leave_a_fifo, "kernel.py", FailureKind.COMPILE_ERROR, "not a plain file"),
        (_leave_a_sparse_terabyte, "harness.py", FailureKind.TAMPERING, "harness.py"),
    ],
    ids=["terabyte_kernel", "linked_kernel", "fifo_kernel", "terabyte_harness"],
)
def test_files_the_judge_will_not_read_are_the_agents_failure(
    make_toy_task, write_run_config, leave, file: str, kind: FailureKind, message: str
) -> None:
    """A red team's 1 TiB sparse kernel.py (or harness.py) made the judge raise MemoryError
    reading it whole: an infra_error, which drops the reward instead of failing the agent."""
    from aka.agents import register_agent
    from aka.results.task_result import AgentOutcome

    agent_name = f"test_unreadable_{leave.__name__.strip('_')}_{file}"

    @register_agent(agent_name)
    def launch_agent(eval_config, task_config_dir: Path, workspace: Path) -> AgentOutcome:
        leave(workspace / file)
        return AgentOutcome(agent=eval_config.agent_name)

    make_toy_task()
    config = write_run_config(agent={"template": agent_name})
    outcome = run_experiment(config)
    result = outcome.results[0]
    assert result.failure_kind is kind and result.score == 0, result.failure_message
    assert message in (result.failure_message or "") + " ".join(result.tampered_files)
    assert result.agent is not None and (file != "kernel.py" or result.agent.files_changed == ["kernel.py"])
    again = run_experiment(config, resume_run=outcome.run_dir)
    assert again.results[0].failure_kind is kind
    assert ("task_reused", result.task_name) in [(e["event"], e["task"]) for e in _events(outcome.run_dir)]


HELDOUT_CHECK = """
if step != "compile" and os.environ.get("AKA_CASE_PROFILE", "").startswith("heldout") and kernel is not None:
    namespace = {}
    exec(open("heldout.py").read(), namespace)
    general = getattr(kernel, "GENERAL", False) == namespace["EXPECTED_GENERAL"]
    for case in out["cases"]:
        case["id"] = "held_" + case["id"]
        if step == "correctness":
            case["correct"] = case["correct"] and general
"""


def test_heldout_cases_stay_hidden_and_measure_generalization(make_toy_task, write_run_config, tmp_path: Path) -> None:
    task_dir = make_toy_task(
        "triton2triton/toy/general", kernel=toy_kernel_source() + "GENERAL = True\n", hidden_files=["heldout.py"]
    )
    (task_dir / "heldout.py").write_text("EXPECTED_GENERAL = True\n")
    harness = task_dir / "harness.py"
    harness.write_text(harness.read_text().replace("token = sys.stdin", HELDOUT_CHECK + "token = sys.stdin"))
    solutions = tmp_path / "sols"
    for name, extra in (("general", "GENERAL = True\n"), ("tuned", "")):
        (solutions / name / "triton2triton/toy/general").mkdir(parents=True)
        (solutions / name / "triton2triton/toy/general/kernel.py").write_text(toy_kernel_source(time_ms=2.0) + extra)
    verdicts = {}
    for name in ("general", "tuned"):
        outcome = run_experiment(
            write_run_config(agent={"template": "replay", "solutions_dir": str(solutions / name)}), suffix=name
        )
        result = outcome.results[0]
        workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_general_"))
        assert (
            not (workspace / "work" / "heldout.py").exists()
            and "EXPECTED_GENERAL" not in (workspace / "prompt.md").read_text()
        )
        assert result.status is TaskStatus.PASS and result.failure_kind is FailureKind.NONE, result.failure_message
        assert result.heldout is not None
        verdicts[name] = result.heldout
    assert verdicts["general"].outcome.value == "both_pass" and verdicts["general"].speedup_ratio == pytest.approx(2.0)
    assert verdicts["general"].generalization_gap == pytest.approx(0.0)
    assert [c.id for c in verdicts["general"].cases] == ["held_c1", "held_c2"]
    assert verdicts["tuned"].outcome.value == "opt_regression" and not verdicts["tuned"].candidate_correct
    breakdown = json.loads((outcome.reports_dir / "task_type_breakdown.json").read_text())
    assert breakdown["heldout"]["outcomes"]["opt_regression"] == 1
    assert breakdown["heldout"]["correctness_retention"] == 0
    assert "Correctness retention: 0.0" in (outcome.reports_dir / "overall_report.txt").read_text()
    # heldout: after leaves them to `aka heldout RUN` (an A/B experiment's GPU time halves)
    later = run_experiment(
        write_run_config(agent={"template": "replay", "solutions_dir": str(solutions / "general")}, heldout="after"),
        suffix="after",
    )
    assert later.results[0].status is TaskStatus.PASS and later.results[0].heldout is None
    assert not any(later.run_dir.glob("*/evaluation_heldout"))
    assert "heldout" not in json.loads((later.reports_dir / "task_type_breakdown.json").read_text())


def test_edited_sources_are_the_editable_files_the_agent_changed(make_toy_task, tmp_path: Path) -> None:
    from aka.config.tasks import load_task
    from aka.run.task_pipeline import copy_for_agent, edited_sources

    directory = make_toy_task("triton2triton/toy/edits")
    task = load_task(directory.parents[2], directory)
    work = tmp_path / "work"
    copy_for_agent(task, work)
    assert edited_sources(task, work) == []
    (work / "kernel.py").write_text((work / "kernel.py").read_text() + "\n# tuned\n")
    assert edited_sources(task, work) == ["kernel.py"]
    (work / "kernel.py").unlink()
    assert edited_sources(task, work) == ["kernel.py"]
