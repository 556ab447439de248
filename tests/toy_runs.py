"""A real multi-arm run on toy tasks, for the dashboard's tests: `aka run`'s own code on the CPU,
`aka compare`'s writer, and validation files in the shape `aka validate` writes.

Tasks (noop against replayed solutions):
- triton2triton/toy/fast: the solution is 2x faster; it has held-out cases.
- triton2triton/toy/slow: the solution is 1.6x slower.
- torch2triton/toy/wrong: the kernel is wrong (incorrect under noop); no solution (no candidate).
The toy harness reports each case's speedup with a +-10% interval, so the untouched kernel's 1.0x
is `correct-unchanged`.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import SEND_SCRIPT, TOY_HARNESS, toy_kernel_source

from aka.compare.comparison import compare_arms, default_output_dir
from aka.compare.render import write_outputs
from aka.compare.runs import load_arms
from aka.run.runner import run_experiment

INTERVAL_HARNESS = TOY_HARNESS.replace(
    '"speedup": base / ms}',
    '"speedup": base / ms, "speedup_ci_low": 0.9 * base / ms, "speedup_ci_high": 1.1 * base / ms}',
)
assert INTERVAL_HARNESS.count("speedup_ci_low") == 2
TASKS = {
    "triton2triton/toy/fast": toy_kernel_source(),
    "triton2triton/toy/slow": toy_kernel_source(),
    "torch2triton/toy/wrong": toy_kernel_source(value=41),
}
SOLUTIONS = {
    "triton2triton/toy/fast": toy_kernel_source(time_ms=2.0),
    "triton2triton/toy/slow": toy_kernel_source(time_ms=6.4),
}
VALIDATION_SUMMARY = {"overall_status": "WARN", "tasks": 2, "passed": 1, "warned": 1, "failed": 0}
VALIDATION_REPORTS = {
    "triton2triton/toy/fast": {
        "task_name": "triton2triton/toy/fast",
        "overall_status": "PASS",
        "checks": [
            {"name": "baseline runs", "status": "PASS", "message": "2 cases"},
            {"name": "held-out cases", "status": "PASS"},
        ],
    },
    "triton2triton/toy/slow": {
        "task_name": "triton2triton/toy/slow",
        "overall_status": "WARN",
        "checks": {"baseline runs": "PASS", "timing noise": {"status": "WARN", "message": "A/A spread 3%"}},
    },
}


def _task(root: Path, name: str, kernel: str) -> None:
    task_dir = root / name
    task_dir.mkdir(parents=True)
    (task_dir / "kernel.py").write_text(kernel)
    (task_dir / "harness.py").write_text(INTERVAL_HARNESS)
    (task_dir / "send.py").write_text(SEND_SCRIPT)
    hidden = name.endswith("fast")
    if hidden:
        (task_dir / "heldout.py").write_text("CASES = []  # the toy harness times the same cases\n")
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
        **({"hidden_files": ["heldout.py"]} if hidden else {}),
    }
    (task_dir / "config.yaml").write_text(yaml.safe_dump(config))


def build_ab_run(root: Path) -> Path:
    """The run directory of a finished two-arm run under `root`, with its comparison and validation files."""
    for name, kernel in TASKS.items():
        _task(root / "tasks", name, kernel)
    for name, kernel in SOLUTIONS.items():
        target = root / "solutions" / name / "kernel.py"
        target.parent.mkdir(parents=True)
        target.write_text(kernel)
    config = root / "ab.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "arms": [
                    {"label": "noop", "agent": {"template": "noop"}},
                    {"label": "sol", "agent": {"template": "replay", "solutions_dir": str(root / "solutions")}},
                ],
                "tasks": ["all"],
                "target_gpu_model": "auto",
                "log_directory": str(root / "logs"),
                "workspace_directory_prefix": str(root / "workspace"),
                "tasks_root": str(root / "tasks"),
                "schedule_seed": 3,
            }
        )
    )
    run_dir = run_experiment(config).run_dir
    write_outputs(compare_arms(load_arms([run_dir])), default_output_dir([run_dir]), plots=False)
    (run_dir / "validation_summary.yaml").write_text(yaml.safe_dump(VALIDATION_SUMMARY))
    for name, report in VALIDATION_REPORTS.items():
        folder = run_dir / "validation" / name.replace("/", "_")
        folder.mkdir(parents=True)
        (folder / "validation_report.yaml").write_text(yaml.safe_dump(report, sort_keys=False))
    return run_dir
