"""Do the speed-of-light floors hold on this GPU? (GPU)

    PYTHONPATH=src python3 scripts/speed_of_light_check.py [--tasks all] [--shard K/N] [--json F]

Prints the card's table peaks next to what cuBLAS reaches (bf16 and fp8 GEMMs, 8192^3), and the
DRAM peak the driver reports next to a measured copy's bandwidth. Then, for every case of every
task that declares a floor: the fastest honest time we have (the PyTorch reference, the task's
own kernel, the example solution; triton `do_bench` medians, L2 flushed) over the case's floor.
An honest kernel under its floor means the floor is wrong (it would be rejected as an impossible
speedup): the script then exits 1.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "benchmarks")]

from suite_copy import SOLUTIONS, kernel_pair, shard  # noqa: E402

from aka.config.tasks import select_tasks  # noqa: E402


def device_summary() -> dict[str, Any]:
    import torch
    import triton.testing

    from aka.harness import speed_of_light as sol

    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    bf16_ms = triton.testing.do_bench(lambda: a @ b, return_mode="median")
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.ones((), device=device)
    fp8_ms = triton.testing.do_bench(
        lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), return_mode="median"
    )
    return {
        "name": props.name,
        "capability": [props.major, props.minor],
        "sms": props.multi_processor_count,
        "clock_rate_khz": getattr(props, "clock_rate", None),
        "peak_16bit_tflops": (sol.device_peak_ops_per_ms(device, 16) or 0) / 1e9,
        "peak_8bit_tflops": (sol.device_peak_ops_per_ms(device, 8) or 0) / 1e9,
        "cublas_bf16_tflops": 2 * n**3 / bf16_ms / 1e9,
        "cublas_fp8_tflops": 2 * n**3 / fp8_ms / 1e9,
        "copy_tb_per_s": sol.copy_bandwidth(device) / 1e9,
        "dram_peak_tb_per_s": (sol.dram_peak_from_driver(torch.cuda.current_device()) or 0) / 1e9,
        "bytes_floor_tb_per_s": sol.device_bandwidth(device) / 1e9,
    }


def task_rows(task: Any, scratch: Path) -> list[dict[str, Any]]:
    import torch
    import triton.testing

    from aka.harness.speed_of_light import case_floor
    from aka.harness.task import make_case_inputs

    device = torch.device("cuda")
    solution = SOLUTIONS / task.name
    rows = []
    with kernel_pair(task, scratch, solution if solution.is_dir() else None) as (kernel_task, first, source):
        kernels = {"reference": kernel_task.reference, "source": source}
        if solution.is_dir():
            kernels["solution"] = first
        for case in kernel_task.cases_for("full"):
            floor = case_floor(kernel_task, case, device)
            if floor is None:
                continue
            inputs = make_case_inputs(kernel_task, case, case.seed, device)
            times = {}
            for name, fn in kernels.items():
                try:
                    times[name] = triton.testing.do_bench(functools.partial(fn, *inputs), return_mode="median")
                except Exception as exc:  # an instruction task's source is a skeleton that raises
                    print(f"{task.name} {case.id} {name}: {type(exc).__name__}: {exc}", flush=True)
            if not times:
                continue
            best = min(times, key=lambda name: times[name])
            rows.append(
                {
                    "task": task.name,
                    "case": case.id,
                    "floor_ms": floor.ms,
                    "bound": floor.bound,
                    "times_ms": times,
                    "best": best,
                    "headroom": times[best] / floor.ms,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="*", default=["all"])
    parser.add_argument("--shard", default="1/1")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    summary = device_summary()
    print(json.dumps(summary), flush=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in shard(select_tasks(REPO / "tasks", args.tasks), args.shard):
            try:
                rows += task_rows(task, Path(tmp) / task.slug)
            except Exception as exc:  # report and go on: one task's trouble must not hide the others
                print(f"{task.name}: {type(exc).__name__}: {exc}", flush=True)
            if args.json:
                args.json.write_text(json.dumps({"device": summary, "rows": rows}, indent=1))
    under = [row for row in rows if row["headroom"] < 1.0]
    for row in sorted(rows, key=lambda r: r["headroom"])[:10]:
        print(f"{row['headroom']:7.2f}x  {row['task']} {row['case']} ({row['best']}; {row['bound']})")
    print(f"{len(rows)} cases with a floor; {len(under)} honest kernel(s) under their floor")
    return 1 if under else 0


if __name__ == "__main__":
    raise SystemExit(main())
