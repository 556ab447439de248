"""Evaluations per GPU-hour through the reward server, on a realistic mix of candidates.

    PYTHONPATH=src python3 benchmarks/reward_throughput.py [--tasks T ...] [--max-concurrent 4]
        [--eval-timeout 60] [--exploits] [--out FILE] [--json FILE] [--cache-dir DIR]

Starts `aka serve` for real (its own process, on every visible GPU), warms each task's frozen
baseline with one unchanged candidate, then submits the mix at once and polls every job:

- unchanged: the task's own sources (its speedup is an A/A reading under load: should be 1.0);
- faster: the task's solution from solutions/examples, where there is one;
- wrong: the task's sources with every public function's tensor outputs scaled by 1.5;
- not compiling: a syntax error appended;
- hanging: the module sleeps forever when imported (the job's deadline must free the GPU).

Each candidate carries a fresh comment so that none is a cache hit. Reported: evaluations per
GPU-hour over the mix (and without the hanging ones), latency percentiles from submission to
result, the A/A band of the unchanged candidates under load, then the latency of single
candidates submitted one at a time (a short queue), and the GELU exploit catalog submitted
through the server with each verdict. Timing claims come from a GPU; on the CPU this checks the
script.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]

from aka.config.task_config import BaselineSource  # noqa: E402
from aka.config.tasks import Task, select_tasks  # noqa: E402
from aka.device import detect_devices  # noqa: E402

SOLUTIONS = REPO / "solutions" / "examples"
SETTINGS = (
    "AKA_WARM_STEPS",
    "AKA_DEVICE_YIELD_AFTER_S",
    "AKA_TIMING_BUDGET_S",
    "AKA_PLACEMENTS",
    "AKA_PHASED_TURN",
    "AKA_PHASED_SET_UP",
    "AKA_ONE_TURN",
)
DEFAULT_TASKS = [
    "triton2triton/basic/gelu",
    "torch2triton/basic/softmax",
    "triton2triton/llm/rmsnorm_residual",
    "torch2triton/llm/rmsnorm",
    "triton2triton/llm/silu_and_mul",
    "torch2triton/llm/layernorm",
    "triton2triton/llm/log_softmax",
    "triton2triton/llm/cumsum",
]
WRONG = """

import functools as _aka_functools
import inspect as _aka_inspect


def _aka_wrong(function):
    @_aka_functools.wraps(function)
    def wrapped(*args, **kwargs):
        out = function(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for item in outs:
            if hasattr(item, "is_floating_point") and item.is_floating_point():
                item.mul_(1.5)
        return out
    return wrapped


for _aka_name, _aka_value in list(globals().items()):
    if (_aka_inspect.isfunction(_aka_value) and not _aka_name.startswith("_")
            and _aka_value.__module__ == __name__):
        globals()[_aka_name] = _aka_wrong(_aka_value)
"""
BROKEN = "\n\ndef broken(:\n"
HANGING = "\n\nimport time as _aka_time\n_aka_time.sleep(10**6)\n"
Entry = tuple[str, str, dict[str, str]]  # kind, task, files


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Client:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: object = None, timeout: float = 900) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read().decode())
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def wait(self, job_id: str, limit: float) -> dict[str, Any]:
        """The job's result, or its state once `limit` s have passed. Each long poll asks for at most
        the time left: a fixed 60 s poll overshot a --deadline by up to a minute, so cut runs of one
        mix counted over windows of 55 s or 118 s by chance (session 53)."""
        deadline = time.monotonic() + limit
        while True:
            left = max(0.0, deadline - time.monotonic())
            status, body = self.call("GET", f"/v1/jobs/{job_id}/result?wait={min(60.0, left):.2f}")
            if status == 200 or time.monotonic() >= deadline:
                return dict(body) if isinstance(body, dict) else {"state": f"http {status}"}


def _source(task: Task) -> dict[str, str]:
    return {rel: (task.directory / rel).read_text() for rel in task.config.source_file_path}


RUN_NONCE = secrets.token_hex(6)  # in every candidate: no cache hit on a cache another run left (--cache-dir)


def _marked(files: dict[str, str], nonce: str, tail: str = "") -> dict[str, str]:
    """The files with a comment (or `tail`) appended to the first Python source: no cache hit."""
    out = dict(files)
    first = next((rel for rel in out if rel.endswith(".py")), next(iter(out)))
    comment = "// " if first.endswith((".cu", ".cuh", ".cpp")) else "# "
    out[first] = out[first] + f"\n{comment}{nonce} {RUN_NONCE}\n" + tail
    return out


def mix(tasks: list[Task], seed: int, hanging: bool = True, copies: int = 1) -> list[Entry]:
    """(kind, task, files) for the whole mix, `copies` times over (each copy's candidates distinct,
    none a cache hit), shuffled with `seed`; without hanging candidates when comparing settings,
    whose GPU-hour would otherwise mostly measure the hang's timeout."""
    entries: list[Entry] = []
    for copy, (index, task) in itertools.product(range(copies), enumerate(tasks)):
        own = _source(task)
        python = any(rel.endswith(".py") for rel in own)
        tag = f"{index} copy {copy}"
        entries += [("unchanged", task.name, _marked(own, f"unchanged {tag} {n}")) for n in range(2)]
        solution = SOLUTIONS / task.name
        if solution.is_dir():
            files = {
                rel: (solution / rel).read_text() for rel in task.config.source_file_path if (solution / rel).is_file()
            }
            entries += [("faster", task.name, _marked(files, f"faster {tag} {n}")) for n in range(2)]
        if python:
            entries.append(("wrong", task.name, _marked(own, f"wrong {tag}", WRONG)))
            entries.append(("not compiling", task.name, _marked(own, f"broken {tag}", BROKEN)))
            if hanging and index % 4 == 0:
                entries.append(("hanging", task.name, _marked(own, f"hanging {tag}", HANGING)))
    random.Random(seed).shuffle(entries)
    return entries


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="*", default=DEFAULT_TASKS)
    parser.add_argument("--max-concurrent", type=int, default=4, help="evaluations in flight per GPU")
    parser.add_argument("--request-timeout", type=float, default=3600.0)
    parser.add_argument("--eval-timeout", type=float, default=60.0, help="a hung candidate's cap once it runs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--singles", type=int, default=5, help="candidates then submitted one at a time")
    parser.add_argument(
        "--copies", type=int, default=1, help="the mix this many times over: a trainer's batch, ramp and tail amortized"
    )
    parser.add_argument("--no-hanging", action="store_true", help="leave the hanging candidates out of the mix")
    parser.add_argument("--exploits", action="store_true", help="also the GELU exploit catalog through the server")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--deadline",
        type=float,
        help="seconds from start: then stop waiting, count what finished and write the report (a device call's "
        "limit no longer loses a whole phase)",
    )
    parser.add_argument("--logs-dir", type=Path, help="keep every evaluation's log here (default: a temporary folder)")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="the server's cache, kept (default: a fresh one): runs of a sweep then freeze each baseline once",
    )
    args = parser.parse_args()
    devices = detect_devices()
    gpus = len(devices) if devices[0].is_gpu else 0
    tasks = select_tasks(REPO / "tasks", args.tasks)
    port = _free_port()
    cache = args.cache_dir.resolve() if args.cache_dir else Path(tempfile.mkdtemp(prefix="aka-throughput-"))
    cache.mkdir(parents=True, exist_ok=True)
    # this run's evaluations only
    logs = args.logs_dir.resolve() if args.logs_dir else Path(tempfile.mkdtemp(prefix="aka-throughput-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + args.deadline if args.deadline else None
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aka.cli",
            "serve",
            "--tasks-root",
            str(REPO / "tasks"),
            "--cache-dir",
            str(cache),
            "--port",
            str(port),
            "--max-queue",
            "100000",
            "--max-concurrent",
            str(args.max_concurrent),
            "--request-timeout",
            str(args.request_timeout),
            "--eval-timeout",
            str(args.eval_timeout),
            "--log-dir",
            str(logs),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(logs / "server.log", "w"),
    )
    client = Client(port)
    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": devices[0].name,
        "gpus": gpus,
        "max_concurrent": args.max_concurrent,
        "request_timeout": args.request_timeout,
        "eval_timeout": args.eval_timeout,
        "argv": sys.argv[1:],
        # the evaluator's settings from the environment that change what a GPU-hour yields
        "settings": {k: os.environ[k] for k in SETTINGS if k in os.environ},
        "tasks": [t.name for t in tasks],
        # an unchanged candidate is an A/A reading only where the baseline is the task's own source
        # (torch2* and instruction2* time a PyTorch reference: their unchanged sources read 1.6x, 9x)
        "aa_tasks": [t.name for t in tasks if t.config.baseline_source is BaselineSource.SOURCE],
    }
    try:
        _wait_up(client, server)
        started = time.monotonic()
        warm = _run(client, [("warm-up", t.name, _marked(_source(t), "warm")) for t in tasks], args, end)
        report["warmup_s"] = round(time.monotonic() - started, 1)
        report["warmup"] = [_brief(row) for row in warm]
        _save(report, args.json, "warm-up")
        entries = mix(tasks, args.seed, hanging=not args.no_hanging, copies=args.copies)
        started = time.monotonic()
        rows = _run(client, entries, args, end)
        wall = time.monotonic() - started
        finished = [row for row in rows if row.get("state") in FINISHED]
        if len(finished) < len(rows):  # cut: what finished, over the time until the last of them did
            wall = max((row["latency_s"] for row in finished), default=wall)
            report["mix_cut"] = {"finished": len(finished), "submitted": len(rows), "deadline_s": args.deadline}
        report["mix"] = [_brief(row) for row in finished]
        report["mix_wall_s"] = round(wall, 1)
        _save(report, args.json, "mix")
        singles = []
        for index in range(args.singles if len(finished) == len(rows) else 0):
            task = tasks[index % len(tasks)]
            singles += _run(client, [("single", task.name, _marked(_source(task), f"single {index}"))], args, end)
        report["singles"] = [_brief(row) for row in singles if row.get("state") in FINISHED]
        _save(report, args.json, "singles")
        if args.exploits and len(finished) == len(rows):
            from exploits.catalog import EXPLOITS

            exploit_rows = _run(
                client,
                [
                    (name, "triton2triton/basic/gelu", {"kernel.py": e.source + f"\n# {name}\n"})
                    for name, e in EXPLOITS.items()
                    if name != "stalls_forever"
                ],
                args,
                end,
            )
            report["exploits"] = [
                {**_brief(row), "accepted": sorted(EXPLOITS[row["kind"]].accepted)} for row in exploit_rows
            ]
    finally:
        server.terminate()
        server.wait(timeout=60)
    report["holds"] = _holds(logs)
    text = render(report, gpus)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


def _holds(logs: Path) -> dict[str, Any] | None:
    """benchmarks/device_holds.py over every evaluation's log the server kept: how long each step
    held the GPU, and the timed turn in parts (what a GPU-hour's evaluations are spent on)."""
    if not logs.is_dir():
        return None
    out = logs / "holds.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "device_holds.py"), str(logs), "--json", str(out)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not out.is_file():
        return {"error": (done.stderr or done.stdout)[-500:]}
    return {"summary": json.loads(out.read_text()), "text": done.stdout}


def _save(report: dict[str, Any], path: Path | None, phase: str) -> None:
    """Keep what a phase measured: a run cut short (a device call's limit) still has its numbers."""
    print(f"{datetime.now(timezone.utc):%H:%M:%S} {phase} done", flush=True)
    if path:
        path.write_text(json.dumps(report, indent=1))


def _wait_up(client: Client, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            if client.call("GET", "/healthz", timeout=5)[0] == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the server did not come up in 120 s")


FINISHED = ("done", "failed", "timeout")  # the server's end states; anything else was cut at --deadline


def _run(
    client: Client, entries: list[Entry], args: argparse.Namespace, end: float | None = None
) -> list[dict[str, Any]]:
    """Submit every entry at once, then wait for each (until `end`, `time.monotonic()`, where set);
    one row per entry with its latency."""
    submitted = time.monotonic()
    status, body = client.call(
        "POST", "/v1/batch", {"candidates": [{"task_id": task, "files": files} for _, task, files in entries]}
    )
    if status != 202:
        raise SystemExit(f"the batch was refused: {status} {body}")
    jobs = body["jobs"]

    def finish(pair: tuple[Entry, dict[str, Any]]) -> dict[str, Any]:
        (kind, task, _), job = pair
        limit = args.request_timeout + 60
        done = client.wait(job["id"], limit if end is None else max(0.0, min(limit, end - time.monotonic())))
        return {"kind": kind, "task": task, "latency_s": time.monotonic() - submitted, **done}

    with ThreadPoolExecutor(max_workers=min(64, len(jobs))) as pool:
        return list(pool.map(finish, zip(entries, jobs, strict=True)))


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    result = row.get("result") or {}
    return {
        "kind": row["kind"],
        "task": row["task"],
        "state": row.get("state"),
        "latency_s": round(row["latency_s"], 2),
        "failure_kind": result.get("failure_kind"),
        "speedup": result.get("speedup"),
        "ci": [result.get("speedup_ci_low"), result.get("speedup_ci_high")],
        "seconds": result.get("evaluation_seconds"),
        "device_wait_s": result.get("device_wait_seconds"),
    }


def _steady_state(latencies: list[float], gpus: int) -> list[str]:
    """The rate once the pipeline is full: completions after the first over the time from the first
    to the last. All are submitted at once, so the first finishes only after a whole evaluation; this
    rate compares settings whose runs stopped at different points of the mix."""
    done = sorted(latencies)
    if len(done) < 3 or done[-1] <= done[0]:
        return []
    span = done[-1] - done[0]
    rate = (len(done) - 1) / span * 3600 / max(gpus, 1)
    return [
        f"Steady state (ramp-up left out): {len(done) - 1} finished in the {span:.0f} s after the first "
        f"({done[0]:.0f} s), {rate:.0f} per GPU-hour."
    ]


def render(report: dict[str, Any], gpus: int) -> str:
    mix_rows, wall = report["mix"], report["mix_wall_s"]
    per_gpu_hour = len(mix_rows) / wall * 3600 / max(gpus, 1)
    latencies = [r["latency_s"] for r in mix_rows]
    lines = [
        f"# Reward server throughput on {report['device']} x{max(gpus, 1)} ({'GPU' if gpus else 'CPU only'})",
        f"Date (UTC): {report['date']}",
        f"Command: `{''.join(f'{k}={v} ' for k, v in sorted(report.get('settings', {}).items()))}"
        f"PYTHONPATH=src python3 benchmarks/reward_throughput.py "
        f"{' '.join(report.get('argv') or ['--max-concurrent', str(report['max_concurrent'])])}`",
        f"Tasks: {', '.join(report['tasks'])}",
        "",
        f"Warm-up (each task's baseline measured and frozen, one unchanged candidate each): "
        f"{report['warmup_s']:.0f} s.",
        "",
        "| candidates | count | verdicts |",
        "|---|---|---|",
    ]
    for kind in sorted({r["kind"] for r in mix_rows}):
        rows = [r for r in mix_rows if r["kind"] == kind]
        verdicts: dict[str, int] = {}
        for r in rows:
            key = r["failure_kind"] or r["state"] or "?"
            verdicts[key] = verdicts.get(key, 0) + 1
        lines.append(f"| {kind} | {len(rows)} | {', '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))} |")
    hanging = [r for r in mix_rows if r["kind"] == "hanging"]
    cut = report.get("mix_cut")
    lines += [
        "",
        f"**{len(mix_rows)} evaluations in {wall:.0f} s: {per_gpu_hour:.0f} per GPU-hour** "
        f"({report['max_concurrent']} in flight per GPU).",
        *(
            [
                f"Cut at the deadline ({cut['deadline_s']:g} s from the start): {cut['finished']} of "
                f"{cut['submitted']} finished, counted over the time until the last of them finished "
                "(ramp-up weighs more than in a whole mix)."
            ]
            if cut
            else []
        ),
        *_steady_state(latencies, gpus),
        f"Latency from submission (all submitted at once): p50 {percentile(latencies, 0.5):.1f} s, "
        f"p90 {percentile(latencies, 0.9):.1f} s, p99 {percentile(latencies, 0.99):.1f} s.",
    ]
    if hanging:
        others = [r for r in mix_rows if r["kind"] != "hanging"]
        last_other = max(r["latency_s"] for r in others)
        lines.append(
            f"Without the {len(hanging)} hanging candidates (each held until its "
            f"{report['eval_timeout']:.0f} s deadline): the others were done after {last_other:.0f} s, "
            f"{len(others) / last_other * 3600 / max(gpus, 1):.0f} per GPU-hour."
        )
    aa_tasks = report.get("aa_tasks", report["tasks"])
    unchanged = [r for r in mix_rows if r["kind"] == "unchanged" and r["speedup"] and r["task"] in aa_tasks]
    if unchanged:
        band = max(abs(r["speedup"] - 1) for r in unchanged)
        per_task: dict[str, list[float]] = {}
        for r in unchanged:
            per_task.setdefault(r["task"], []).append(r["speedup"])
        lines.append(
            f"A/A under load ({len(unchanged)} unchanged candidates of tasks timed against their own source): "
            f"band {band:.4f}; "
            + "; ".join(f"{t.split('/')[-1]} {', '.join(f'{s:.4f}' for s in v)}" for t, v in per_task.items())
        )
    seconds = [r["seconds"] for r in mix_rows if r["seconds"]]
    if seconds:
        waits = [r.get("device_wait_s") for r in mix_rows if r.get("device_wait_s") is not None]
        lines.append(
            f"Evaluation time inside the server (queue wait excluded): median {statistics.median(seconds):.1f} s"
            + (f", of which waiting for the device: median {statistics.median(waits):.1f} s." if waits else ".")
        )
    singles = report.get("singles") or []
    if singles:
        single = [r["latency_s"] for r in singles]
        lines.append(
            f"One candidate at a time (short queue), {len(single)} candidates: latency p50 "
            f"{percentile(single, 0.5):.1f} s, max {max(single):.1f} s."
        )
    exploits = report.get("exploits") or []
    if exploits:
        rejected = [r for r in exploits if (r["failure_kind"] or "none") in r["accepted"]]
        lines += [
            "",
            f"Exploit catalog through the server: {len(rejected)} of {len(exploits)} judged as required.",
            "",
            "| exploit | accepted | verdict |",
            "|---|---|---|",
        ]
        lines += [f"| {r['kind']} | {', '.join(r['accepted'])} | {r['failure_kind'] or r['state']} |" for r in exploits]
    holds = report.get("holds") or {}
    alone = ((holds.get("summary") or {}).get("steps") or {}).get("performance, alone", {}).get("held_s")
    if alone and alone.get("n"):
        busy = alone["mean"] * alone["n"]
        span = report["warmup_s"] + wall + sum(r["latency_s"] for r in singles)
        lines.append(
            f"The GPU was held alone {busy:.0f} s of the {span:.0f} s the warm-up, the mix and the singles took "
            f"({busy / span:.0%}): the rest it waited for shared steps, or had no timed step to run."
        )
    if holds.get("text"):
        lines += ["", "## Where the GPU's time went (benchmarks/device_holds.py, every evaluation above)", ""]
        lines += [holds["text"].rstrip()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
