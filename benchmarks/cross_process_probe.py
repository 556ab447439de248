"""Probe: can a trusted judge process time kernels that run in other (worker) processes?

    python3 benchmarks/cross_process_probe.py [--pairs 300] [--out FILE.json]
    python3 benchmarks/cross_process_probe.py --handshake [--hold 0.4] [--pairs 400] [--out FILE.json]

The measurements that chose the evaluator's design (docs/benchmarks/2026-12-01_separate_judge_h200.md:
the first form is its `cross_process_span.json`, the second its `cross_process_handshake.json`).
It is a prototype of its own (a memfd mailbox, torch's IPC for the buffers), not the evaluator's
code: `aka.harness.turns` is what grew out of the second form.

A judge allocates every input and output in its own GPU memory and shares it with two worker
processes (CUDA IPC). Each worker runs a Triton GELU on the judge's inputs and copies its output
into the judge's output buffer. Per call the judge records, on its own stream and clock,
E0 (before it writes the inputs) and E2 (once the worker's output is complete), so the span
S = E2 - E0 covers everything the worker could have done with those inputs; the worker reports
its own event time t around the call. This measures, for A/A (both workers the same kernel):
the spread of u = S - t (the part of the span no call explains), the A/A precision of speedups
computed from t (the worker's claim) and from S - median(u) (the judge's own clock), and what a
pair costs. Two ways to end the span: the host (the judge records E2 after the worker's reply)
and the GPU (the judge's stream waits on a flag that the worker's stream writes). It also checks
whether work of two contexts ever overlaps on the GPU, and whether CUDA IPC works into a nested
PID namespace.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import pickle
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from aka.harness.paired import order_balanced_speedup  # noqa: E402

_libcuda = None


def libcuda() -> ctypes.CDLL:
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    return _libcuda


@functools.cache
def _stream_function(name: str):
    cuda = libcuda()
    for symbol in (f"{name}_v2", name):
        function = getattr(cuda, symbol, None)
        if function is not None:
            function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            return function
    raise RuntimeError(f"libcuda has no {name}")


def stream_op(name: str, stream: int, pointer: int, value: int) -> None:
    code = _stream_function(name)(stream, pointer, value, 0)
    if code != 0:
        raise RuntimeError(f"{name} returned {code}")


class Mailbox:
    """Two one-slot mailboxes (to the worker, back to the judge) in a memfd both map; each side
    spins on the other's sequence number (a blocking pipe wake-up costs ~0.8 ms in this VM)."""

    SIZE = 1 << 16

    def __init__(self, fd: int) -> None:
        import mmap

        self.fd = fd
        self.map = mmap.mmap(fd, 2 * self.SIZE)
        self.seq = [ctypes.c_uint64.from_buffer(self.map, 0), ctypes.c_uint64.from_buffer(self.map, self.SIZE)]
        self.seen = [0, 0]

    @classmethod
    def create(cls) -> Mailbox:
        fd = os.memfd_create("aka-mailbox", 0)
        os.ftruncate(fd, 2 * cls.SIZE)
        return cls(fd)

    def put(self, box: int, payload: bytes) -> None:
        base = box * self.SIZE
        self.map[base + 8 : base + 12] = struct.pack("<I", len(payload))
        self.map[base + 12 : base + 12 + len(payload)] = payload
        self.seq[box].value += 1

    def take(self, box: int) -> bytes:
        seq = self.seq[box]
        while seq.value == self.seen[box]:
            pass
        self.seen[box] = seq.value
        base = box * self.SIZE
        (size,) = struct.unpack("<I", self.map[base + 8 : base + 12])
        return bytes(self.map[base + 12 : base + 12 + size])


def gelu_module():
    import triton
    import triton.language as tl

    @triton.jit
    def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
        tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)

    def gelu(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        gelu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024, num_warps=4)
        return out

    return gelu


def worker_main() -> None:
    """Maps the judge's buffers, then serves calls: events around the call, copy out, flag."""
    box = Mailbox(int(sys.argv[sys.argv.index("--worker") + 1]))
    torch.cuda.init()
    gelu = gelu_module()
    buffers: dict[str, torch.Tensor] = {}
    stream = torch.cuda.current_stream()
    while True:
        message = pickle.loads(box.take(0))
        op = message["op"]
        if op == "quit":
            return
        if op == "ping":
            box.put(1, json.dumps({"received": time.perf_counter()}).encode())
            continue
        if op == "map":
            buffers = {name: fn(*args) for name, (fn, args) in message["buffers"].items()}
            box.put(1, json.dumps({"ok": True, "pid": os.getpid()}).encode())
        elif op == "call":
            x, slot, flag = buffers[message.get("x", "x")], buffers["out"], buffers["flag"]
            received = time.perf_counter()
            marks = [received]
            if message.get("go_flag"):  # the judge's stream releases this call once its hold is over
                stream_op("cuStreamWaitValue32", stream.cuda_stream, flag.data_ptr() + 4, message["serial"])
            marks.append(time.perf_counter())
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if message.get("cheat"):  # the work before the start event: only the span sees it
                result = gelu(x)
                start.record()
                end.record()
            else:
                start.record()
                marks.append(time.perf_counter())
                result = gelu(x)
                marks.append(time.perf_counter())
                end.record()
            slot.copy_(result)
            marks.append(time.perf_counter())
            if message["gpu_flag"]:
                stream_op("cuStreamWriteValue32", stream.cuda_stream, flag.data_ptr(), message["serial"])
            enqueued = time.perf_counter()
            torch.cuda.synchronize()
            box.put(
                1,
                json.dumps(
                    {
                        "t_ms": start.elapsed_time(end),
                        "received": received,
                        "enqueued": enqueued,
                        "marks_us": [round(1e6 * (m - received), 1) for m in [*marks, enqueued]],
                    }
                ).encode(),
            )
        elif op == "busy":  # a kernel of ~`ms` right now: does it overlap the judge's work?
            started = time.perf_counter()
            torch.cuda._sleep(int(message["cycles"]))
            torch.cuda.synchronize()
            box.put(1, json.dumps({"wall_ms": (time.perf_counter() - started) * 1000}).encode())
        elif op == "warm":
            for _ in range(3):
                gelu(buffers["x"])
            torch.cuda.synchronize()
            box.put(1, b"{}")


class Worker:
    def __init__(self, prefix: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.box = Mailbox.create()
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, __file__, "--worker", str(self.box.fd)], pass_fds=(self.box.fd,), env=env
        )

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.go(message)
        return self.reply()

    def go(self, message: dict[str, Any]) -> None:
        self.box.put(0, pickle.dumps(message))

    def reply(self) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(self.box.take(1))
        return reply

    def close(self) -> None:
        self.go({"op": "quit"})
        self.proc.wait(timeout=30)


def shared(tensor: torch.Tensor):
    from torch.multiprocessing.reductions import reduce_tensor

    return reduce_tensor(tensor)


@functools.cache
def cycles_per_ms() -> int:
    return int(torch.cuda.get_device_properties(0).clock_rate)


def measure_size(
    workers: list[Worker], n: int, pairs: int, gpu_flag: bool, hold_ms: float, cheat: bool = False
) -> dict[str, Any]:
    device = torch.device("cuda")
    flush = torch.empty(512 * 1024 * 1024 // 4, dtype=torch.int32, device=device)
    private = torch.randn(n, device=device)
    sides = []
    for worker in workers:
        buffers = {
            "x": torch.empty(n, device=device),
            "out": torch.empty(n, device=device),
            "flag": torch.zeros(64, dtype=torch.int32, device=device),
        }
        worker.ask({"op": "map", "buffers": {k: shared(v) for k, v in buffers.items()}})
        buffers["x"].copy_(private)
        torch.cuda.synchronize()
        worker.ask({"op": "warm"})
        sides.append(buffers)
    snapshot = torch.empty(n, device=device)
    stream = torch.cuda.current_stream()
    rows: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    serial = 0
    started = time.perf_counter()
    for pair in range(pairs):
        order = (0, 1) if pair % 2 == 0 else (1, 0)
        torch.randn(n, device=device, out=private)
        for which in order:
            serial += 1
            buffers, worker = sides[which], workers[which]
            e0, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            buffers["x"].copy_(private)
            flush.zero_()
            hold_launched = time.perf_counter()
            torch.cuda._sleep(int(hold_ms * cycles_per_ms()))
            if gpu_flag:
                stream_op("cuStreamWaitValue32", stream.cuda_stream, buffers["flag"].data_ptr(), serial)
                e2.record()
                snapshot.copy_(buffers["out"])
            before_go = time.perf_counter()
            worker.go({"op": "call", "serial": serial, "gpu_flag": gpu_flag, "cheat": cheat and which == 1})
            answer = worker.reply()
            if not gpu_flag:
                e2.record()
                snapshot.copy_(buffers["out"])
            torch.cuda.synchronize()
            span = e0.elapsed_time(e2)
            ok = bool(torch.equal(snapshot, torch.nn.functional.gelu(private))) or bool(
                torch.allclose(snapshot, torch.nn.functional.gelu(private), atol=1e-5, rtol=1e-5)
            )
            late = answer["enqueued"] - hold_launched > hold_ms / 1000
            rows[which].append(
                {
                    "S": span,
                    "t": answer["t_ms"],
                    "late": late,
                    "ok": ok,
                    "latency_us": (answer["received"] - hold_launched) * 1e6,
                    "judge_launch_us": (before_go - hold_launched) * 1e6,
                }
            )
    seconds = time.perf_counter() - started
    row = summarize(n, gpu_flag, hold_ms, rows, seconds, pairs)
    row["cheat"] = cheat
    return row


def mad(values: list[float]) -> float:
    centre = statistics.median(values)
    return statistics.median(abs(v - centre) for v in values)


def measure_handshake(workers: list[Worker], n: int, pairs: int, hold_ms: float, swap: bool) -> dict[str, Any]:
    """GPU-side handshake both ways: the judge's stream writes the go flag after its hold, the
    worker's stream waits for it, then writes the done flag the judge's stream waits for."""
    device = torch.device("cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.int32, device=device)
    private = torch.randn(n, device=device)
    slots = [torch.empty(n, device=device), torch.empty(n, device=device)]
    sides = []
    for worker in workers:
        buffers = {
            "x": slots[0],
            "y": slots[1],
            "out": torch.empty(n, device=device),
            "flag": torch.zeros(64, dtype=torch.int32, device=device),
        }
        worker.ask({"op": "map", "buffers": {k: shared(v) for k, v in buffers.items()}})
        slots[0].copy_(private)
        torch.cuda.synchronize()
        worker.ask({"op": "warm"})
        sides.append(buffers)
    snapshot = torch.empty(n, device=device)
    stream = torch.cuda.current_stream()
    rows: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    serial = 0
    started = time.perf_counter()
    for pair in range(pairs):
        order = (0, 1) if pair % 2 == 0 else (1, 0)
        torch.randn(n, device=device, out=private)
        for which in order:
            serial += 1
            buffers, worker = sides[which], workers[which]
            slot = (which + pair) % 2 if swap else which
            e0, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            slots[slot].copy_(private)
            flush.zero_()
            torch.cuda._sleep(int(hold_ms * cycles_per_ms()))
            stream_op("cuStreamWriteValue32", stream.cuda_stream, buffers["flag"].data_ptr() + 4, serial)
            stream_op("cuStreamWaitValue32", stream.cuda_stream, buffers["flag"].data_ptr(), serial)
            e2.record()
            snapshot.copy_(buffers["out"])
            sent = time.perf_counter()
            worker.go({"op": "call", "serial": serial, "gpu_flag": True, "go_flag": True, "x": "xy"[slot]})
            answer = worker.reply()
            torch.cuda.synchronize()
            ok = bool(torch.allclose(snapshot, torch.nn.functional.gelu(private), atol=1e-5, rtol=1e-5))
            rows[which].append(
                {
                    "S": e0.elapsed_time(e2),
                    "t": answer["t_ms"],
                    "ok": ok,
                    "marks": answer["marks_us"],
                    "sent_to_received_us": (answer["received"] - sent) * 1e6,
                    "late": (answer["enqueued"] - sent) * 1000 > hold_ms,
                    "latency_us": (answer["enqueued"] - sent) * 1e6,
                    "judge_launch_us": 0.0,
                }
            )
    row = summarize(n, True, hold_ms, rows, time.perf_counter() - started, pairs)
    row.update({"swap": swap, "cheat": False})
    marks = [r["marks"] for side in rows.values() for r in side]
    row["worker_marks_us_median"] = [statistics.median(m[i] for m in marks) for i in range(len(marks[0]))]
    row["sent_to_received_us_median"] = statistics.median(
        r["sent_to_received_us"] for side in rows.values() for r in side
    )
    return row


def summarize(
    n: int, gpu_flag: bool, hold_ms: float, rows: dict[int, list[dict[str, Any]]], seconds: float, pairs: int
) -> dict[str, Any]:
    base, cand = rows[0], rows[1]
    u_b = [r["S"] - r["t"] for r in base]
    u_c = [r["S"] - r["t"] for r in cand]
    overhead = statistics.median(u_b)
    ratios_t: dict[bool, list[float]] = {True: [], False: []}
    ratios_s: dict[bool, list[float]] = {True: [], False: []}
    for pair, (b, c) in enumerate(zip(base, cand, strict=True)):
        first = pair % 2 == 0
        ratios_t[first].append(b["t"] / c["t"])
        ratios_s[first].append(max(b["S"] - overhead, 1e-6) / max(c["S"] - overhead, 1e-6))
    speed_t = order_balanced_speedup(ratios_t[True], ratios_t[False])
    speed_s = order_balanced_speedup(ratios_s[True], ratios_s[False])
    return {
        "n": n,
        "gpu_flag": gpu_flag,
        "hold_ms": hold_ms,
        "pairs": pairs,
        "ms_per_pair": 1000 * seconds / pairs,
        "t_median_ms": [statistics.median(r["t"] for r in side) for side in (base, cand)],
        "S_median_ms": [statistics.median(r["S"] for r in side) for side in (base, cand)],
        "u_median_us": [1000 * statistics.median(u) for u in (u_b, u_c)],
        "u_mad_us": [1000 * mad(u) for u in (u_b, u_c)],
        "t_mad_us": [1000 * mad([r["t"] for r in side]) for side in (base, cand)],
        "u_excess_us": 1000 * (statistics.median(u_c) - statistics.median(u_b)),
        "speedup_from_t": speed_t,
        "speedup_from_S": speed_s,
        "late": [sum(r["late"] for r in side) for side in (base, cand)],
        "wrong": [sum(not r["ok"] for r in side) for side in (base, cand)],
        "go_latency_us_median": [statistics.median(r["latency_us"] for r in side) for side in (base, cand)],
        "judge_launch_us_median": [statistics.median(r["judge_launch_us"] for r in side) for side in (base, cand)],
    }


def ping_probe(worker: Worker, gpu_work: bool, count: int = 2000) -> dict[str, Any]:
    """Mailbox latency: judge put -> worker sees it (one way) and the round trip, with or without
    GPU work launched by the judge just before each put."""
    one_way, round_trip, launch = [], [], []
    for _ in range(count):
        if gpu_work:
            before = time.perf_counter()
            torch.cuda._sleep(100_000)
            launch.append(time.perf_counter() - before)
        sent = time.perf_counter()
        answer = worker.ask({"op": "ping"})
        back = time.perf_counter()
        one_way.append(answer["received"] - sent)
        round_trip.append(back - sent)
        if gpu_work:
            torch.cuda.synchronize()

    def q(values: list[float]) -> list[float]:
        ordered = sorted(values)
        return [round(1e6 * ordered[int(f * (len(ordered) - 1))], 2) for f in (0.1, 0.5, 0.9, 0.99)]

    return {
        "gpu_work": gpu_work,
        "one_way_us_p10_p50_p90_p99": q(one_way),
        "round_trip_us_p10_p50_p90_p99": q(round_trip),
        "launch_us": q(launch) if launch else None,
    }


def overlap_probe(worker: Worker) -> dict[str, Any]:
    """Judge sleeps 5 ms on the GPU; the worker launches a 1 ms sleep meanwhile. If contexts
    share the GPU in time slices, the worker's call waits (wall ~ up to 6 ms), else ~1 ms."""
    cycles = cycles_per_ms()
    alone = worker.ask({"op": "busy", "cycles": cycles})
    torch.cuda._sleep(5 * cycles)
    during = worker.ask({"op": "busy", "cycles": cycles})
    torch.cuda.synchronize()
    return {"worker_1ms_alone_wall_ms": alone["wall_ms"], "worker_1ms_during_judge_5ms_wall_ms": during["wall_ms"]}


def nested_namespace_probe() -> dict[str, Any]:
    """CUDA IPC into a worker in a nested PID namespace (as the evaluator's sandbox would make)."""
    prefix = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    try:
        worker = Worker(prefix)
        x = torch.randn(1 << 20, device="cuda")
        buffers = {"x": x, "out": torch.empty_like(x), "flag": torch.zeros(64, dtype=torch.int32, device="cuda")}
        mapped = worker.ask({"op": "map", "buffers": {k: shared(v) for k, v in buffers.items()}})
        worker.ask({"op": "warm"})
        worker.go({"op": "call", "serial": 1, "gpu_flag": False})
        answer = worker.reply()
        torch.cuda.synchronize()
        good = bool(torch.allclose(buffers["out"], torch.nn.functional.gelu(x), atol=1e-5, rtol=1e-5))
        worker.close()
        return {
            "nested_pid_ns_ipc": "works" if good else "wrong output",
            "worker_pid_inside": mapped["pid"],
            "t_ms": answer["t_ms"],
        }
    except Exception as exc:  # noqa: BLE001 - a probe reports whatever happened
        return {"nested_pid_ns_ipc": f"failed: {type(exc).__name__}: {exc}"}


def main() -> int:
    if "--worker" in sys.argv:
        worker_main()
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--handshake", action="store_true", help="A/A with the GPU-side handshake, fresh workers")
    parser.add_argument("--hold", type=float, default=0.4)
    args = parser.parse_args()
    torch.cuda.init()
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "mps_pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
    }
    if "--handshake" in sys.argv:
        rows = []
        for n in (1_048_576, 16_777_216):
            for swap in (False, True):
                for repeat in range(3):
                    fresh = [Worker([]), Worker([])]
                    row = measure_handshake(fresh, n, args.pairs, args.hold, swap)
                    row["repeat"] = repeat
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    for worker in fresh:
                        worker.close()
        if args.out:
            args.out.write_text(json.dumps(rows, indent=2))
        return 0
    workers = [Worker([]), Worker([])]
    report["ping"] = [ping_probe(workers[0], False), ping_probe(workers[0], True)]
    print(json.dumps(report["ping"]), flush=True)
    report["overlap"] = overlap_probe(workers[0])
    print(json.dumps(report["overlap"]), flush=True)
    report["nested"] = nested_namespace_probe()
    print(json.dumps(report["nested"]), flush=True)
    results = []
    plan = [
        (n, flag, hold, False)
        for n in (65_536, 1_048_576, 16_777_216)
        for flag in (False, True)
        for hold in (0.05, 0.1, 0.2)
    ]
    plan += [(n, True, 0.1, True) for n in (1_048_576, 16_777_216)]
    for n, gpu_flag, hold_ms, cheat in plan:
        try:
            row = measure_size(workers, n, args.pairs, gpu_flag, hold_ms, cheat)
        except Exception as exc:  # noqa: BLE001 - a probe reports whatever happened
            row = {"n": n, "gpu_flag": gpu_flag, "error": f"{type(exc).__name__}: {exc}"}
        results.append(row)
        print(json.dumps(row), flush=True)
    report["rows"] = results
    for worker in workers:
        worker.close()
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
