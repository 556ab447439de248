"""Fixtures: tiny real tasks whose steps are real subprocesses speaking the step-report format.

The `toy` task's kernel declares a `VALUE` (correct when 42) and a `TIME_MS` (what its timed run
reports, paired with the pristine kernel's TIME_MS, or 4 ms for a reference baseline), so
evaluation outcomes are deterministic without a GPU or the Triton interpreter.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]

TOY_HARNESS = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, os.getcwd())
    step = sys.argv[1]
    target = os.environ["AKA_TARGET"]
    out = {"format": "aka-step-report/1", "step": step, "status": "ok", "cases": []}
    if target == "reference":
        out["cases"] = [{"id": "c1", "time_ms": 4.0, "timing_method": "toy_clock"},
                        {"id": "c2", "time_ms": 8.0, "timing_method": "toy_clock"}]
    else:
        try:
            import kernel
        except Exception as exc:
            out["status"] = "failed"
            out["message"] = f"{type(exc).__name__}: {exc}"
            kernel = None
        if kernel is not None and step == "correctness":
            ok = kernel.toy_kernel() == 42
            out["cases"] = [{"id": "c1", "correct": ok}, {"id": "c2", "correct": ok}]
        elif kernel is not None and step == "performance":
            ms = kernel.TIME_MS
            base = 4.0
            pristine = os.path.join(os.environ.get("AKA_BASELINE_DIR", ""), "kernel.py")
            if os.environ.get("AKA_BASELINE") == "source" and os.path.isfile(pristine):
                namespace = {"__file__": pristine}
                exec(open(pristine).read(), namespace)
                base = namespace.get("TIME_MS", base)
            out["cases"] = [{"id": "c1", "time_ms": ms, "timing_method": "toy_clock", "baseline_time_ms": base,
                             "baseline_timing_method": "toy_clock", "speedup": base / ms},
                            {"id": "c2", "time_ms": 2 * ms, "timing_method": "toy_clock", "baseline_time_ms": 2 * base,
                             "baseline_timing_method": "toy_clock", "speedup": base / ms}]
    token = sys.stdin.readline().strip()
    os.write(int(os.environ["AKA_RESULT_FD"]), (json.dumps({"token": token, "report": out}) + "\\n").encode())
    """
)

SEND_SCRIPT = textwrap.dedent(
    """
    # python3 send.py FILE [raw|notoken]: send FILE's JSON as the step report (raw: the bytes as they are)
    import json, os, sys
    token = sys.stdin.readline().strip()
    data = open(sys.argv[1]).read()
    mode = sys.argv[2] if len(sys.argv) > 2 else "wrapped"
    if mode == "wrapped":
        data = json.dumps({"token": token, "report": json.loads(data)}) + "\\n"
    elif mode == "notoken":
        data = json.dumps({"token": "0" * 32, "report": json.loads(data)}) + "\\n"
    os.write(int(os.environ["AKA_RESULT_FD"]), data.encode())
    """
)

TOY_KERNEL = "VALUE = 42\nTIME_MS = 4.0\n\n\ndef toy_kernel():\n    return VALUE\n"


def toy_kernel_source(value: int = 42, time_ms: float = 4.0, extra: str = "") -> str:
    return f"{extra}\nVALUE = {value}\nTIME_MS = {time_ms}\n\n\ndef toy_kernel():\n    return VALUE\n"


ToyTaskFactory = Callable[..., Path]


@pytest.fixture(autouse=True)
def _no_judge_watchdog_left_armed() -> object:
    """A test that holds a judge's turn alone in this process (`Phases.want(ALONE)`) arms the
    judge's watchdog (`aka.harness.stall`), which would end this pytest worker a minute later."""
    yield
    from aka.harness import stall

    stall.release()


@pytest.fixture
def tasks_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    return root


@pytest.fixture
def make_toy_task(tasks_root: Path) -> ToyTaskFactory:
    """Create `tasks_root/<name>` with a toy kernel, harness and config; overrides patch config."""

    def make(name: str = "triton2triton/toy/answer", kernel: str = TOY_KERNEL, **overrides: object) -> Path:
        task_dir = tasks_root / name
        task_dir.mkdir(parents=True)
        (task_dir / "kernel.py").write_text(kernel)
        (task_dir / "harness.py").write_text(TOY_HARNESS)
        (task_dir / "send.py").write_text(SEND_SCRIPT)
        config: dict[str, object] = {
            "task_type": name.split("/")[0],
            "source_file_path": ["kernel.py"],
            "target_kernel_functions": ["toy_kernel"],
            "compile_command": ["python3 harness.py compile"],
            "correctness_command": ["python3 harness.py correctness"],
            "performance_command": ["python3 harness.py performance"],
            "compile_timeout": 60,
            "correctness_timeout": 60,
            "performance_timeout": 60,
        }
        config.update(overrides)
        (task_dir / "config.yaml").write_text(yaml.safe_dump(config))
        return task_dir

    return make


@pytest.fixture
def write_run_config(tmp_path: Path, tasks_root: Path) -> Callable[..., Path]:
    def write(agent: dict[str, object] | None = None, tasks: list[str] | None = None, **fields: object) -> Path:
        config: dict[str, object] = {
            "agent": agent or {"template": "noop"},
            "tasks": tasks if tasks is not None else ["all"],
            "target_gpu_model": "auto",
            "log_directory": str(tmp_path / "logs"),
            "workspace_directory_prefix": str(tmp_path / "workspace"),
            "tasks_root": str(tasks_root),
        }
        config.update(fields)
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    return write


def processes_under(root: Path, by_command_line: bool = False) -> list[str]:
    """Processes (other than this one) working under `root` (or, `by_command_line`, also started
    with a path under it): what a test checks is gone after a timeout, a kill or a run."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
            if cwd.startswith(str(root)) or (by_command_line and str(root) in cmdline):
                found.append(f"{proc.name}: {cmdline} (in {cwd})")
        except OSError:
            continue
    return found


@pytest.fixture(scope="session")
def toy_ab_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A finished two-arm toy run with its comparison and validation files (tests/toy_runs.py), made
    once per test session: test workers (pytest-xdist) share one, made by the first that asks."""
    from filelock import FileLock
    from toy_runs import build_ab_run

    if worker_id == "master":
        return build_ab_run(tmp_path_factory.mktemp("ab_run"))
    shared = tmp_path_factory.getbasetemp().parent  # this session's, above every worker's own
    made = shared / "toy_ab_run.path"
    with FileLock(str(shared / "toy_ab_run.lock")):
        if not made.is_file():
            made.write_text(str(build_ab_run(shared / "toy_ab_run")))
    return Path(made.read_text())
