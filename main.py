"""Seed-compatible entry point.

`python main.py --config_name FILE [--run-suffix S] [--resume-run DIR | --resume-latest] [--gpus 0,1]`
and the seed's parallel modes: `--parallel-init`, `--parallel-worker --worker-id ID --run-name RUN`,
`--postprocess-only --run-name RUN`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from aka.console import cli_console  # noqa: E402
from aka.errors import AkaError  # noqa: E402
from aka.parallel.queue import DEFAULT_LEASE_SECONDS  # noqa: E402
from aka.parallel.seed_modes import parallel_mode, postprocess_run, run_parallel_worker  # noqa: E402
from aka.reports.summary import print_summary  # noqa: E402
from aka.run.runner import INFRA_EXIT, run_experiment  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run an AgentKernelArena experiment (same as `aka run`).")
    parser.add_argument("--config_name", required=True, type=Path, help="run config YAML")
    parser.add_argument("--run-suffix", default=None)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume-run", type=Path, default=None)
    group.add_argument("--resume-latest", action="store_true")
    parser.add_argument(
        "--accept-changes",
        action="store_true",
        help="resume although the config changed the tasks, scorer or agents (recorded)",
    )
    parser.add_argument("--gpus", default=None, help="GPUs of a parallel run, e.g. 0,1 (overrides gpu_ids)")
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=DEFAULT_LEASE_SECONDS,
        help="a parallel worker silent this long loses its trial",
    )
    parser.add_argument("--parallel-init", action="store_true", help="make the run and its queue, print its path")
    parser.add_argument("--parallel-worker", action="store_true", help="claim trials of --run-name until drained")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--run-name", default=None, help="the run of --parallel-worker / --postprocess-only")
    parser.add_argument("--postprocess-only", action="store_true", help="write --run-name's reports")
    args = parser.parse_args(argv)
    try:
        mode = parallel_mode(
            args.parallel_init, args.parallel_worker, args.postprocess_only, args.worker_id, args.run_name
        )
        if mode == "worker":
            run_parallel_worker(args.config_name, args.run_name, args.worker_id)
            return 0
        if mode == "postprocess":
            outcome = postprocess_run(args.config_name, args.run_name)
        else:
            outcome = run_experiment(
                args.config_name,
                args.run_suffix,
                args.resume_run,
                args.resume_latest,
                accept_changes=args.accept_changes,
                gpus=args.gpus,
                lease_seconds=args.lease_seconds,
                init_only=mode == "init",
            )
    except AkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if mode == "init":
        print(outcome.run_dir)
        return 0
    print_summary(outcome.results, cli_console())
    print(outcome.reports_dir)
    problem = outcome.infra_message()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return INFRA_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
