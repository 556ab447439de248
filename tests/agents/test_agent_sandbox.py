"""Where agent CLIs run: the opt-in bubblewrap sandbox (a stand-in CLI probes what it can see and
touch) and the PID namespace every CLI gets (a stand-in CLI leaves a process that escapes its
process group and environment)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from aka.agents.agent_sandbox import AGENT_SHM_BYTES, pid_namespace_prefix
from aka.agents.cli_runner import AGENT_CLI_DIR_ENV
from aka.run.runner import run_experiment

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it)",
)

PROBE = textwrap.dedent("""\
    #!{python}
    import json, os, pathlib, subprocess
    seen = {{}}
    for name in ("TASKS_ROOT", "EXPERIMENTS", "OTHER_RUN", "OTHER_EXPERIMENT"):
        path = pathlib.Path(os.environ["PROBE_" + name])
        seen[name] = sorted(p.name for p in path.iterdir()) if path.is_dir() else None
    try:
        pathlib.Path(os.environ["PROBE_OUTSIDE"]).write_text("escaped")
    except OSError:
        pass
    seen["tmpdir_writable"] = os.access(os.environ["TMPDIR"], os.W_OK)
    try:
        pathlib.Path(os.environ["PROBE_READ_ONLY"]).write_text("escaped")
        seen["read_only_write"] = True
    except OSError:
        seen["read_only_write"] = False
    seen["own_kernel"] = pathlib.Path("kernel.py").is_file()
    subprocess.run(["umount", os.environ["PROBE_TASKS_ROOT"]], capture_output=True)  # as root: caps?
    seen["tasks_after_umount"] = sorted(p.name for p in pathlib.Path(os.environ["PROBE_TASKS_ROOT"]).iterdir())
    pathlib.Path("probe.json").write_text(json.dumps(seen))
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "probed"}}))
""")


@needs_bwrap
def test_sandboxed_cli_sees_only_its_workspace(
    make_toy_task, write_run_config, tasks_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_toy_task("triton2triton/toy/a")
    make_toy_task("triton2triton/toy/b")
    other_run = tmp_path / "workspace_cpu_cursor" / "run_20200101_000000"
    other_run.mkdir(parents=True)
    (other_run / "secret_solution.py").write_text("x = 1\n")
    other_experiment = tmp_path / "my_ab_study" / "run_20200101_000000_treatment"  # named unlike its own
    other_experiment.mkdir(parents=True)
    (other_experiment / "secret_solution.py").write_text("x = 1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cursor-agent").write_text(PROBE.format(python=sys.executable))
    (bin_dir / "cursor-agent").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name, value in {
        AGENT_CLI_DIR_ENV: str(tmp_path / "none"),
        "PROBE_TASKS_ROOT": str(tasks_root),
        "PROBE_EXPERIMENTS": str(tmp_path / "workspace_cpu_cursor"),
        "PROBE_OTHER_RUN": str(other_run),
        "PROBE_OTHER_EXPERIMENT": str(other_experiment.parent),
        "PROBE_OUTSIDE": str(tmp_path / "outside.txt"),
        "CURSOR_API_KEY": "k",
        "PROBE_READ_ONLY": str(Path(sys.executable).parent / "aka_probe_escape"),
    }.items():
        monkeypatch.setenv(name, value)
    config = write_run_config(agent={"template": "cursor", "sandbox": "bwrap"}, tasks=["triton2triton/toy/b"])
    outcome = run_experiment(config)
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_b_"))
    seen = json.loads((workspace / "work" / "probe.json").read_text())
    assert seen["TASKS_ROOT"] == [] == seen["tasks_after_umount"], "the task suite must stay hidden"
    assert seen["OTHER_RUN"] is None and seen["EXPERIMENTS"] == [outcome.run_dir.name], "other runs must be hidden"
    assert seen["OTHER_EXPERIMENT"] == [], "other experiments must be hidden whatever their names"
    assert seen["read_only_write"] is False and not (Path(sys.executable).parent / "aka_probe_escape").exists()
    assert not (tmp_path / "outside.txt").exists(), "nothing outside the workspace and home is writable"
    assert seen["tmpdir_writable"] is True
    assert seen["own_kernel"] is True
    assert outcome.results[0].agent is not None and outcome.results[0].agent.exit_reason == "finished"


def test_sandbox_option_is_validated(write_run_config, make_toy_task) -> None:
    from aka.errors import ConfigError

    make_toy_task()
    with pytest.raises(ConfigError, match="agent.sandbox"):
        run_experiment(write_run_config(agent={"template": "cursor", "sandbox": "docker"}))


ESCAPER = textwrap.dedent("""\
    #!{python}
    import json, os, subprocess, sys, time
    # a process of its own session, without the run's marker variable or the CLI's output pipe
    loop = "while :; do echo tick >> {ticks}; sleep 0.1; done"
    subprocess.Popen(["env", "-i", "setsid", "sh", "-c", loop], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists("{ticks}") and time.monotonic() < deadline:  # it runs before the CLI ends
        time.sleep(0.05)
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "left"}}), flush=True)
""")


def test_a_process_that_escapes_the_cli_ends_with_the_agents_step(
    make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A red team's `env -i setsid` process outlived the agent's step (no group, no marker): it
    throttled the evaluation after it and held the CLI's output pipe open."""
    if not pid_namespace_prefix():
        assert os.environ.get("CI") != "true", "CI machines allow a PID namespace"
        pytest.skip("this machine allows no PID namespace")
    make_toy_task()
    name = f"ticks-{uuid.uuid4().hex}.log"  # in its workspace: all it may write
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cursor-agent").write_text(ESCAPER.format(python=sys.executable, ticks=name))
    (bin_dir / "cursor-agent").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(AGENT_CLI_DIR_ENV, str(tmp_path / "none"))
    monkeypatch.setenv("CURSOR_API_KEY", "k")
    try:
        started = time.monotonic()
        outcome = run_experiment(write_run_config(agent={"template": "cursor"}))
        assert time.monotonic() - started < 60
        agent = outcome.results[0].agent
        assert agent is not None and agent.exit_reason == "finished", agent
        ticks = next(outcome.run_dir.glob(f"*/work/{name}"), None)
        assert ticks is not None, "the escaping process ran"
        size = ticks.stat().st_size
        time.sleep(1.0)
        assert ticks.stat().st_size == size, "the escaped process outlived the agent's step"
    finally:
        subprocess.run(["pkill", "-f", name], check=False)


GUARD_PROBE = textwrap.dedent("""\
    #!{python}
    import json, os, pathlib, uuid
    run_dir = pathlib.Path.cwd().parent.parent
    targets = {{
        "platform_code": pathlib.Path(os.environ["PROBE_AKA"]),
        "python": pathlib.Path(os.environ["PROBE_PREFIX"]),
        "task_suite": pathlib.Path(os.environ["PROBE_TASKS_ROOT"]),
        "pristine_task": pathlib.Path(os.environ["PROBE_TASK"]),
        "run_dir": run_dir,
        "baselines": run_dir / "baselines",
        "cgroups": pathlib.Path("/sys/fs/cgroup"),
        "evaluator_home": pathlib.Path(os.environ["PROBE_HOME"]),
        "workspace": pathlib.Path.cwd(),
        "tmpdir": pathlib.Path(os.environ["TMPDIR"]),
        "shared_tmp": pathlib.Path("/tmp"),
        "system_programs": pathlib.Path(os.environ["PROBE_PROGRAMS"]),
        "etc": pathlib.Path("/etc"),
        "dev": pathlib.Path("/dev"),
    }}
    wrote = {{}}
    for name, folder in targets.items():
        probe = folder / f"aka-probe-{{uuid.uuid4().hex}}"
        try:
            probe.mkdir()
            probe.rmdir()
            wrote[name] = True
        except OSError:
            wrote[name] = False
    try:
        with open(os.environ["PROBE_TASK"] + "/harness.py", "a") as harness:
            harness.write("# the reference now agrees with anything")
        wrote["harness"] = True
    except OSError:
        wrote["harness"] = False
    shm = os.statvfs("/dev/shm")
    wrote["shm_bytes"] = shm.f_blocks * shm.f_frsize
    pathlib.Path("probe.json").write_text(json.dumps(wrote))
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "probed"}}))
""")


def _protected_here() -> bool:
    from aka.agents.agent_sandbox import _guarding_bwrap

    if _guarding_bwrap() is None:
        assert os.environ.get("CI") != "true", "CI installs bubblewrap"
        return False
    return True


def test_by_default_an_agent_cannot_write_what_its_verdict_depends_on(
    make_toy_task, write_run_config, tasks_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `sandbox: bwrap` an agent ran as the judge's user with everything writable: the
    platform's code, the pristine task it is judged from, its frozen baseline, the cgroups, and
    (with its capabilities dropped but its uid 0) /usr/bin/unshare, which the judge then ran."""
    if not _protected_here():
        pytest.skip("bubblewrap is missing or does not work here")
    import aka

    task_dir = make_toy_task()
    harness_before = (task_dir / "harness.py").read_text()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cursor-agent").write_text(GUARD_PROBE.format(python=sys.executable))
    (bin_dir / "cursor-agent").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name, value in {
        AGENT_CLI_DIR_ENV: str(tmp_path / "none"),
        "CURSOR_API_KEY": "k",
        "PROBE_AKA": str(Path(aka.__file__).parent),
        "PROBE_PREFIX": sys.prefix,
        "PROBE_HOME": str(Path.home()),
        "PROBE_PROGRAMS": str(Path(shutil.which("unshare") or "/usr/bin/unshare").parent),
        "PROBE_TASKS_ROOT": str(tasks_root),
        "PROBE_TASK": str(task_dir),
    }.items():
        monkeypatch.setenv(name, value)
    outcome = run_experiment(write_run_config(agent={"template": "cursor"}))
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    wrote = json.loads((workspace / "work" / "probe.json").read_text())
    assert wrote.pop("shm_bytes") <= AGENT_SHM_BYTES, "its memory in /dev/shm is capped"
    assert {name: done for name, done in wrote.items() if name not in ("workspace", "tmpdir")} == dict.fromkeys(
        set(wrote) - {"workspace", "tmpdir"}, False
    ), "nothing outside its workspace and home is writable: not even the programs the judge runs"
    assert wrote["workspace"] and wrote["tmpdir"], "what it works in stays writable"
    assert (task_dir / "harness.py").read_text() == harness_before
    assert outcome.results[0].agent is not None and outcome.results[0].agent.exit_reason == "finished"


SELF_CHECK = textwrap.dedent("""\
    import shutil, sys
    from pathlib import Path
    from exploits.catalog import HONEST
    from exploits.gelu_task import copy_gelu_task
    from aka.device import DeviceInfo
    from aka.evaluation.steps import evaluate_candidate
    work = Path.cwd()
    task = copy_gelu_task(work / "tasks")
    candidate = work / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "kernel.py").write_text(HONEST + "\\ndef gelu(x):\\n    return honest(x)\\n")
    outcomes = evaluate_candidate(task, candidate, work / "scratch", DeviceInfo("cpu", "cpu", "cpu", None, 0))
    print([o.failure.value for o in outcomes])
""")


def test_an_agent_still_checks_its_kernel_with_the_real_harness_behind_the_guard(tmp_path: Path) -> None:
    """The agent's own evaluation runs inside the guard: its workers cannot mount a /proc of their
    own there (bubblewrap covers parts of its /proc) and run in the judge's namespaces instead."""
    if not _protected_here():
        pytest.skip("bubblewrap is missing or does not work here")
    from aka.agents.agent_sandbox import guard_prefix

    workspace = tmp_path / "exp" / "run_1" / "ws"
    (workspace / "work").mkdir(parents=True)
    (workspace / "agent_home").mkdir()
    prefix = guard_prefix(workspace / "work", workspace / "agent_home")
    tests = str(Path(__file__).parents[1])
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "TMPDIR": str(workspace / "agent_home"),
        "PYTHONPATH": tests + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    done = subprocess.run(
        [*prefix, sys.executable, "-c", SELF_CHECK],
        cwd=workspace / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['none', 'none', 'none']", done.stdout[-3000:]
    log = (workspace / "work" / "scratch" / "evaluation.log").read_text()
    assert "worker set up (not isolated" in log


FORKER = textwrap.dedent("""\
    #!{python}
    import json, os, time
    forked, why = 0, None
    while forked < 5000:
        try:
            pid = os.fork()
        except OSError as exc:
            why = str(exc)
            break
        if pid == 0:
            time.sleep(120)
            os._exit(0)
        forked += 1
    with open(os.path.join(os.environ["HOME"], "forked.json"), "w") as out:
        json.dump([forked, why], out)
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "forked"}}))
""")


def test_an_agents_fork_bomb_stops_at_its_ceiling(
    make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork bomb in an agent's shell took the machine's process IDs (every evaluation beside it
    failed to start anything) until its step's timeout; now its pids group stops it, and what it
    left is killed with the group."""
    from aka.agents import cli_runner
    from aka.evaluation.pids_limit import groups_folder

    folder = groups_folder()
    if folder is None:
        pytest.skip("no pids cgroup can be made on this machine")
    monkeypatch.setattr(cli_runner, "AGENT_TASKS_MAX", 64)
    make_toy_task()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cursor-agent").write_text(FORKER.format(python=sys.executable))
    (bin_dir / "cursor-agent").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(AGENT_CLI_DIR_ENV, str(tmp_path / "none"))
    monkeypatch.setenv("CURSOR_API_KEY", "k")
    started = time.monotonic()
    outcome = run_experiment(write_run_config(agent={"template": "cursor", "timeout_seconds": 60}))
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    forked, why = json.loads((workspace / "agent_home" / "forked.json").read_text())
    assert 0 < forked < 64 and "Resource temporarily unavailable" in why, (forked, why)
    assert time.monotonic() - started < 60, "its sleeping children ended with the step, not after"
    assert not [p for p in folder.iterdir() if p.name.startswith(f"aka-step-{os.getpid()}-")]


def test_an_agent_masked_to_one_gpu_gets_only_that_gpus_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a candidate's step: a parallel worker's agent (its CUDA_VISIBLE_DEVICES names one GPU)
    gets the control nodes and its own GPU's, never the GPUs other workers time on."""
    from aka.agents import agent_sandbox
    from aka.device import DeviceInfo
    from aka.evaluation import step_spec
    from aka.evaluation.step_spec import own_gpu

    nodes = {None: ["null", "nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"], "GPU-b": ["null", "nvidia1", "nvidiactl"]}
    monkeypatch.setattr(agent_sandbox, "device_nodes", lambda uuid=None: nodes[uuid])

    def bound(args: list[str]) -> list[str]:
        return [args[i + 1] for i, arg in enumerate(args) if arg == "--dev-bind"]

    assert bound(agent_sandbox._read_only_machine()) == [
        "/dev/nvidia-uvm",
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidiactl",
    ]
    assert bound(agent_sandbox._read_only_machine("GPU-b")) == ["/dev/nvidia1", "/dev/nvidiactl"]
    monkeypatch.setattr(step_spec, "gpu_minor", lambda uuid: 1 if uuid == "GPU-b" else None)  # the driver's table
    gpu = DeviceInfo("cuda", "h200", "NVIDIA H200", "sm_90", 2, uuid="GPU-b")
    assert own_gpu(gpu, {"CUDA_VISIBLE_DEVICES": "1"}) == "GPU-b"
    assert own_gpu(gpu, {}) is None and own_gpu(gpu, {"CUDA_VISIBLE_DEVICES": "0,1"}) is None
    assert own_gpu(DeviceInfo("cpu", "cpu", "cpu", None, 0), {"CUDA_VISIBLE_DEVICES": "1"}) is None
    assert own_gpu(DeviceInfo("cuda", "mi300", "AMD", None, 2, uuid="GPU-r"), {"CUDA_VISIBLE_DEVICES": "1"}) is None


@needs_bwrap
def test_sockets_bound_under_dev_or_through_a_link_do_not_stop_the_guard(tmp_path: Path) -> None:
    """Sockets are masked by binding /dev/null over them, after /dev (bubblewrap's own) is
    read-only: one the host binds in its /dev (a syslog daemon's /dev/log) is skipped, and one
    bound through a link (/var/run/x.sock) is masked at its real path. Either way bubblewrap
    failed to create its target before, and no agent started."""
    import socket
    import subprocess

    from aka.agents.agent_sandbox import guard_prefix

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")  # as /var/run -> /run: bubblewrap follows no link there
    linked = tmp_path / "link" / "daemon.sock"
    in_dev = Path(f"/dev/aka-test-{os.getpid()}.sock")
    servers = []
    for path in (linked, in_dev):
        server = socket.socket(socket.AF_UNIX)
        try:
            server.bind(str(path))
            server.listen()
            servers.append(server)
        except OSError:  # this machine's /dev may take no socket: the linked one still counts
            server.close()
    probe = (
        f"import socket\ntry:\n socket.socket(socket.AF_UNIX).connect({str(linked)!r})\nexcept OSError as e: print(e)"
    )
    try:
        (tmp_path / "work").mkdir()
        (tmp_path / "home").mkdir()
        prefix = guard_prefix(tmp_path / "work", tmp_path / "home")
        ran = subprocess.run([*prefix, sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    finally:
        for server in servers:
            server.close()
        in_dev.unlink(missing_ok=True)
    assert ran.returncode == 0, ran.stderr
    assert "refused" in ran.stdout, "the socket bound through a link is masked too"
