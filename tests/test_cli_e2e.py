"""End-to-end: the real `aka` CLI and `main.py` as subprocesses on the real starter tasks (CPU)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import processes_under, toy_kernel_source

from aka.results.task_result import TaskResult, TaskStatus, read_task_result

REPO = Path(__file__).resolve().parents[1]
GELU = "triton2triton/basic/gelu"
STARTERS = [GELU, "torch2triton/basic/softmax", "cuda2cuda/basic/vector_add"]
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "200"
    return env


def _aka(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _config(tmp_path: Path, agent: dict[str, object], tasks: list[str], **extra: object) -> Path:
    config = {
        "agent": agent,
        "tasks": tasks,
        "target_gpu_model": "auto",
        "log_directory": "logs",
        "workspace_directory_prefix": "workspace",
        **extra,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _results(run_dir: Path) -> dict[str, TaskResult]:
    return {read_task_result(p).task_name: read_task_result(p) for p in run_dir.glob("*/task_result.yaml")}


def _run_dir(tmp_path: Path) -> Path:
    runs = sorted(tmp_path.glob("workspace_*_*/run_*"))
    assert len(runs) == 1, runs
    return runs[0]


def test_full_quickstart_run(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "example_configs/quickstart.yaml").read_text())
    assert config["agent"]["template"] == "autotune" and config["agent"]["max_iterations"] <= 4, "keep it a quick run"
    (tmp_path / "quick.yaml").write_text(yaml.safe_dump(config))
    done = _aka("run", "quick.yaml", cwd=tmp_path, timeout=900)  # 175-282 s next to other tests on two cores
    assert done.returncode == 0, done.stderr
    reports = Path(done.stdout.strip().splitlines()[-1])
    assert reports.is_dir() and reports.name == "reports"
    for name in ("overall_summary.csv", "task_type_breakdown.json", "overall_report.txt"):
        assert (reports / name).is_file()
    results = _results(reports.parent)
    assert set(results) == set(STARTERS)
    gelu, softmax, vector_add = (results[name] for name in STARTERS)
    assert gelu.status is TaskStatus.PASS and gelu.score >= 120
    assert softmax.status is TaskStatus.PASS and softmax.score >= 120
    assert vector_add.status is TaskStatus.SKIP
    assert "GPU" in (vector_add.failure_message or "")
    assert vector_add.agent and vector_add.agent.exit_reason == "skipped"
    for tuned in (gelu, softmax):
        assert tuned.agent and tuned.agent.ok and "autotune" in (tuned.agent.message or "")
    assert gelu.agent and gelu.agent.exit_reason == "max_iterations", gelu.agent
    assert f"tried {config['agent']['max_iterations']} of 24 variant(s)" in (gelu.agent.message or "")
    assert len(list(reports.parent.glob("triton2triton_basic_gelu_*/autotune_variants.json"))) == 1
    assert (tmp_path / "logs").is_dir() and any((tmp_path / "logs").iterdir())


def test_killed_run_resumes_and_does_each_task_once(tmp_path: Path) -> None:
    config = _config(tmp_path, {"template": "noop"}, STARTERS)
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "main.py"), "--config_name", str(config)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(tmp_path.glob("workspace_*/run_*/*/task_result.yaml")):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(list(tmp_path.glob("workspace_*/run_*/*/task_result.yaml"))) < len(STARTERS), "killed too late"

    done = subprocess.run(
        [sys.executable, str(REPO / "main.py"), "--config_name", str(config), "--resume-latest"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    finished = [e["task"] for e in events if e["event"] == "task_finished"]
    assert sorted(finished) == sorted(STARTERS), "every task must be finished exactly once"
    assert len({r.task_name for r in _results(run_dir).values()}) == len(STARTERS)
    report_lines = (run_dir / "reports" / "overall_report.txt").read_text()
    assert all(name in report_lines for name in STARTERS)


def test_malformed_configs_fail_cleanly_and_write_nothing(tmp_path: Path) -> None:
    bad_run = _config(tmp_path, {"template": "noop"}, [GELU], unexpected_field=1)
    done = _aka("run", str(bad_run), cwd=tmp_path)
    assert done.returncode == 2
    assert "run.yaml: field 'unexpected_field': unknown field" in done.stderr
    assert "Traceback" not in done.stderr

    tasks_root = tmp_path / "tasks"
    (tasks_root / "triton2triton/x/bad").mkdir(parents=True)
    (tasks_root / "triton2triton/x/bad/config.yaml").write_text("task_type: triton2triton\ncompile_command: ['true']\n")
    bad_task = _config(tmp_path, {"template": "noop"}, ["triton2triton/x/bad"], tasks_root=str(tasks_root))
    done = _aka("run", str(bad_task), cwd=tmp_path)  # named explicitly: strict (among `all` it is that task's INFRA)
    assert done.returncode == 2
    assert "bad/config.yaml: field 'correctness_command': required field is missing" in done.stderr

    done = _aka("run", str(_config(tmp_path, {"template": "noop"}, ["nope/never"])), cwd=tmp_path)
    assert done.returncode == 2 and "selector 'nope/never' matches no task" in done.stderr
    assert not list(tmp_path.glob("workspace_*")) and not (tmp_path / "logs").exists()


def test_tasks_list_and_doctor(tmp_path: Path) -> None:
    listed = _aka("tasks", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {row["name"] for row in json.loads(listed.stdout)}
    assert set(STARTERS) <= names
    doctor = _aka("doctor", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stderr
    assert "noop" in doctor.stdout and "replay" in doctor.stdout and "triton" in doctor.stdout
    on_gpu = "this GPU" in doctor.stdout
    assert ("0 skipped" if on_gpu else "cuda2cuda/basic/vector_add (CUDA kernels need a GPU)") in doctor.stdout
    assert "built in" in doctor.stdout, "each agent says what it is ready with"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_run_stops_every_step_it_started(
    tmp_path: Path, make_toy_task, write_run_config, stop: signal.Signals
) -> None:
    """Preemption (Slurm, Kubernetes) sends SIGTERM to `aka` alone, and `kill -9` leaves it no
    chance to clean up: the step hanging in candidate code goes with it, at once, not after its
    timeout."""
    make_toy_task(
        kernel="import time\nVALUE = 42\nTIME_MS = 1.0\n\ndef toy_kernel():\n    time.sleep(3600)\n",
        correctness_timeout=3600,
    )
    config = write_run_config()
    proc = subprocess.Popen(
        [sys.executable, "-m", "aka.cli", "run", str(config)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("harness.py correctness" in p for p in processes_under(tmp_path)):
            time.sleep(0.2)
        assert any("harness.py correctness" in p for p in processes_under(tmp_path)), "the step never started"
        time.sleep(1.0)  # the step reads its token and calls the hanging kernel
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == (128 + signal.SIGTERM if stop == signal.SIGTERM else -signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and processes_under(tmp_path):
            time.sleep(0.2)
        assert processes_under(tmp_path) == [], "a step process outlived the run"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_run_with_a_task_that_could_not_be_judged_exits_non_zero(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    """A broken pristine baseline is an infrastructure failure: the reports are written, and the
    exit status says that the run is not complete (a script or a scheduler must not take it as done)."""
    make_toy_task("triton2triton/toy/bad_baseline", kernel=toy_kernel_source(value=1))
    make_toy_task("triton2triton/toy/fine")
    done = subprocess.run(
        [sys.executable, "-m", "aka.cli", "run", str(write_run_config())],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 3, done.stderr
    assert "1 of 2 task(s) ended in an infrastructure failure" in done.stderr
    assert "triton2triton/toy/bad_baseline" in done.stderr and "--resume-run" in done.stderr
    assert Path(done.stdout.strip().splitlines()[-1], "overall_summary.csv").is_file()
