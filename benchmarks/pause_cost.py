"""What pausing the candidate's worker costs the judge, per timed pair: the stop itself (a walk of
the worker's process tree and a signal to its group), the proof that it stayed stopped
(`aka.stillness`: waiting until every thread stands stopped, then its scheduler clocks), and
the check and resume before its next turn. A real worker, started as the judge starts it, with
torch imported (and on a GPU its CUDA context made): its threads are what the wait waits for.

    python3 benchmarks/pause_cost.py [--device cpu|cuda] [--cycles 300] [--json OUT.json]

Reports the median and 90th percentile of each part in milliseconds, and the worker's thread
count. The judge pauses the candidate once per pair, between its call and the baseline's, so
this is time the judge spends between calls, not time inside a timed call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from aka.harness.remote import RemoteSide, adopt_orphans
from aka.process import stop_trees
from aka.stillness import Stillness

HARNESS = """
from aka.harness import Case, KernelTask, candidate_function

TASK = KernelTask(
    name="pause",
    cases=[Case.make(n=1)],
    make_inputs=lambda case, generator, device: (),
    reference=lambda: None,
    load_candidate=candidate_function("kernel", "f"),
)
"""


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered), "p90_ms": ordered[int(0.9 * (len(ordered) - 1))]}


def measure(device: str, cycles: int) -> dict[str, object]:
    adopt_orphans()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        (home / "task").mkdir()
        (home / "task" / "harness.py").write_text(HARNESS)
        side = RemoteSide("candidate", device, home / "home", None, dict(os.environ))
        side.setup(home / "task", "harness.py", "pause", device, "off", [], [], [], 300.0)
        try:
            threads = len(os.listdir(f"/proc/{side.process.pid}/task"))
            walk, take, whole, check = [], [], [], []
            for _ in range(cycles):
                began = time.perf_counter()
                stop = stop_trees({side.process.pid: None})  # the stop alone, as before the clocks
                walked = time.perf_counter()
                still = Stillness.take(stop.seen)
                taken = time.perf_counter()
                assert still.broken() is None, "an idle worker ran while stopped"
                checked = time.perf_counter()
                side.paused, side._stopped = True, stop.signalled  # so that resume continues it
                side.resume()
                walk.append((walked - began) * 1e3)
                take.append((taken - walked) * 1e3)
                check.append((checked - taken) * 1e3)
                time.sleep(0.002)
                began = time.perf_counter()
                side.pause()  # the judge's own pause: walk, group signal, clocks
                side.stayed_paused()
                side.resume()
                whole.append((time.perf_counter() - began) * 1e3)
                time.sleep(0.002)
        finally:
            side.close()
    return {
        "device": device,
        "cycles": cycles,
        "worker_threads": threads,
        "walk_and_stop": _quantiles(walk),
        "wait_until_stopped_and_read_clocks": _quantiles(take),
        "check_clocks": _quantiles(check),
        "pause_check_resume": _quantiles(whole),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args.device, args.cycles)
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
