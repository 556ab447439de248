"""The hand-written solutions of the task suite, replayed on the GPU against each task's baseline.

    PYTHONPATH=src python3 benchmarks/solutions_table.py [--tasks all] [--shard K/N --json F] [--out FILE]
    PYTHONPATH=src python3 benchmarks/solutions_table.py --merge F1 F2 --out FILE

Every task's editable files are replaced by `solutions/examples/<task>/...` (what the replay agent
does), and the real evaluator judges them against the task's baseline (its original source,
or the PyTorch reference for torch2* / instruction2triton tasks); every task's own baseline
and its noop A/A are in benchmarks/aa_noise.py. One row per solved task:
baseline ms and solution ms (means over the cases), the speedup (mean of per-case ratios) with
its 95% interval, and the verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from suite_copy import SOLUTIONS, copy_tasks, evaluate, shard, write_report  # noqa: E402

from aka.config.tasks import select_tasks  # noqa: E402
from aka.device import detect_device  # noqa: E402


def render(rows: list[dict[str, Any]], device: str) -> str:
    lines = [
        f"# Task suite on {device}: baselines and replayed solutions",
        f"Date (UTC): {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
        "Command: `PYTHONPATH=src python3 benchmarks/solutions_table.py` (per GPU shard: `--shard K/N --json F`, "
        "then `--merge F...`)",
        "",
        "| task | verdict | baseline ms | solution ms | speedup | 95% CI | evaluation s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: r["task"]):

        def ms(value: float | None) -> str:
            return f"{value:.4f}" if value else ""

        low, high = r["ci"]
        ci = f"{low:.3f}-{high:.3f}" if low and high else ""
        verdict = r["status"] if r["failure"] == "none" else f"{r['status']} ({r['failure']}: {r['message']})"
        lines.append(
            f"| {r['task']} | {verdict} | {ms(r['base_ms'])} | {ms(r['ms'])} | "
            f"{(r['speedup'] or 0):.3f}x | {ci} | {r['seconds'] or 0:.1f} |"
        )
    fast = [r for r in rows if r["status"] == "PASS" and (r["speedup"] or 0) >= 1.2]
    passing = [r for r in rows if r["status"] == "PASS"]
    lines.append(
        f"\n{len(passing)}/{len(rows)} replayed solutions pass; {len(fast)} are at least 1.2x faster "
        "than their baseline."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="*", default=["all"])
    parser.add_argument("--shard", default="1/1")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--merge", type=Path, nargs="*")
    args = parser.parse_args()
    if args.merge:
        text = render([r for path in args.merge for r in json.loads(path.read_text())], "merged shards")
    else:
        device = detect_device()
        tasks = shard(
            [t for t in select_tasks(REPO / "tasks", args.tasks) if (SOLUTIONS / t.name).is_dir()], args.shard
        )
        rows: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "tasks"
            copy_tasks(tasks, root, source_baseline=False)
            for task in select_tasks(root, [t.name for t in tasks]):
                result = evaluate(task, SOLUTIONS / task.name, Path(tmp) / task.slug, device)
                rows.append(
                    {
                        "task": task.name,
                        "status": "PASS" if result["verdict"] == "PASS" else "FAIL",
                        "failure": "none" if result["verdict"] == "PASS" else result["verdict"],
                        **result,
                    }
                )
                print(rows[-1], flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1))
        text = render(rows, f"{device.name} ({device.arch or 'cpu'})")
    return write_report(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
