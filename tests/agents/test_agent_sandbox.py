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
from pathlib import Path

import pytest

from aka.agents.agent_sandbox import pid_namespace_prefix
from aka.agents.cli_runner import AGENT_CLI_DIR_ENV
from aka.run.runner import run_experiment

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it)",
)

PROBE = textwrap.dedent("""\
    #!{python}
    import json, os, pathlib
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
    assert seen["TASKS_ROOT"] == [], "the task suite must be hidden"
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
    import json, subprocess, sys
    # a process of its own session, without the run's marker variable or the CLI's output pipe
    loop = "while :; do echo tick >> {ticks}; sleep 0.1; done"
    subprocess.Popen(["env", "-i", "setsid", "sh", "-c", loop], stdout=subprocess.DEVNULL)
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
    ticks = tmp_path / "ticks.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cursor-agent").write_text(ESCAPER.format(python=sys.executable, ticks=ticks))
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
        assert ticks.is_file(), "the escaping process ran"
        size = ticks.stat().st_size
        time.sleep(1.0)
        assert ticks.stat().st_size == size, "the escaped process outlived the agent's step"
    finally:
        subprocess.run(["pkill", "-f", str(ticks)], check=False)
