"""The Slurm backend against a real single-node Slurm (tests/slurm_cluster.py), started once for
the module: `aka slurm submit --wait` runs every trial once, each worker masked by Slurm to its
own GPU; status and cancel work and a cancelled run resumes locally; a job requeued mid-run
resumes through the queue's leases with nothing counted twice. Skipped where Slurm cannot be
installed (not root, no apt-get)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import processes_under
from slurm_cluster import SlurmCluster, missing_reason
from typer.testing import CliRunner

from aka.evaluation.sandbox import ENV_STEP_VIEW
from aka.parallel.queue import QUEUE_DIR, STATES, TrialEntry
from aka.parallel.slurm import SlurmError, SlurmRequest, cancel, status, submit
from aka.parallel.slurm_cli import slurm_app

REPO = Path(__file__).resolve().parents[2]
SLOW_KERNEL = (
    "import time\nVALUE = 42\nTIME_MS = 1.0\n\n\ndef toy_kernel():\n    time.sleep({seconds})\n    return VALUE\n"
)
GATED_KERNEL = (
    "import os\nimport time\nVALUE = 42\nTIME_MS = 1.0\n\n\ndef toy_kernel():\n"
    "    while not os.path.exists({gate!r}):\n        time.sleep(0.1)\n    return VALUE\n"
)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm")]  # one Slurm for the module, on one worker


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        assert processes_under(cluster.root, by_command_line=True) == [], "a Slurm daemon outlived the tests"


def _env(cluster: SlurmCluster) -> dict[str, str]:
    env: dict[str, str] = cluster.env
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "200"
    if ENV_STEP_VIEW in os.environ:  # a test's gate (`_gate`)
        env[ENV_STEP_VIEW] = os.environ[ENV_STEP_VIEW]
    return env


def _gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where a gated kernel's gate appears: in a folder its steps see (`AKA_STEP_VIEW`; a step sees
    nothing else outside the system's folders and its own), so the test can open it later."""
    folder = tmp_path / "gates"
    folder.mkdir()
    monkeypatch.setenv(ENV_STEP_VIEW, str(folder))
    return folder / "open"


def _aka(cluster: SlurmCluster, cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", *args],
        cwd=cwd,
        env=_env(cluster),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _start(cluster: SlurmCluster, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aka.cli", *args],
        cwd=cwd,
        env=_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, what: str, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _run_dir(tmp_path: Path) -> Path | None:
    runs = sorted((tmp_path / "workspace_cpu_noop").glob("run_*"))
    return runs[0] if runs else None


def _queue(run_dir: Path) -> dict[str, list[TrialEntry]]:
    found: dict[str, list[TrialEntry]] = {}
    for state in STATES:
        found[state] = []
        for path in sorted((run_dir / QUEUE_DIR / state).glob("*.json")):
            try:
                found[state].append(TrialEntry.model_validate_json(path.read_text()))
            except (OSError, ValueError):
                continue  # moved or being replaced as we read
    return found


def _started(run_dir: Path) -> Counter[str]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return Counter(e["task"] for e in events if e["event"] == "task_started")


def _summary_tasks(run_dir: Path) -> list[str]:
    with (run_dir / "reports" / "overall_summary.csv").open() as handle:
        return sorted(row["Task Name"] for row in csv.DictReader(handle))


def _job_states(cluster: SlurmCluster, run_dir: Path) -> dict[str, str]:
    """`aka slurm status`'s job states, called in this process (the CLI takes ~40 s to import on
    a loaded two-core machine; the CLI itself is run once, in the cancel test)."""
    with cluster.environment():
        return {job.role: job.state for job in status(run_dir).jobs}


def _worker_masks(run_dir: Path, seen: dict[str, str]) -> None:
    """The CUDA_VISIBLE_DEVICES of each worker holding a trial now, read from its process."""
    for entry in _queue(run_dir)["running"]:
        if entry.lease is None:
            continue
        try:
            environ = Path(f"/proc/{entry.lease.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in environ:
            if item.startswith(b"CUDA_VISIBLE_DEVICES="):
                seen[entry.lease.worker_id] = item.split(b"=", 1)[1].decode()


def _slow_tasks(make_toy_task, count: int, seconds: float) -> list[str]:  # type: ignore[no-untyped-def]
    names = [f"triton2triton/toy/t{i}" for i in range(count)]
    for name in names:
        make_toy_task(name, kernel=SLOW_KERNEL.format(seconds=seconds))
    return names


def _fast_and_gated_tasks(make_toy_task, gate: Path) -> tuple[list[str], set[str]]:  # type: ignore[no-untyped-def]
    """Two tasks that finish at once and two whose correctness step waits for `gate` to exist."""
    fast, gated = (
        ["triton2triton/toy/fast0", "triton2triton/toy/fast1"],
        {"triton2triton/toy/gated0", "triton2triton/toy/gated1"},
    )
    for name in fast:
        make_toy_task(name)
    for name in gated:
        make_toy_task(name, kernel=GATED_KERNEL.format(gate=str(gate)), correctness_timeout=600)
    return sorted([*fast, *gated]), gated


def _two_done_two_waiting(run_dir: Path) -> bool:
    queue = _queue(run_dir)
    return len(queue["done"]) == 2 and len(queue["running"]) == 2


def test_submit_and_wait_runs_each_trial_once_with_a_worker_per_gpu(
    slurm: SlurmCluster, tmp_path: Path, make_toy_task, write_run_config
) -> None:
    names = _slow_tasks(make_toy_task, 4, 1.5)
    proc = _start(
        slurm, tmp_path, "slurm", "submit", str(write_run_config()), "--nodes", "1", "--gpus-per-node", "2", "--wait"
    )
    masks: dict[str, str] = {}
    while proc.poll() is None:
        run_dir = _run_dir(tmp_path)
        if run_dir is not None and (run_dir / QUEUE_DIR / "running").is_dir():
            _worker_masks(run_dir, masks)
        time.sleep(0.1)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    run_dir = _run_dir(tmp_path)
    assert run_dir is not None and str(run_dir) in out
    assert "COMPLETED; trials pending 0, running 0, done 4, failed 0" in err  # --wait's progress lines
    assert _started(run_dir) == dict.fromkeys(names, 1)
    assert _summary_tasks(run_dir) == names
    queue = _queue(run_dir)
    assert len(queue["done"]) == 4 and not queue["pending"] and not queue["running"] and not queue["failed"]
    assert sorted(masks.values()) == ["0", "1"], masks  # two workers, each masked by Slurm to its own GPU
    assert all(worker.startswith("slurm-") for worker in masks)
    record = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    assert [job["role"] for job in record["jobs"]] == ["workers", "postprocess"]
    assert _job_states(slurm, run_dir) == {"workers": "COMPLETED", "postprocess": "COMPLETED"}
    assert processes_under(tmp_path, by_command_line=True) == []


def test_status_then_cancel_then_a_local_resume_finishes_the_rest_once(
    slurm: SlurmCluster, tmp_path: Path, make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gate(tmp_path, monkeypatch)
    names, gated = _fast_and_gated_tasks(make_toy_task, gate)
    config = write_run_config()
    submitted = _aka(slurm, tmp_path, "slurm", "submit", str(config), "--gpus-per-node", "2")
    assert submitted.returncode == 0, submitted.stderr
    run_dir = Path(submitted.stdout.strip())
    _wait_for(lambda: _two_done_two_waiting(run_dir), "two trials done and two waiting at the gate")
    shown = _aka(slurm, tmp_path, "slurm", "status", str(run_dir), "--json")
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    assert {job["role"]: job["state"] for job in found["jobs"]} == {"workers": "RUNNING", "postprocess": "PENDING"}
    assert found["trials"] == {"pending": 0, "running": 2, "done": 2, "failed": 0} and not found["reports"]
    assert sorted(line.split(" ")[0] for line in found["running"]) == sorted(gated)

    cancelled = _aka(slurm, tmp_path, "slurm", "cancel", str(run_dir))
    assert cancelled.returncode == 0, cancelled.stderr
    assert "--resume-run" in cancelled.stdout
    assert set(_job_states(slurm, run_dir).values()) == {"CANCELLED"}
    assert processes_under(tmp_path, by_command_line=True) == [], "a worker or step outlived scancel"
    queue = _queue(run_dir)
    assert {e.task for e in queue["done"]} == set(names) - gated and not queue["running"]
    assert {e.task for e in queue["pending"]} == gated  # released: their workers are known gone
    assert all("Slurm job was cancelled" in e.history[-1] for e in queue["pending"])
    with slurm.environment():
        table = CliRunner().invoke(slurm_app, ["status", str(run_dir)])
    assert table.exit_code == 0, table.output
    assert table.output.count("CANCELLED") == 2 and "trials: pending 2, running 0, done 2, failed 0" in table.output

    gate.touch()
    resumed = _aka(slurm, tmp_path, "run", str(config), "--resume-run", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert _summary_tasks(run_dir) == names
    started = _started(run_dir)
    assert started == {task: 2 if task in gated else 1 for task in names}  # finished ones reused, not re-run


def test_a_cancelled_run_submitted_again_finishes_on_slurm(
    slurm: SlurmCluster, tmp_path: Path, make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gate(tmp_path, monkeypatch)
    gated = ["triton2triton/toy/gated0", "triton2triton/toy/gated1"]
    for name in gated:
        make_toy_task(name, kernel=GATED_KERNEL.format(gate=str(gate)), correctness_timeout=600)
    config = write_run_config()
    submitted = _aka(slurm, tmp_path, "slurm", "submit", str(config), "--gpus-per-node", "2")
    assert submitted.returncode == 0, submitted.stderr
    run_dir = Path(submitted.stdout.strip())
    _wait_for(lambda: len(_queue(run_dir)["running"]) == 2, "both workers waiting at the gate")
    monkeypatch.chdir(tmp_path)
    again = ["submit", str(config), "--gpus-per-node", "2", "--resume-run", str(run_dir)]
    with slurm.environment():
        refused = CliRunner().invoke(slurm_app, again)
        assert refused.exit_code == 2 and "still active" in refused.output, refused.output
        cancel(run_dir)
        gate.touch()
        finished = CliRunner().invoke(slurm_app, [*again, "--wait"])
    assert finished.exit_code == 0, finished.output
    assert _summary_tasks(run_dir) == gated
    assert _started(run_dir) == dict.fromkeys(gated, 2)
    record = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    assert [job["role"] for job in record["jobs"]] == ["workers", "postprocess"] * 2
    assert processes_under(tmp_path, by_command_line=True) == []


def test_a_requeued_job_resumes_through_the_leases_and_counts_each_trial_once(
    slurm: SlurmCluster, tmp_path: Path, make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _gate(tmp_path, monkeypatch)
    names, gated = _fast_and_gated_tasks(make_toy_task, gate)
    submitted = _aka(slurm, tmp_path, "slurm", "submit", str(write_run_config()), "--gpus-per-node", "2")
    assert submitted.returncode == 0, submitted.stderr
    run_dir = Path(submitted.stdout.strip())
    record = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    workers = record["jobs"][0]["job_id"]
    _wait_for(lambda: _two_done_two_waiting(run_dir), "two trials done and two waiting at the gate")
    slurm.scontrol("requeue", workers)
    _wait_for(lambda: _job_states(slurm, run_dir)["workers"] == "PENDING", "the requeued job to be pending")
    gate.touch()
    slurm.scontrol("update", f"jobid={workers}", "StartTime=now")  # Slurm holds a requeued job 2 min otherwise
    _wait_for(
        lambda: _job_states(slurm, run_dir).get("postprocess") in ("COMPLETED", "FAILED"), "the report job", timeout=240
    )
    assert _job_states(slurm, run_dir) == {"workers": "COMPLETED", "postprocess": "COMPLETED"}
    assert "Restarts=1" in slurm.scontrol("show", "job", workers)
    assert _summary_tasks(run_dir) == names
    queue = _queue(run_dir)
    assert sorted(e.task for e in queue["done"]) == names and not queue["failed"]
    assert {e.task: e.attempts for e in queue["done"]} == {task: 1 if task in gated else 0 for task in names}
    assert _started(run_dir) == {task: 2 if task in gated else 1 for task in names}  # the interrupted ones again
    restarts = {worker.split("-")[1].split(".")[1] for worker in _worker_ids(run_dir)}
    assert restarts == {"0", "1"}  # workers of the job's first and second start
    assert processes_under(tmp_path, by_command_line=True) == []


def _worker_ids(run_dir: Path) -> set[str]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return {str(e["worker"]) for e in events if e["event"] == "task_started"}


def test_interactive_mode_runs_the_workers_in_an_allocation_then_the_reports(
    slurm: SlurmCluster, tmp_path: Path, make_toy_task, write_run_config
) -> None:
    names = _slow_tasks(make_toy_task, 2, 0)
    done = _aka(slurm, tmp_path, "slurm", "submit", str(write_run_config()), "--gpus-per-node", "2", "--interactive")
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path)
    assert run_dir is not None and _summary_tasks(run_dir) == names
    assert _started(run_dir) == dict.fromkeys(names, 1)
    assert all(worker.startswith("slurm-") for worker in _worker_ids(run_dir))
    record = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    assert [job["role"] for job in record["jobs"]] == ["interactive"]
    assert processes_under(tmp_path, by_command_line=True) == []


def test_a_flag_slurm_refuses_is_one_line_and_makes_no_run(
    slurm: SlurmCluster, tmp_path: Path, make_toy_task, write_run_config
) -> None:
    make_toy_task()
    request = SlurmRequest(nodes=1, gpus_per_node=1, partition="nosuchpartition")
    with slurm.environment(), pytest.raises(SlurmError) as refused:
        submit(write_run_config(), request)
    assert "--partition" in str(refused.value) and "invalid partition" in str(refused.value).lower()
    assert "\n" not in str(refused.value)
    with slurm.environment(), pytest.raises(SlurmError, match="gres|GPU|configuration"):
        submit(write_run_config(), SlurmRequest(nodes=1, gpus_per_node=3))  # the node has two
    refused_flag = CliRunner().invoke(slurm_app, ["submit", str(write_run_config()), "--nodes", "0"])
    assert refused_flag.exit_code == 2 and "--nodes:" in refused_flag.output
    assert _run_dir(tmp_path) is None


def test_without_sbatch_submit_is_one_line_and_makes_no_run(
    tmp_path: Path, make_toy_task, write_run_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_toy_task()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SlurmError, match="sbatch not found on PATH") as refused:
        submit(write_run_config(), SlurmRequest(nodes=1, gpus_per_node=1))
    assert "\n" not in str(refused.value)
    assert _run_dir(tmp_path) is None
