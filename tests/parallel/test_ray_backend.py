"""The Ray backend end to end: `aka run --backend ray` on a real local Ray cluster that this module
starts (`ray start --head` on 127.0.0.1, 2 CPUs and 2 GPUs declared as the custom resource
`aka_gpu`), with toy tasks. Each trial runs and counts once; a Ray worker killed mid-trial is
restarted by Ray and its trial finished once; SIGTERM stops every worker; no process is left."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_parallel_run import (
    SLOW_KERNEL,
    _assert_no_orphans,
    _events,
    _held_by,
    _queue,
    _run_dir,
    _step_running,
    _summary_rows,
    _wait_for,
)

from aka.errors import ConfigError
from aka.parallel.backends import chosen_backend
from aka.parallel.executor import DeviceSlot
from aka.parallel.ray_executor import RayBackend, slot_resources

REPO = Path(__file__).resolve().parents[2]
# One cluster for the module: its tests go to one pytest-xdist worker (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("ray")
RAY_START_SECONDS = 180
ACTOR_TITLE = "ray::SlotWorker"


# The cluster's token, given to every process here (a fresh machine has no ~/.ray/auth_token, and
# `ray start` in token mode refuses to start without one).
RAY_TOKEN = secrets.token_hex(32)


def _env() -> dict[str, str]:
    env = dict(os.environ, COLUMNS="200", RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=RAY_TOKEN)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session_members(sid: int) -> list[int]:
    """Processes of session `sid` (the `ray start` this module started leads it)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[4]) == sid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _actor_processes() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text.startswith(ACTOR_TITLE):
            found.append(f"{cmdline.parent.name}: {text}")
    return found


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A local Ray cluster for the module's tests, stopped (its whole session) afterwards."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e .[ray])")
    temp = Path(tempfile.mkdtemp(prefix="akaray"))  # short: Ray's socket paths live under it
    port = _free_port()
    ports = {
        name: str(_free_port())
        for name in (
            "--dashboard-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--node-manager-port",
            "--object-manager-port",
            "--runtime-env-agent-port",
            "--metrics-export-port",
        )
    }
    argv = [
        str(Path(sys.executable).parent / "ray"),
        "start",
        "--head",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(port),
        "--num-cpus",
        "2",
        "--resources",
        '{"aka_gpu": 2}',
        "--temp-dir",
        str(temp),
        "--include-dashboard",
        "false",
        "--disable-usage-stats",
        "--min-worker-port",
        "0",
        "--max-worker-port",
        "0",
        *[x for pair in ports.items() for x in pair],
        "--block",
    ]
    out = temp / "ray_start.log"
    with out.open("wb") as log:
        head = subprocess.Popen(
            argv,
            cwd=temp,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + RAY_START_SECONDS
        while "block forever" not in out.read_text(errors="replace"):
            if head.poll() is not None or time.monotonic() > deadline:
                lines = out.read_text(errors="replace").strip().splitlines() or ["no output"]
                pytest.skip(f"Ray {ray.__version__} could not start a local cluster: {lines[-1]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        for pid in _session_members(head.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _aka(tmp_path: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", "run", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "aka.cli", "run", *args],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _no_process_left(tmp_path: Path) -> None:
    """Nothing of the run (workers, steps, the job's Ray workers, whose folder is the run's) and no
    slot actor is left."""
    _assert_no_orphans(tmp_path)
    deadline = time.monotonic() + 30
    while _actor_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _actor_processes() == [], "a slot's Ray actor outlived the run"


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_gpu_slots_ask_ray_for_a_gpu_or_the_custom_resource_and_cpu_slots_for_a_cpu() -> None:
    assert slot_resources(DeviceSlot(None, 0), 1, None) == {"num_cpus": 1}
    assert slot_resources(DeviceSlot("0", 0), 1, None) == {"num_gpus": 1.0}
    assert slot_resources(DeviceSlot("0", 1), 2, None) == {"num_gpus": 0.5}
    assert slot_resources(DeviceSlot("3", 0), 1, "aka_gpu") == {"resources": {"aka_gpu": 1.0}}
    assert chosen_backend("local", None, None) is None
    assert chosen_backend("ray", "auto", "aka_gpu") == RayBackend("auto", "aka_gpu")
    with pytest.raises(ConfigError, match="--address and --ray-gpu-resource go with --backend ray"):
        chosen_backend("local", "auto", None)
    with pytest.raises(ConfigError, match="--backend slurm: use local or ray"):
        chosen_backend("slurm", None, None)


def test_without_ray_the_backend_is_a_one_line_error_and_nothing_is_written(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    make_toy_task()
    config = write_run_config(num_parallel=2)
    hide_ray = (
        "import sys; sys.modules['ray'] = None; from aka.cli import main; "
        f"sys.argv = ['aka', 'run', {str(config)!r}, '--backend', 'ray']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide_ray],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "Ray is not installed" in lines[0] and "agentkernelarena[ray]" in lines[0]
    assert not (tmp_path / "workspace_cpu_noop").exists()


def test_gpu_slots_run_on_the_clusters_gpu_resource_and_each_trial_counts_once(
    tmp_path: Path, make_toy_task, write_run_config, ray_address: str
) -> None:
    names = [f"triton2triton/toy/t{i}" for i in range(4)]
    for name in names:
        make_toy_task(name)
    done = _aka(
        tmp_path,
        str(write_run_config(gpu_ids="0,1")),
        "--backend",
        "ray",
        "--address",
        ray_address,
        "--ray-gpu-resource",
        "aka_gpu",
    )
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path)
    started = [e for e in _events(run_dir) if e["event"] == "task_started"]
    assert Counter(e["task"] for e in started) == dict.fromkeys(names, 1)
    assert {e["worker"] for e in started} <= {"gpu0-0", "gpu1-0"}
    queue = _queue(run_dir)
    assert len(queue["done"]) == 4 and not queue["pending"] and not queue["running"] and not queue["failed"]
    assert sorted(r["Task Name"] for r in _summary_rows(run_dir)) == names
    for worker in {e["worker"] for e in started}:
        log = (run_dir / ".parallel" / "workers" / f"{worker}.log").read_text()
        assert log.startswith("[ray] actor pid "), log
    _no_process_left(tmp_path)


def test_a_ray_worker_killed_mid_trial_is_restarted_by_ray_and_the_trial_counts_once(
    tmp_path: Path, make_toy_task, write_run_config, ray_address: str
) -> None:
    make_toy_task("triton2triton/toy/slow", kernel=SLOW_KERNEL.format(seconds=4))
    make_toy_task("triton2triton/toy/fast")
    proc = _start(tmp_path, str(write_run_config(num_parallel=2)), "--backend", "ray", "--address", ray_address)
    try:
        _wait_for(lambda: _step_running(tmp_path, "toy_slow"), "the slow trial's step", timeout=240)
        run_dir = _run_dir(tmp_path)
        holder = _held_by(run_dir, "triton2triton/toy/slow")
        assert holder is not None and holder.lease is not None
        actor = _parent_of(holder.lease.pid)
        assert Path(f"/proc/{actor}/cmdline").read_bytes().startswith(ACTOR_TITLE.encode())
        os.kill(actor, signal.SIGKILL)
        assert proc.wait(timeout=300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = _events(run_dir)
    started = Counter(e["task"] for e in events if e["event"] == "task_started")
    finished = Counter(e["task"] for e in events if e["event"] == "task_finished")
    assert started["triton2triton/toy/slow"] == 2 and finished == {
        "triton2triton/toy/slow": 1,
        "triton2triton/toy/fast": 1,
    }
    entry = next(e for e in _queue(run_dir)["done"] if e.task == "triton2triton/toy/slow")
    assert entry.attempts == 1 and "died holding it" in entry.history[0]
    log = (run_dir / ".parallel" / "workers" / f"{holder.lease.worker_id}.log").read_text()
    assert "(restarted by Ray)" in log, log
    assert all(r["Status"] == "PASS" for r in _summary_rows(run_dir))
    _no_process_left(tmp_path)


def test_sigterm_to_a_ray_run_stops_its_workers_and_steps(
    tmp_path: Path, make_toy_task, write_run_config, ray_address: str
) -> None:
    make_toy_task("triton2triton/toy/hang", kernel=SLOW_KERNEL.format(seconds=3600), correctness_timeout=3600)
    proc = _start(tmp_path, str(write_run_config(num_parallel=2)), "--backend", "ray", "--address", ray_address)
    try:
        _wait_for(lambda: _step_running(tmp_path, "toy_hang"), "the hanging step", timeout=240)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    _no_process_left(tmp_path)
    keys = [e.key for entries in _queue(_run_dir(tmp_path)).values() for e in entries]
    assert keys == ["000000"], "the trial is in exactly one state"


def test_a_cluster_without_the_gpus_asked_for_is_refused_before_anything_is_written(
    tmp_path: Path, make_toy_task, write_run_config, ray_address: str
) -> None:
    make_toy_task()
    done = _aka(tmp_path, str(write_run_config(gpu_ids="0,1")), "--backend", "ray", "--address", ray_address)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "the Ray cluster has no GPU" in lines[0] and "--ray-gpu-resource" in lines[0]
    assert not (tmp_path / "workspace_cpu_noop").exists()


def test_without_an_address_ray_is_started_for_the_run_and_stopped_after_it(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e .[ray])")
    make_toy_task()
    done = _aka(tmp_path, str(write_run_config()), "--backend", "ray")
    assert done.returncode == 0, done.stderr
    assert [r["Status"] for r in _summary_rows(_run_dir(tmp_path))] == ["PASS"]
    assert [e["worker"] for e in _events(_run_dir(tmp_path)) if e["event"] == "task_started"] == ["cpu-0"]
    _assert_no_orphans(tmp_path)  # the run's Ray instance (its processes work in the run's folder) too
