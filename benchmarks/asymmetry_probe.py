"""Why an honest candidate's worker shows more unexplained time than the baseline's (GPU).

    PYTHONPATH=src python3 benchmarks/asymmetry_probe.py [--tasks T ...] [--repeats 2] [--json F]

On the H200 an A/A candidate's calls left 0-16 us more of the judge's span unexplained than the
baseline's calls in the same pairs, with about twice their spread (docs/benchmarks/
2026-12-02_trust_h200.md), which forced a 10 us allowance. The two workers differ in only a few
ways; each variant here removes one, on the real performance step of a task's own sources on
both sides, run in-process (`judge_step`) with the evaluator's environment:

- `plain`: as the evaluator runs it (since session 52 the baseline's worker runs the guards too,
  observed only);
- `no_guard`: neither worker under the torch-operator policy or the launch counter;
- `candidate_guard_only`: the guards on the candidate's side alone (as before session 52);
- `candidate_first`: the candidate's worker forked (and its CUDA context made) before the baseline's.

Each variant runs in a process of its own: the judge forks its workers before it touches CUDA,
and the patches reach the workers through that fork. Printed per variant and case: the median
unexplained time (us) of the baseline's and the candidate's calls in the same pairs, and the
candidate's excess.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

VARIANTS = ("plain", "no_guard", "candidate_guard_only", "candidate_first")
LINE = re.compile(
    r"unexplained us: baseline alone (?P<alone>[-\d.]+) \(sd [-\d.]+\), in pairs (?P<base>[-\d.]+) "
    r"\(sd (?P<base_sd>[-\d.]+)\); candidate (?P<cand>[-\d.]+) \(sd (?P<cand_sd>[-\d.]+)\)"
)


def _patch(variant: str) -> None:
    """Applied in the judge's process before it forks its workers."""
    from aka.harness import guard, remote, sides
    from aka.harness.guard import OBSERVE, OFF

    if variant == "no_guard":
        sides.policy_applies = lambda family: False  # type: ignore[assignment]
        guard.LaunchCounter.instrument = lambda self, modules, names: None  # type: ignore[method-assign]
    elif variant == "candidate_guard_only":
        original = remote.RemoteSide.setup

        def setup(
            self: Any, directory: Path, task_file: str, task_name: str, device: str, policy: str, *rest: Any
        ) -> None:
            original(self, directory, task_file, task_name, device, OFF if policy == OBSERVE else policy, *rest)

        remote.RemoteSide.setup = setup  # type: ignore[method-assign, assignment]
    elif variant == "candidate_first":
        from aka.harness.remote import RemoteSide

        start = sides.StepWorkers.start.__func__  # type: ignore[attr-defined]

        def swapped(cls: Any, ctx: Any, environ: Any) -> Any:
            if ctx.step != "performance" or ctx.target != "candidate":
                return start(cls, ctx, environ)
            home = Path(tempfile.mkdtemp(prefix="aka-workers-", dir=environ.get("TMPDIR") or None))
            shared, own = environ.get(sides.ENV_SHARED_CACHE), environ.get("TRITON_CACHE_DIR")
            candidate = RemoteSide("candidate", ctx.device.type, home, Path(shared) if shared else None, dict(environ))
            baseline = RemoteSide("baseline", ctx.device.type, home, Path(own) if own else None, dict(environ))
            return cls(home, candidate, baseline)

        sides.StepWorkers.start = classmethod(swapped)  # type: ignore[method-assign, assignment]


def run_one(task_name: str, variant: str) -> dict[str, Any]:
    """One performance step of `task_name`'s own sources on both sides, under `variant`."""
    from suite_copy import copy_tasks

    from aka.config.tasks import select_tasks
    from aka.device import detect_device
    from aka.evaluation.eval_dir import build_eval_dir
    from aka.evaluation.step_spec import Step, Target, step_environment
    from aka.harness.runner import judge_step
    from aka.harness.task import KernelTask, StepContext

    device = detect_device()
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logging.getLogger("aka").addHandler(Collect())
    logging.getLogger("aka").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tasks"
        copy_tasks(select_tasks(REPO / "tasks", [task_name]), root, source_baseline=True)
        task = select_tasks(root, [task_name])[0]
        eval_dir = Path(tmp) / "evaluation"
        build_eval_dir(task, eval_dir, task.directory)
        env = step_environment(
            task,
            device,
            Step.PERFORMANCE,
            Target.CANDIDATE,
            eval_dir,
            {"TRITON_CACHE_DIR": str(Path(tmp) / "triton"), "TMPDIR": tmp},
        )
        os.environ.clear()
        os.environ.update(env)
        os.chdir(eval_dir)
        sys.path.insert(0, str(eval_dir))
        import importlib.util

        spec = importlib.util.spec_from_file_location("probe_harness", eval_dir / "harness.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kernel_task = next(v for v in vars(module).values() if isinstance(v, KernelTask))
        _patch(variant)
        result = judge_step(kernel_task, StepContext.from_env("performance", env), env)
    cases = [
        {key: float(value) for key, value in match.groupdict().items()}
        for match in (LINE.search(line) for line in lines)
        if match
    ]
    return {
        "task": task_name,
        "variant": variant,
        "status": result.status,
        "message": result.message,
        "speedups": [c.speedup for c in result.cases],
        "cases": cases,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="*", default=["cuda2cuda/basic/vector_add", "torch2triton/llm/rmsnorm"])
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", nargs=2, metavar=("TASK", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return 0
    rows = []
    for task in args.tasks:
        for repeat in range(args.repeats):
            for variant in args.variants:
                done = subprocess.run(
                    [sys.executable, __file__, "--one", task, variant],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=False,
                )
                if done.returncode != 0:
                    rows.append(
                        {
                            "task": task,
                            "variant": variant,
                            "repeat": repeat,
                            "error": done.stderr.strip().splitlines()[-1:] or ["failed"],
                        }
                    )
                else:
                    rows.append({**json.loads(done.stdout.strip().splitlines()[-1]), "repeat": repeat})
                print(_line(rows[-1]), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"| {row['task']} | {row['variant']} | error: {row['error'][0][:150]} |"
    excess = [c["cand"] - c["base"] for c in row["cases"]]
    spread = [c["cand_sd"] / max(c["base_sd"], 0.1) for c in row["cases"]]
    shown = ", ".join(f"{e:+.1f}" for e in excess)
    return (
        f"| {row['task']} | {row['variant']} | {row['status']} | excess us per case: {shown} | median "
        f"{statistics.median(excess) if excess else float('nan'):+.1f} | spread ratio "
        f"{statistics.median(spread) if spread else float('nan'):.1f} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
