"""Seed-compatible entry point.

`python main.py --config_name FILE [--run-suffix S] [--resume-run DIR | --resume-latest]`
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from aka.errors import AkaError  # noqa: E402
from aka.runner import INFRA_EXIT, run_experiment  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run an AgentKernelArena experiment (same as `aka run`).")
    parser.add_argument("--config_name", required=True, type=Path, help="run config YAML")
    parser.add_argument("--run-suffix", default=None)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume-run", type=Path, default=None)
    group.add_argument("--resume-latest", action="store_true")
    parser.add_argument("--accept-changes", action="store_true",
                        help="resume although the config changed the tasks, scorer or agents (recorded)")
    args = parser.parse_args(argv)
    try:
        outcome = run_experiment(args.config_name, args.run_suffix, args.resume_run, args.resume_latest,
                                 accept_changes=args.accept_changes)
    except AkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(outcome.reports_dir)
    problem = outcome.infra_message()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return INFRA_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
