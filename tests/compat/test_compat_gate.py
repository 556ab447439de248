"""The original's Python step commands start before their turn on the device, gated
(aka/compat/gate/gate.py): Python's start-up and torch's import leave the turn, and no code of the
task runs before the turn comes. Real processes; the device's turn is faked so that it can be
watched on the CPU."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from original_task_fixtures import VLLM_RUNNER, vllm_task

import aka.compat.steps as compat_steps
from aka.compat.steps import ENV_GATE, GATE, gated_command
from aka.config.tasks import select_tasks, task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import measure_baseline
from aka.evaluation.device_lock import Turn

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
REPO = Path(__file__).resolve().parents[2]
SHOW = """
import json, sys
print(json.dumps({"argv": sys.argv, "file": __file__, "path0": sys.path[0], "name": __name__,
                  "stdin": sys.stdin.read(), "torch": "torch" in sys.modules}))
sys.exit(int(sys.argv[1]))
"""


def test_only_plain_python_and_pytest_commands_are_gated() -> None:
    assert gated_command("python3 scripts/task_runner.py performance") == (
        f"python3 {GATE} scripts/task_runner.py performance"
    )
    assert gated_command("python3.12 run.py --shape=4,8") == f"python3.12 {GATE} run.py --shape=4,8"
    assert gated_command('pytest -vv -x test_k.py -k "not test_performance and not test_save"') == (
        f"python3 {GATE} --pytest -vv -x test_k.py -k 'not test_performance and not test_save'"
    )
    for command in (
        "python3 -u scripts/task_runner.py compile",  # an interpreter option
        "python3 scripts/task_runner.py compile > out.txt",  # a shell would act on the rest
        "python3 scripts/task_runner.py compile;rm -rf x",
        "cd scripts && python3 task_runner.py compile",
        "python3 scripts/task_runner.py $SHAPE",
        "python3 scripts/task_runner.py compile\nrm -rf build",  # two commands to bash
        "pytest test_*.py",
        'python3 -c "import ast"',
        "python3 -m pytest test_kernel.py",
        "bash run.sh",
    ):
        assert gated_command(command) is None, command


def test_the_gate_runs_the_script_as_python_would(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "show.py").write_text(SHOW)

    def run(gated: bool, stdin: str, code: str = "3", **env: str) -> subprocess.CompletedProcess[str]:
        head = [sys.executable, str(GATE)] if gated else [sys.executable]
        argv = [*head, "scripts/show.py", code, "--b=1"]
        environ = {**os.environ, **env}
        return subprocess.run(argv, cwd=tmp_path, input=stdin, env=environ, capture_output=True, text=True, timeout=120)

    plain, gated = run(False, "rest\n"), run(True, "token\nrest\n")
    assert plain.returncode == gated.returncode == 3, gated.stderr
    seen_plain, seen_gated = json.loads(plain.stdout), json.loads(gated.stdout)
    assert seen_gated.pop("torch") is True and seen_plain.pop("torch") is False  # imported before the turn
    assert seen_gated == seen_plain  # argv, an absolute __file__, its folder first, __main__, stdin after the token
    assert run(True, "token\n", "0").returncode == 0
    safe = [json.loads(run(g, "token\n" if g else "", PYTHONSAFEPATH="1").stdout) for g in (False, True)]
    assert safe[0]["path0"] == safe[1]["path0"] != seen_plain["path0"]  # neither adds the script's folder
    never = run(True, "no newline: the evaluator gave up before the turn")
    assert never.returncode == 125 and never.stdout == ""  # the script never ran


PYTEST_FILE = """
import sys


def test_sees_its_arguments():
    assert sys.argv[1:] == ["-q", "-s", "-p", "no:cacheprovider", "test_k.py", "-k", "sees or never"]
    print("TORCH_LOADED", "torch" in sys.modules)


def test_never():
    raise AssertionError("deselected")
"""


def test_the_gate_runs_pytest_as_the_command_would(tmp_path: Path) -> None:
    """`pytest ARGS` through the gate: the same tests selected and the same exit code; a `pytest`
    that is not this interpreter's script is exec'd as it is."""
    (tmp_path / "test_k.py").write_text(PYTEST_FILE)
    args = ["-q", "-s", "-p", "no:cacheprovider", "test_k.py", "-k", "sees or never"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    plain = subprocess.run(["pytest", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    gated = subprocess.run(
        [sys.executable, str(GATE), "--pytest", *args],
        cwd=tmp_path,
        env=env,
        input="token\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plain.returncode == gated.returncode == 1, gated.stdout + gated.stderr  # test_never fails
    for done in (plain, gated):
        assert "1 failed, 1 passed" in done.stdout
    assert "TORCH_LOADED False" in plain.stdout and "TORCH_LOADED True" in gated.stdout  # run in the gate
    other = tmp_path / "bin"
    other.mkdir()
    (other / "pytest").write_text('#!/bin/sh\necho other pytest "$@"\nexit 7\n')
    (other / "pytest").chmod(0o755)
    exec_d = subprocess.run(
        [sys.executable, str(GATE), "--pytest", "-x"],
        cwd=tmp_path,
        env={**env, "PATH": f"{other}{os.pathsep}{env['PATH']}"},
        input="token\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exec_d.returncode == 7 and exec_d.stdout.strip() == "other pytest -x"
    missing = subprocess.run(
        [sys.executable, str(GATE), "--pytest", "-x"],
        cwd=tmp_path,
        env={**env, "PATH": str(tmp_path / "nowhere")},
        input="token\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 127 and "pytest: command not found" in missing.stderr


def _gates_waiting_under(folder: Path) -> list[int]:
    """Processes running the gate whose working directory is under `folder`."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(GATE).encode() in command and cwd.startswith(str(folder)):
            found.append(int(entry.name))
    return found


def _watched_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[float, bool]], list[float]]:
    """A v1 task's baseline measured with the device's turn faked: when each turn began and whether
    a gate was waiting for it then, and when each command's script began."""
    stamp = 'import time as _aka_t\nprint("AKA_TEST_STARTED", repr(_aka_t.time()), flush=True)\n'
    root = tmp_path / "tasks"
    vllm_task(root, runner=stamp + VLLM_RUNNER)
    (task,) = select_tasks(root, ["all"])
    turns: list[tuple[float, bool]] = []

    @contextlib.contextmanager
    def watched_turn(device: DeviceInfo, exclusive: bool) -> Iterator[Turn]:
        deadline = time.monotonic() + (60 if os.environ.get(ENV_GATE) != "0" else 1)
        while not _gates_waiting_under(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = bool(_gates_waiting_under(tmp_path))
        time.sleep(0.5)  # a script that ran before its turn would print before the turn began
        turns.append((time.time(), waiting))
        yield Turn(0.0)

    monkeypatch.setattr(compat_steps, "device_turn", watched_turn)
    baseline = measure_baseline(tmp_path / "run", task, task_identity(task), CPU, tmp_path / "baseline")
    assert baseline.usable, baseline.message
    text = "\n".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log*") if p.is_file())
    started = sorted(float(t) for t in re.findall(r"AKA_TEST_STARTED (\S+)", text))
    assert len(turns) == len(started) == 3  # compile, correctness, performance
    assert all(began <= start for (began, _), start in zip(turns, started, strict=True))  # only in its turn
    assert not _gates_waiting_under(tmp_path)  # nothing left waiting
    how = "gated, started before its turn" if os.environ.get(ENV_GATE) != "0" else "started in its turn"
    notes = re.findall(
        r"# aka: original (\w+) command held the device [0-9.]+ s after waiting [0-9.]+ s \((.+)\)", text
    )
    assert notes == [("compile", how), ("correctness", how), ("performance", how)]
    # benchmarks/device_holds.py reads those notes: each step's hold, and the trial's GPU time their sum
    spec = importlib.util.spec_from_file_location("device_holds", REPO / "benchmarks" / "device_holds.py")
    assert spec is not None and spec.loader is not None
    holds = importlib.util.module_from_spec(spec)
    sys.modules["device_holds"] = holds
    spec.loader.exec_module(holds)
    (log,) = [p for p in tmp_path.rglob("*.log") if "original performance command" in p.read_text(errors="replace")]
    trial = holds.read_log(log)
    assert set(trial.original) == {"compile", "correctness", "performance"}
    assert holds.gpu_seconds(trial) == pytest.approx(sum(held for held, _ in trial.original.values()), abs=0.002)
    assert trial.original["performance"][0] >= 0.0
    return turns, started


def test_an_original_python_command_waits_started_and_runs_only_in_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_GATE, raising=False)
    turns, _ = _watched_baseline(tmp_path, monkeypatch)
    assert all(waiting for _, waiting in turns)


def test_without_the_gate_every_command_starts_inside_its_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_GATE, "0")
    turns, _ = _watched_baseline(tmp_path, monkeypatch)
    assert not any(waiting for _, waiting in turns)


def test_a_gated_command_whose_turn_never_comes_is_killed_and_its_folders_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waiting for the device fails (the evaluation is cancelled): the command started gated before
    its turn is killed, and its private Triton cache and temporary folder go with it."""
    monkeypatch.delenv(ENV_GATE, raising=False)
    root = tmp_path / "tasks"
    vllm_task(root)
    (task,) = select_tasks(root, ["all"])
    seen: list[int] = []

    @contextlib.contextmanager
    def cancelled_turn(device: DeviceInfo, exclusive: bool) -> Iterator[Turn]:
        deadline = time.monotonic() + 60
        while not _gates_waiting_under(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.extend(_gates_waiting_under(tmp_path))
        raise KeyboardInterrupt  # as a cancelled evaluation's wait for the lock ends
        yield Turn(0.0)  # pragma: no cover

    monkeypatch.setattr(compat_steps, "device_turn", cancelled_turn)
    with pytest.raises(KeyboardInterrupt):
        measure_baseline(tmp_path / "run", task, task_identity(task), CPU, tmp_path / "baseline")
    assert seen  # it was waiting, gated
    assert not _gates_waiting_under(tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_dir() and re.match(r"(triton-[0-9a-f]+|tmp-compile-)", p.name)]
