"""Calibration of `aka compare` by simulation: coverage, A/A false positives, power against detection.

Each scenario simulates EXPERIMENTS A/B experiments with a known true effect (aka.ab_simulation),
runs the real comparison on each and tallies: how often the 95% t-interval and the bootstrap
interval cover the true effect, how often each test rejects at alpha = 0.05, and the power the
analysis predicts next to the detection rate observed. Writes a markdown table.

    PYTHONPATH=src python benchmarks/ab_calibration.py --experiments 1000 --out docs/benchmarks/DATE_ab_calibration.md
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from aka.ab_simulation import Calibration, Scenario, calibrate

SCENARIOS = (
    Scenario("A/A, 30 tasks, K=2"),
    Scenario("A/A, 30 tasks, K=1", repeats=1),
    Scenario("A/A, 60 tasks, K=3, all correct", tasks=60, repeats=3, correct_rate=0.999, correct_sd=0.0),
    Scenario("A/B 1.05x, 30 tasks, K=2", effect=0.05),
    Scenario("A/B 1.05x, 30 tasks, K=4, noisy runs", effect=0.05, repeats=4, run_sd=0.2),
    Scenario("A/B 1.10x, 40 tasks, K=2", tasks=40, effect=0.0953),
    Scenario("A/B 1.05x + correctness, 30 tasks, K=2", effect=0.05, correct_shift=0.8),
)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(rows: list[Calibration]) -> str:
    head = ("| scenario | true effect (log) | t-CI coverage | bootstrap coverage | reject t | reject Wilcoxon "
            "| reject McNemar | reject score t | Holm any | predicted power (true sd) | predicted power (estimated) "
            "| t detection |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for c in rows:
        r = c.rejections
        lines.append(f"| {c.scenario.name} | {c.true_effect:.4f} | {_pct(c.t_coverage)} | {_pct(c.bootstrap_coverage)} "
                     f"| {_pct(r['log_speedup_t'])} | {_pct(r['log_speedup_wilcoxon'])} "
                     f"| {_pct(r['correctness_mcnemar'])} | {_pct(r['score_t'])} | {_pct(c.holm_any)} "
                     f"| {_pct(c.predicted_power_true_sd)} | {_pct(c.predicted_power_estimated)} "
                     f"| {_pct(c.t_detection)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per experiment")
    parser.add_argument("--out", type=Path, help="write the markdown report here too")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = [calibrate(s, args.experiments, args.seed + i, args.resamples) for i, s in enumerate(SCENARIOS)]
    command = " ".join(["python", "benchmarks/ab_calibration.py", *(argv if argv is not None else sys.argv[1:])])
    report = "\n".join([
        f"# aka compare calibration ({datetime.now(timezone.utc):%Y-%m-%d})",
        "",
        f"Command: `PYTHONPATH=src {command}` ({time.monotonic() - started:.0f} s on the CPU).",
        f"{args.experiments} simulated experiments per scenario; alpha = 0.05; model in `src/aka/ab_simulation.py`.",
        "",
        table(rows),
        "",
    ])
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
