"""Bad inputs and concurrent use of a run directory: a clear one-line error, nothing half-written,
and a second process on the same run refused (issue: scale out and survive faults)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import toy_kernel_source

from aka.errors import ConfigError
from aka.run.layout import MANIFEST_NAME
from aka.run.runner import run_experiment


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _aka(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aka.cli", *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_second_process_on_the_same_run_is_refused(tmp_path: Path, make_toy_task, write_run_config) -> None:
    make_toy_task(kernel=toy_kernel_source(extra="import time\ntime.sleep(20)"))
    config = write_run_config()
    first = subprocess.Popen(
        [sys.executable, "-m", "aka.cli", "run", str(config), "--run-suffix", "shared"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        runs: list[Path] = []
        while time.monotonic() < deadline and not runs:
            runs = [p.parent for p in tmp_path.glob(f"workspace*/*/{MANIFEST_NAME}")]
            time.sleep(0.2)
        assert runs, "the first run never wrote its manifest"
        second = _aka("run", str(config), "--resume-run", str(runs[0]), cwd=tmp_path)
        line = _one_line_error(second)
        assert "another aka process" in line and f"pid {first.pid}" in line, line
    finally:
        first.kill()
        first.wait()


def _finished_run(make_toy_task, write_run_config, **fields: object) -> tuple[Path, Path]:
    make_toy_task("triton2triton/toy/one")
    make_toy_task("triton2triton/toy/two")
    config = write_run_config(**fields)
    return config, run_experiment(config).run_dir


def test_resume_refuses_a_changed_task_list_or_scorer_unless_told(make_toy_task, write_run_config) -> None:
    config, run_dir = _finished_run(make_toy_task, write_run_config, tasks=["triton2triton/toy/one"])
    write_run_config(tasks=["triton2triton/toy/one", "triton2triton/toy/two"])
    with pytest.raises(ConfigError, match=r"field 'tasks'.*--accept-changes"):
        run_experiment(config, resume_run=run_dir)
    write_run_config(tasks=["triton2triton/toy/one"], scorer="aka.results.scoring:default_score")
    with pytest.raises(ConfigError, match=r"field 'scorer'.*--accept-changes"):
        run_experiment(config, resume_run=run_dir)
    write_run_config(tasks=["triton2triton/toy/one", "triton2triton/toy/two"])
    outcome = run_experiment(config, resume_run=run_dir, accept_changes=True)
    assert sorted(r.task_name for r in outcome.results) == ["triton2triton/toy/one", "triton2triton/toy/two"]
    manifest = yaml.safe_load((run_dir / MANIFEST_NAME).read_text())
    assert any("tasks" in change for change in manifest["accepted_changes"]), manifest["accepted_changes"]


def test_a_binary_config_is_a_one_line_error_and_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "binary.yaml"
    config.write_bytes(b"\x00\x01\xff\xfe not text")
    line = _one_line_error(_aka("run", str(config), cwd=tmp_path))
    assert str(config) in line and "not a UTF-8 text file" in line
    assert not list(tmp_path.glob("workspace*")) and not (tmp_path / "logs").exists()


def test_a_corrupt_manifest_is_a_one_line_error_on_resume(tmp_path: Path, make_toy_task, write_run_config) -> None:
    config, run_dir = _finished_run(make_toy_task, write_run_config)
    (run_dir / MANIFEST_NAME).write_text('{"run_name": 3, ')
    line = _one_line_error(_aka("run", str(config), "--resume-run", str(run_dir), cwd=tmp_path))
    assert str(run_dir / MANIFEST_NAME) in line and "not a valid run manifest" in line


def test_a_log_directory_that_cannot_be_made_is_a_one_line_error(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    make_toy_task()
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the log directory should be")
    config = write_run_config(log_directory=str(blocker / "logs"))
    line = _one_line_error(_aka("run", str(config), cwd=tmp_path))
    assert "log_directory" in line and str(blocker / "logs") in line
    assert not list(tmp_path.glob("workspace*"))


def test_new_directories_are_claimed_by_mkdir_never_by_a_check(tmp_path: Path) -> None:
    """Two processes making a run (or a trial's workspace) in the same second each get their own."""
    from concurrent.futures import ThreadPoolExecutor

    from aka.run.layout import new_run_dir

    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: new_run_dir(tmp_path / "exp", "same"), range(16)))
    assert len(set(made)) == 16 and all(p.is_dir() for p in made)


# Inside a user and mount namespace of its own, a small tmpfs holds the workspace and the logs; it
# is filled once the first result is written, then emptied, and the run resumed (the tmpfs lives
# as long as the namespace: both runs happen in one script).
DISK_FULL_SCRIPT = """
set -u
mount -t tmpfs -o size=40m tmpfs "$DISK" || exit 90
"$PY" -m aka.cli run "$CONFIG" --quiet > "$OUT/first.out" 2> "$OUT/first.err" &
run=$!
until ls "$DISK"/workspace_*/run_*/*/task_result.yaml > /dev/null 2>&1; do
  kill -0 $run 2> /dev/null || break
  sleep 0.1
done
dd if=/dev/zero of="$DISK/filler" bs=1M 2> /dev/null
wait $run
echo $? > "$OUT/first.rc"
find "$DISK" -name '.task_result.yaml.*' > "$OUT/temp_files"
for result in "$DISK"/workspace_*/run_*/*/task_result.yaml; do
  "$PY" -c "import sys, yaml; yaml.safe_load(open(sys.argv[1]))" "$result" || echo "$result" >> "$OUT/unreadable"
done
rm "$DISK/filler"
"$PY" -m aka.cli run "$CONFIG" --quiet --resume-latest > "$OUT/resume.out" 2> "$OUT/resume.err"
echo $? > "$OUT/resume.rc"
cp "$DISK"/workspace_*/run_*/events.jsonl "$OUT/events.jsonl"
"""


def _as_root_of_a_user_namespace(script: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`script` in bash as root of new user and mount namespaces, where it can mount a small tmpfs
    as a disk to fill; skips the test where such namespaces cannot be made."""
    if subprocess.run(["unshare", "-Urm", "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no user and mount namespaces here (unshare -Urm): a small disk cannot be made")
    return subprocess.run(
        ["unshare", "-Urm", "bash", "-c", script], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_a_disk_that_fills_mid_run_stops_it_with_one_line_and_it_resumes(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    for i in range(4):
        make_toy_task(f"triton2triton/toy/t{i}", kernel=toy_kernel_source())
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    config = write_run_config(log_directory=str(disk / "logs"), workspace_directory_prefix=str(disk / "workspace"))
    env = {**_env(), "DISK": str(disk), "OUT": str(out), "CONFIG": str(config), "PY": sys.executable}
    done = _as_root_of_a_user_namespace(DISK_FULL_SCRIPT, env, timeout=600)
    assert done.returncode != 90, "cannot mount a tmpfs in a user namespace here"
    first_err = [line for line in (out / "first.err").read_text().splitlines() if line.strip()]
    assert (out / "first.rc").read_text().strip() == "2", first_err
    assert first_err[-1].startswith("error: ") and "no space left on its disk" in first_err[-1], first_err
    assert "--resume-latest" in first_err[-1] and "Traceback" not in "\n".join(first_err)
    assert (out / "temp_files").read_text() == "" and not (out / "unreadable").exists(), "a half-written result"
    assert (out / "resume.rc").read_text().strip() == "0", (out / "resume.err").read_text()
    events = [yaml.safe_load(line) for line in (out / "events.jsonl").read_text().splitlines()]
    finished = sorted(e["task"] for e in events if e["event"] == "task_finished")
    assert finished == [f"triton2triton/toy/t{i}" for i in range(4)], "each task finished once"


FILLED_BY_THE_CANDIDATE = """
set -eu
mount -t tmpfs -o size=100m tmpfs "$DISK"
mkdir -p "$DISK/ws/evaluation" "$DISK/ws/work"
dd if=/dev/zero of="$DISK/ws/evaluation/hoard" bs=1M count=60 2> /dev/null
"$PY" - <<'PY'
import os
from pathlib import Path
from aka.run.disk_space import full_after_evaluation, low_on_space
ws = Path(os.environ["DISK"]) / "ws"
print(low_on_space(ws), full_after_evaluation(ws, []), (ws / "evaluation").exists(), (ws / "work").exists())
PY
"""


def test_files_a_candidate_left_in_its_evaluation_folder_do_not_make_the_disk_full(tmp_path: Path) -> None:
    """A candidate that fills a nearly full disk from its evaluation folder would otherwise have
    its failure refused as the disk's: the folder (rebuilt for every evaluation) goes first."""
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**_env(), "DISK": str(disk), "PY": sys.executable}
    done = _as_root_of_a_user_namespace(FILLED_BY_THE_CANDIDATE, env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False", "True"], done.stdout


FILLED_BY_THE_AGENT = """
set -eu
mount -t tmpfs -o size=100m tmpfs "$DISK"
"$PY" - <<'PY'
import errno, os
from pathlib import Path
from aka.agents import register_agent
from aka.results.task_result import AgentOutcome
from aka.run.runner import run_experiment

@register_agent("disk_filler")
def launch_agent(context, task_dir, work):
    (work.parent / "agent_home").mkdir()
    (work.parent / "agent_home" / "cache.bin").write_bytes(bytes(8 * 2**20))
    (work / "scratch" / "deep").mkdir(parents=True)
    try:  # until the disk is full
        with open(work / "scratch" / "deep" / "junk.bin", "wb") as junk:
            while True:
                junk.write(bytes(2**20))
                junk.flush()
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    return AgentOutcome(agent=context.agent_name)

outcome = run_experiment(Path(os.environ["CONFIG"]))
result = outcome.results[0]
work = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy")) / "work"
left = (work / "scratch").exists(), (work.parent / "agent_home").exists()
print(result.status.value, result.failure_kind.value, *left)
print(sorted(p.name for p in work.iterdir() if not p.name.startswith(".")))
PY
"""


def test_an_agent_that_fills_the_disk_is_still_judged_and_its_scratch_goes(
    tmp_path: Path, make_toy_task, write_run_config
) -> None:
    """A red team's agent filled the disk from its workspace: the evaluation could not write, and
    the failure was refused as the disk's on every resume (its files stayed). Its scratch, which
    the judge never reads, goes once its step is over; the candidate is judged."""
    task_dir = make_toy_task(kernel=toy_kernel_source())
    disk = tmp_path / "disk"
    disk.mkdir()
    config = write_run_config(
        agent={"template": "disk_filler"},
        log_directory=str(disk / "logs"),
        workspace_directory_prefix=str(disk / "workspace"),
    )
    env = {**_env(), "DISK": str(disk), "CONFIG": str(config), "PY": sys.executable}
    done = _as_root_of_a_user_namespace(FILLED_BY_THE_AGENT, env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    verdict, files = done.stdout.splitlines()[-2:]
    assert verdict.split() == ["PASS", "none", "False", "False"], done.stdout
    assert files == str(sorted(p.name for p in task_dir.iterdir())), "the task's files and sources stay"
