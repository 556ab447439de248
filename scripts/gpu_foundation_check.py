"""GPU check of the foundation: the starter tasks evaluated end to end on a real GPU.

Runs four experiments with the real runner (replay of the example, wrong and broken solutions,
and the noop A/A control) and prints one markdown table per experiment. Exits non-zero unless:
the replayed GELU example is faster than its baseline, the wrong GELU is rejected as incorrect,
the broken one fails to compile, and vector_add compiles, runs and is correct.

    PYTHONPATH=src python3 scripts/gpu_foundation_check.py [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aka.device import detect_device  # noqa: E402
from aka.results.task_result import FailureKind, TaskResult, TaskStatus  # noqa: E402
from aka.run.runner import run_experiment  # noqa: E402

STARTERS = ["triton2triton/basic/gelu", "torch2triton/basic/softmax", "cuda2cuda/basic/vector_add"]
EXPERIMENTS = {
    "replay examples": ({"template": "replay", "solutions_dir": str(REPO / "solutions/examples")}, STARTERS),
    "replay wrong": ({"template": "replay", "solutions_dir": str(REPO / "solutions/wrong")}, STARTERS[:1]),
    "replay broken": ({"template": "replay", "solutions_dir": str(REPO / "solutions/broken")}, STARTERS[:1]),
    "noop (A/A)": ({"template": "noop"}, STARTERS),
}


def _fmt(value: float | None, pattern: str) -> str:
    return pattern.format(value) if value is not None else "-"


def table(results: list[TaskResult]) -> list[str]:
    lines = [
        "| task | status | failure kind | score | speedup | base ms | candidate ms | methods |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.task_name} | {r.status.value} | {r.failure_kind.value} | {r.score:.1f} | "
            f"{_fmt(r.speedup_ratio, '{:.3f}x')} | {_fmt(r.base_execution_time, '{:.4f}')} | "
            f"{_fmt(r.best_optimized_execution_time, '{:.4f}')} | {', '.join(r.optimized_benchmark_methods) or '-'} |"
        )
        for case in r.cases:
            lines.append(
                f"|  - {case.id} | | | | {_fmt(case.speedup, '{:.3f}x')} | {_fmt(case.base_ms, '{:.4f}')} "
                f"| {_fmt(case.optimized_ms, '{:.4f}')} | {case.optimized_method or '-'} |"
            )
    return lines


def checks(outcomes: dict[str, dict[str, TaskResult]]) -> list[tuple[str, bool]]:
    example, wrong, broken = outcomes["replay examples"], outcomes["replay wrong"], outcomes["replay broken"]
    gelu, vector_add = example[STARTERS[0]], example[STARTERS[2]]
    return [
        (
            "replayed GELU example is correct and faster than its baseline",
            gelu.status is TaskStatus.PASS and (gelu.speedup_ratio or 0) > 1.0,
        ),
        (
            "wrong GELU is rejected as incorrect (score 20)",
            wrong[STARTERS[0]].failure_kind is FailureKind.INCORRECT and wrong[STARTERS[0]].score == 20,
        ),
        (
            "broken GELU fails to compile (score 0)",
            broken[STARTERS[0]].failure_kind is FailureKind.COMPILE_ERROR and broken[STARTERS[0]].score == 0,
        ),
        (
            "vector_add compiles, runs and is correct",
            vector_add.pass_compilation and vector_add.pass_correctness and vector_add.status is TaskStatus.PASS,
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown here")
    args = parser.parse_args()
    device = detect_device()
    lines = [
        f"# Foundation check on {device.name} ({device.arch or 'cpu'})",
        f"Date (UTC): {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
        "Command: `PYTHONPATH=src python3 scripts/gpu_foundation_check.py`",
        "",
    ]
    outcomes: dict[str, dict[str, TaskResult]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, (agent, tasks) in EXPERIMENTS.items():
            config = Path(tmp) / f"{label.split()[0]}_{len(outcomes)}.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "agent": agent,
                        "tasks": tasks,
                        "target_gpu_model": "auto",
                        "log_directory": str(Path(tmp) / "logs"),
                        "workspace_directory_prefix": str(Path(tmp) / "ws"),
                    }
                )
            )
            outcome = run_experiment(config, suffix=label.split()[0] + str(len(outcomes)), device=device)
            outcomes[label] = {r.task_name: r for r in outcome.results}
            lines += [f"## {label}", *table(outcome.results), ""]
    verdicts = checks(outcomes)
    lines += ["## Checks", *[f"- [{'x' if ok else ' '}] {name}" for name, ok in verdicts]]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
