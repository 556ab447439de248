"""The GPU benchmarks' report side (`--merge`), on synthetic rows: it must run on CPU-only CI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _merge(script: str, rows: list[dict[str, object]], tmp_path: Path) -> str:
    shard = tmp_path / "rows.json"
    shard.write_text(json.dumps(rows))
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / script),
            "--merge",
            str(shard),
            "--out",
            str(tmp_path / "report.md"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (tmp_path / "report.md").read_text() in done.stdout
    return done.stdout


def _aa_row(task: str, ours: list[float], theirs: list[float], frozen: bool) -> dict[str, object]:
    row: dict[str, object] = {
        "task": task,
        "statuses": ["PASS"] * len(ours),
        "ours": ours,
        "ci_half": [0.001] * len(ours),
        "theirs": theirs,
        "seconds": [12.0, 13.0, 14.0],
        "message": None,
        "isolation": ["pid-namespace"],
    }
    if frozen:
        row["baseline_seconds"] = 9.0
    return row


def test_aa_noise_reports_the_targets_and_keeps_old_and_new_evaluation_times_apart(tmp_path: Path) -> None:
    rows = [
        _aa_row("a", [1.0002, 0.9999, 1.0001], [1.003, 0.998, 1.001], frozen=True),  # band 0.0002, 0.003: 15x
        _aa_row("b", [0.988, 0.999, 1.0], [1.002, 0.999, 1.0], frozen=True),  # band 0.012: outside 1%
        _aa_row("c", [1.0004, 1.0, 1.0], [1.0002, 1.0, 1.0], frozen=False),  # do_bench narrower
        {**_aa_row("d", [], [], frozen=True), "statuses": ["baseline infra_error"], "message": "broken", "seconds": []},
    ]
    report = _merge("aa_noise.py", rows, tmp_path)
    assert "Tasks within +-1%: 2/3; within +-2%: 3/3 (of 4 tasks" in report
    assert "| d | baseline infra_error: broken |" in report
    assert "same inputs, on its 3 tasks" in report and "narrower on 1/3, at least 5x narrower on 1" in report
    assert "a process per side (the original's way)" not in report.split("|---|")[-1]  # old rows: one process
    assert "as in a run): median 13.0 s over 2 tasks" in report  # d has no evaluations
    assert "compiled the baseline too): median 13.0 s over 1 tasks" in report


def test_aa_noise_compares_with_both_ways_of_running_do_bench(tmp_path: Path) -> None:
    row = {
        **_aa_row("a", [1.001, 0.999, 1.0], [1.02, 0.99, 1.0], frozen=True),  # a process per side: band 0.02
        "theirs_same": [1.0005, 1.0, 1.0],  # one process: band 0.0005
        "do_bench": "separate processes",
    }
    report = _merge("aa_noise.py", [row], tmp_path)
    assert "| a | 1.0010, 0.9990, 1.0000 | +-0.0010 | 0.0010 | 1.0200, 0.9900, 1.0000 | 0.0200 | 20.0x " in report
    assert "the original's way), on its 1 tasks: median band evaluator 0.0010, do_bench 0.0200" in report
    assert "same inputs, on its 1 tasks: median band evaluator 0.0010, do_bench 0.0005" in report


def test_aa_noise_cut_by_sigterm_keeps_its_stacks_and_the_unfinished_evaluations_logs(tmp_path: Path) -> None:
    """A device call cut at its limit ends the script with SIGTERM: the logs of evaluations still
    in flight (their temporary folder goes with the process) and every thread's stack stay."""
    script = f"""
import os, signal, sys, time
from pathlib import Path
sys.path.insert(0, {str(REPO / "benchmarks")!r})
import aa_noise
tmp, keep = Path(sys.argv[1]), Path(sys.argv[2])
for name in ("gelu-0", "gelu-1"):
    (tmp / name / "worker").mkdir(parents=True)
    (tmp / name / "evaluation.log").write_text(name + " steps")
    (tmp / name / "worker" / "performance.log").write_text(name + " stuck here")
keep.mkdir()
(keep / "gelu-0.log").write_text("finished")
aa_noise.keep_logs_when_cut(tmp, keep)
def waiting_for_the_device():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
waiting_for_the_device()
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "tmp"), str(tmp_path / "keep")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        check=False,
    )
    assert done.returncode == 128 + 15 and "waiting_for_the_device" in done.stderr, done.stderr
    unfinished = tmp_path / "keep" / "unfinished"
    assert sorted(str(p.relative_to(unfinished)) for p in unfinished.rglob("*.log")) == [
        "gelu-1/evaluation.log",
        "gelu-1/worker/performance.log",
    ]
    assert (unfinished / "gelu-1" / "worker" / "performance.log").read_text() == "gelu-1 stuck here"


def test_aa_noise_merge_keeps_the_latest_row_of_a_task_and_lists_the_replaced(tmp_path: Path) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(
        json.dumps(
            [
                _aa_row("a", [0.988, 0.999, 1.0], [1.0, 1.0, 1.0], frozen=True),
                _aa_row("b", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], frozen=True),
            ]
        )
    )
    second.write_text(json.dumps([_aa_row("a", [0.9999, 1.0001, 1.0], [1.002, 0.999, 1.0], frozen=True)]))
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "aa_noise.py"), "--merge", str(first), str(second)],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| a |") or line.startswith("| b |")]
    assert [row[:5] for row in rows] == ["| a |", "| b |"] and "0.9999, 1.0001, 1.0000" in rows[0]
    assert "Tasks within +-1%: 2/2" in done.stdout
    assert "a: 0.9880, 0.9990, 1.0000 (replaced by second.json)" in done.stdout


def test_aa_noise_report_with_no_evaluated_task(tmp_path: Path) -> None:
    rows = [
        {**_aa_row("d", [], [], frozen=True), "statuses": ["baseline infra_error"], "message": "broken", "seconds": []}
    ]
    report = _merge("aa_noise.py", rows, tmp_path)
    assert "| d | baseline infra_error: broken |" in report and "Evaluation time per task" not in report
    assert "Baseline measurement (once per task, before the agent): median 9.0 s." in report


def test_ab_calibration_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "calibration.md"
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "ab_calibration.py"),
            "--experiments",
            "20",
            "--resamples",
            "100",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    text = out.read_text()
    assert text in done.stdout and text.count("| A/") == 7
    assert "t-interval coverage in 94-96%" in text and "Repeats planning" in text


def test_the_asymmetry_probe_runs_each_variant_in_its_own_judge(tmp_path: Path) -> None:
    """On the CPU its numbers mean nothing; it must still run every variant through the real step."""
    import os

    out = tmp_path / "probe.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "asymmetry_probe.py"),
            "--tasks",
            "triton2triton/basic/gelu",
            "--repeats",
            "1",
            "--json",
            str(out),
        ],
        check=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    rows = json.loads(out.read_text())
    assert [r["variant"] for r in rows] == ["plain", "no_guard", "candidate_guard_only", "candidate_first"]
    assert all(r["status"] == "ok" and len(r["cases"]) == 3 for r in rows), rows


def _throughput_row(kind: str, task: str, speedup: float | None, failure: str, latency: float) -> dict[str, object]:
    return {
        "kind": kind,
        "task": task,
        "state": "done",
        "latency_s": latency,
        "failure_kind": failure,
        "speedup": speedup,
        "ci": [None, None],
        "seconds": latency / 2,
    }


def _reward_throughput():
    """benchmarks/reward_throughput.py as a module (it is a script, not a package's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reward_throughput", REPO / "benchmarks" / "reward_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reward_throughput_reads_a_over_a_only_where_the_baseline_is_the_source() -> None:
    """An unchanged torch2* source is timed against PyTorch (9x on the H200): not an A/A reading."""
    module = _reward_throughput()
    report = {
        "date": "2026-12-03T00:00:00+00:00",
        "device": "NVIDIA H200",
        "max_concurrent": 4,
        "eval_timeout": 60.0,
        "argv": ["--tasks", "triton2triton/basic/gelu", "torch2triton/llm/rmsnorm", "--singles", "1"],
        "settings": {"AKA_WARM_STEPS": "1", "AKA_TIMING_BUDGET_S": "1.2"},
        "tasks": ["triton2triton/basic/gelu", "torch2triton/llm/rmsnorm"],
        "aa_tasks": ["triton2triton/basic/gelu"],
        "warmup_s": 40.0,
        "mix": [
            _throughput_row("unchanged", "triton2triton/basic/gelu", 1.0046, "none", 30.0),
            _throughput_row("unchanged", "torch2triton/llm/rmsnorm", 9.3027, "none", 20.0),
            _throughput_row("hanging", "triton2triton/basic/gelu", None, "timeout", 90.0),
            _throughput_row("wrong", "torch2triton/llm/rmsnorm", None, "incorrect", 10.0),
        ],
        "mix_wall_s": 90.0,
        "singles": [_throughput_row("single", "triton2triton/basic/gelu", 1.0, "none", 9.8)],
        "holds": {"summary": {}, "text": "Evaluation logs read: 5\n\n| step | held the device |\n"},
    }
    text = module.render(report, 1)
    assert "## Where the GPU's time went" in text and "Evaluation logs read: 5" in text
    assert "--tasks triton2triton/basic/gelu torch2triton/llm/rmsnorm --singles 1" in text
    assert "Command: `AKA_TIMING_BUDGET_S=1.2 AKA_WARM_STEPS=1 PYTHONPATH=src python3" in text
    assert "4 evaluations in 90 s: 160 per GPU-hour" in text
    assert "A/A under load (1 unchanged candidates of tasks timed against their own source): band 0.0046" in text
    assert "9.3027" not in text
    assert "the others were done after 30 s, 360 per GPU-hour" in text
    assert "latency p50 9.8 s" in text
    # latencies 10, 20, 30, 90: three more finished in the 80 s after the first
    assert "Steady state (ramp-up left out): 3 finished in the 80 s after the first (10 s), 135 per GPU-hour" in text


def test_reward_throughput_polls_never_past_the_deadline() -> None:
    """A fixed 60 s long poll overshot --deadline by up to a minute: each poll asks for the time left."""
    import time

    module = _reward_throughput()
    asked: list[float] = []

    def call(method: str, path: str, body: object = None, timeout: float = 900) -> tuple[int, object]:
        asked.append(float(path.rsplit("wait=", 1)[1]))
        time.sleep(asked[-1])  # the server holds a long poll for as long as asked when nothing finishes
        return 202, {"state": "running"}

    client = module.Client(0)
    client.call = call
    started = time.monotonic()
    assert client.wait("slow", 0.5) == {"state": "running"}
    assert time.monotonic() - started < 1.5 and asked and max(asked) <= 0.5


def test_reward_throughput_stops_waiting_at_its_deadline_and_says_so() -> None:
    """A device call's limit cut session 41's run inside its mix and only the warm-up came back:
    with --deadline the benchmark stops waiting, counts what finished and renders that."""
    import argparse
    import time

    module = _reward_throughput()
    limits: dict[str, float] = {}

    class Client:
        def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
            return 202, {"jobs": [{"id": "quick"}, {"id": "slow"}]}

        def wait(self, job_id: str, limit: float) -> dict[str, object]:
            limits[job_id] = limit
            return {"state": "done", "result": {"failure_kind": "none"}} if job_id == "quick" else {"state": "running"}

    entries: list[tuple[str, str, dict[str, str]]] = [("unchanged", "t", {}), ("faster", "t", {})]
    args = argparse.Namespace(request_timeout=3600.0)
    rows = module._run(Client(), entries, args, time.monotonic() + 5)
    assert [row["state"] for row in rows] == ["done", "running"] and max(limits.values()) <= 5
    assert [row["state"] in module.FINISHED for row in rows] == [True, False]
    report = {
        "date": "2026-12-04T00:00:00+00:00",
        "device": "NVIDIA H200",
        "max_concurrent": 4,
        "eval_timeout": 60.0,
        "tasks": ["t"],
        "warmup_s": 40.0,
        "mix": [_throughput_row("unchanged", "t", 1.001, "none", 30.0)],
        "mix_wall_s": 30.0,
        "mix_cut": {"finished": 1, "submitted": 54, "deadline_s": 500.0},
    }
    text = module.render(report, 1)
    assert "1 evaluations in 30 s: 120 per GPU-hour" in text
    assert "Cut at the deadline (500 s from the start): 1 of 54 finished" in text


def test_reward_throughput_mix_leaves_hanging_candidates_out_when_asked() -> None:
    """Settings are compared without hangs, whose timeout would be most of the mix's wall time."""

    from aka.config.tasks import select_tasks

    module = _reward_throughput()
    tasks = select_tasks(REPO / "tasks", ["triton2triton/basic/gelu", "triton2triton/llm/rmsnorm_residual"])
    kinds = [kind for kind, _, _ in module.mix(tasks, 7)]
    assert kinds.count("hanging") == 1 and kinds.count("unchanged") == 4
    without = [kind for kind, _, _ in module.mix(tasks, 7, hanging=False)]
    assert "hanging" not in without and sorted(without) == sorted(k for k in kinds if k != "hanging")
    # every candidate carries this run's nonce: none is a cache hit on a cache a sweep's other runs left
    assert all(module.RUN_NONCE in "".join(files.values()) for _, _, files in module.mix(tasks, 7))
    # copies of the mix are a trainer's larger batch: each candidate distinct, so none is a cache hit
    tripled = module.mix(tasks, 7, copies=3)
    assert len(tripled) == 3 * len(kinds)
    assert len({(task, tuple(sorted(files.items()))) for _, task, files in tripled}) == len(tripled)


def _step_log(step: str, forked: int, turn: int, end: int) -> str:
    return (
        f"$ python3 harness.py {step}\n"
        f"INFO aka.harness.runner +{forked}ms: workers forked\n"
        f"INFO aka.harness.runner +{turn}ms: the step's turn came\n"
        f"INFO aka.harness.runner +{end}ms: triton2triton/basic/gelu {step} (candidate, cuda): ok\n"
    )


def _device_holds():
    """benchmarks/device_holds.py as a module (it is a script, not a package's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("device_holds", REPO / "benchmarks" / "device_holds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_holds"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_device_holds_merges_steps_that_held_the_device_together(tmp_path: Path) -> None:
    """Steps forked from the warm parent log on one clock: compile and correctness side by side
    count once (their union); exec'd steps log each on their own clock and are added."""
    side_by_side = tmp_path / "run" / "a"
    exec_d = tmp_path / "run" / "b"
    for folder in (side_by_side, exec_d):
        folder.mkdir(parents=True)
    (side_by_side / "evaluation.log").write_text(
        _step_log("compile", 100_000, 101_000, 104_000)  # 3 s
        + _step_log("correctness", 100_010, 101_000, 103_500)  # inside compile's hold
        + _step_log("performance", 100_020, 106_000, 111_000)  # 5 s alone
    )
    (exec_d / "evaluation.log").write_text(
        _step_log("compile", 500, 1_000, 4_000)
        + _step_log("correctness", 400, 8_000, 10_000)
        # its own process: a clock of its own (worker forked at +9000 ms, 4 s held)
        + _step_log("performance", 9_000, 9_000, 13_000)
    )
    out = tmp_path / "holds.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "device_holds.py"), str(tmp_path / "run"), "--json", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(out.read_text())
    assert summary["trials"] == 2
    assert summary["steps"]["compile"]["held_s"]["median"] == 3.0
    assert summary["steps"]["performance"]["waited_s"]["n"] == 2
    module = _device_holds()
    # side by side: 3 s (compile, correctness inside it) + 5 s; exec'd: 3 + 2 + 4 s
    assert module.gpu_seconds(module.read_log(side_by_side / "evaluation.log")) == 8.0
    assert module.gpu_seconds(module.read_log(exec_d / "evaluation.log")) == 9.0
    assert summary["gpu_s_per_trial"]["mean"] == 8.5
    assert "Evaluation logs read: 2" in done.stdout and "GPU time a trial" in done.stdout
    # a shared turn that stood stopped 1.5 s for timed steps (side by side: one pause of both)
    paused = tmp_path / "paused.log"
    paused.write_text(
        _step_log("compile", 100_000, 101_000, 104_000)
        + _step_log("correctness", 100_010, 101_000, 103_500)
        + "# aka: compile+correctness stood stopped 1.500 s in 1 pause(s): timed steps had the device\n"
        + _step_log("performance", 100_020, 106_000, 111_000)
    )
    trial = module.read_log(paused)
    assert trial.steps["compile"].held == 1.5 and trial.steps["correctness"].held == 1.0
    assert module.gpu_seconds(trial) == 6.5


def test_device_holds_splits_the_timed_turn_into_its_parts(tmp_path: Path) -> None:
    """The performance step's turn, from the judge's own lines (aka.harness.perf's format), in
    parts; logs from before the finer lines (no set-up figures) still give the coarse parts."""
    module = _device_holds()
    perf = [
        "$ python3 harness.py performance",
        "INFO aka.harness.runner +1000ms: workers forked",
        "INFO aka.harness.runner +2000ms: the step's turn came",
        "INFO aka.harness.perf +2020ms: baseline loaded 3 time(s)",
        "INFO aka.harness.perf +3220ms: baseline calibrated on 2 case(s): set-up 0.700 s, calls 0.480 s",
        "INFO aka.harness.perf +3300ms: candidate loaded 3 time(s)",
        "INFO aka.harness.perf +3900ms: small: set up in 0.600 s",
        "INFO aka.harness.paired +4200ms: unexplained us: baseline alone 346.1 (sd 1.3), in pairs 348.7",
        "INFO aka.harness.paired +4200ms: 66 pairs in 0.290 s: "
        "prepare 0.010, baseline 0.120, candidate 0.150, release 0.005",
        "INFO aka.harness.perf +4200ms: small: pair parts: reference=0.008, ablation=0.002, baseline call=0.100, "
        "baseline pause=0.020, candidate call=0.090, candidate pause=0.020, check=0.040",
        "INFO aka.harness.perf +4200ms: small: 1.0012x (66 pairs)",
        "INFO aka.harness.perf +4250ms: large: set up in 0.050 s",
        "INFO aka.harness.perf +4550ms: large: [incorrect] wrong values (None pairs)",
        "INFO aka.harness.runner +4700ms: triton2triton/basic/gelu performance (candidate, cuda): ok",
    ]
    log = tmp_path / "new.log"
    log.write_text("\n".join(perf) + "\n")
    parts = module.turn_parts(module.read_log(log).steps["performance"])
    assert parts == pytest.approx(
        {
            "load baseline": 0.02,
            "calibrate": 1.2,
            "load candidate": 0.08,
            "first case": 0.9,
            "other cases": 0.35,
            "finish": 0.15,
            "calibrate: set-up": 0.7,
            "calibrate: calls": 0.48,
            "first case: set-up": 0.6,
            "other cases: set-up": 0.05,
            "pairs": 0.29,
            "pairs: prepare": 0.01,
            "pairs: baseline calls": 0.12,
            "pairs: candidate calls": 0.15,
            "pairs: release": 0.005,
            "pairs: reference": 0.008,
            "pairs: ablation": 0.002,
            "pairs: baseline call": 0.1,
            "pairs: baseline pause": 0.02,
            "pairs: candidate call": 0.09,
            "pairs: candidate pause": 0.02,
            "pairs: check": 0.04,
        }
    )
    old = tmp_path / "old.log"
    old.write_text(
        "\n".join(
            line.replace(": set-up 0.700 s, calls 0.480 s", "")
            for line in perf
            if "set up in" not in line and "pairs in" not in line and "pair parts" not in line
        )
    )
    coarse = module.turn_parts(module.read_log(old).steps["performance"])
    assert coarse is not None and set(coarse) == set(module.TURN_PARTS) and coarse["first case"] == pytest.approx(0.9)
    # AKA_ONE_TURN=1: the candidate loads before the pairs and the baseline is calibrated after them
    # (read in the old order, "load candidate" came out negative on an H100, session 48)
    one_turn = [line for line in perf if "baseline calibrated" not in line]
    calibrated = "INFO aka.harness.perf +4600ms: baseline calibrated on 2 case(s): set-up 0.010 s, calls 0.040 s"
    one_turn.insert(-1, calibrated)
    reordered = tmp_path / "one_turn.log"
    reordered.write_text("\n".join(one_turn) + "\n")
    parts = module.turn_parts(module.read_log(reordered).steps["performance"])
    assert parts is not None and min(parts.values()) >= 0
    assert (parts["load candidate"], parts["calibrate"], parts["finish"]) == pytest.approx((1.28, 0.05, 0.1))
    summary = module.summarize([module.read_log(log), module.read_log(old)])
    assert summary["timed_turn_s"]["calibrate"]["n"] == 2 and summary["timed_turn_s"]["calibrate: calls"]["n"] == 1
    assert "| first case: set-up | 0.6 / 0.6 / 0.6, 1 |" in module.render(summary)
    # the judge's own format strings, so the parser follows them
    source = (REPO / "src" / "aka" / "harness" / "perf.py").read_text()
    assert '"baseline calibrated on %d case(s): set-up %.3f s, calls %.3f s"' in source
    assert '"%s: set up in %.3f s"' in source and '"%s: %s (%s pairs)"' in source
    assert '"%s: pair parts: %s"' in source and 'f"{name}={seconds:.3f}"' in source
    paired = (REPO / "src" / "aka" / "harness" / "paired.py").read_text()
    assert '"%d pairs in %.3f s: %s"' in paired and 'f"{name} {seconds:.3f}"' in paired
    assert '{"prepare": 0.0, "baseline": 0.0, "candidate": 0.0, "release": 0.0}' in paired


def test_device_holds_reads_the_original_tasks_notes(tmp_path: Path) -> None:
    """The original's commands log no turns; the evaluator's notes give each one's hold and wait.
    A step's commands add up, and so do the steps (they run one after another)."""
    module = _device_holds()
    note = "# aka: original {} command held the device {} s after waiting {} s (gated, started before its turn)\n"
    log = tmp_path / "run" / "trial" / "evaluation.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "$ python3 gate.py scripts/task_runner.py compile\n"
        + note.format("compile", "1.500", "0.250")
        + note.format("correctness", "2.000", "1.000")
        + note.format("correctness", "0.500", "0.500")  # a second command of the step
        + note.format("performance", "6.000", "4.000")
    )
    trial = module.read_log(log)
    assert trial.original == {"compile": [1.5, 0.25], "correctness": [2.5, 1.5], "performance": [6.0, 4.0]}
    assert module.gpu_seconds(trial) == 10.0
    summary = module.summarize([trial])
    assert summary["steps"]["correctness"]["held_s"]["median"] == 2.5
    assert summary["steps"]["performance"]["waited_s"]["median"] == 4.0
    assert summary["gpu_s_per_trial"]["mean"] == 10.0


def test_device_holds_reads_a_phased_turn(tmp_path: Path) -> None:
    """A timed step in phases (the default on a GPU): its waits between phases are not a hold, its time
    alone is its own row and a part of its turn, and the first calls made while sharing are parts."""
    from aka.evaluation.phased_turn import PHASED_NOTE

    module = _device_holds()
    lines = [
        "$ python3 harness.py performance",
        "INFO aka.harness.runner +1000ms: workers forked",
        "INFO aka.harness.runner +2000ms: the step's turn came",
        "INFO aka.harness.perf +2020ms: baseline loaded 3 time(s)",
        "INFO aka.harness.perf +2700ms: baseline's first calls made in 0.680 s",
        "INFO aka.harness.phases +3700ms: the device came alone after 1.000 s",
        "INFO aka.harness.perf +4000ms: baseline calibrated on 1 case(s): set-up 0.050 s, calls 0.250 s",
        "INFO aka.harness.phases +4000ms: the device came shared after 0.000 s",
        "INFO aka.harness.perf +4100ms: candidate loaded 3 time(s)",
        "INFO aka.harness.perf +4700ms: candidate's first calls made in 0.600 s",
        "INFO aka.harness.phases +5700ms: the device came alone after 1.000 s",
        "INFO aka.harness.perf +5750ms: small: set up in 0.050 s",
        "INFO aka.harness.perf +6950ms: small: 1.0012x (66 pairs)",
        "INFO aka.harness.runner +7000ms: triton2triton/basic/gelu performance (candidate, cuda): ok",
        "# aka: " + PHASED_NOTE.format("performance", 1.55, 4, 2.0),
    ]
    log = tmp_path / "run" / "evaluation.log"
    log.parent.mkdir()
    log.write_text("\n".join(lines) + "\n")
    trial = module.read_log(log)
    times = trial.steps["performance"]
    assert times.alone_s == 1.55 and times.held == pytest.approx(3.0)  # 5 s from turn to end, 2 s of it waits
    parts = module.turn_parts(times)
    assert parts is not None
    assert parts["held alone"] == 1.55 and parts["waited between phases"] == 2.0
    assert parts["baseline first calls (shared)"] == 0.68 and parts["candidate first calls (shared)"] == 0.6
    summary = module.summarize([trial])
    assert summary["steps"]["performance, alone"]["held_s"]["median"] == 1.55
    assert "| performance, alone | 1.55 / 1.55 / 1.55, 1 | n/a |" in module.render(summary)
    # the time alone, which trials never share, bounds the hour: 3600 / 1.55
    assert "at most about 2323 evaluations per GPU-hour however much of the rest overlaps" in module.render(summary)
    source = (REPO / "src" / "aka" / "harness" / "perf.py").read_text()
    assert '"%s\'s first calls made in %.3f s"' in source


def test_device_holds_splits_the_gpus_time_by_the_turns_alone_of_every_log(tmp_path: Path) -> None:
    """Two evaluations' turns alone on the wall clock (TIMELINE_NOTE), seconds from the first
    request: a waits 0-1 and holds 1-3; b waits 2-5 (1 s of it while a held the device) and holds
    5-8, then again at once 9.5-10. Nothing happened 8-9.5: no timed step was ready."""
    from aka.evaluation.phased_turn import TIMELINE_NOTE

    module = _device_holds()
    t0 = 1_800_000_000.0
    for name, turns in {"a": [(t0, 1.0, 2.0)], "b": [(t0 + 2.0, 3.0, 3.0), (t0 + 9.5, 0.0, 0.5)]}.items():
        log = tmp_path / name / "evaluation.log"
        log.parent.mkdir()
        timeline = " ".join(f"{a:.3f}+{w:.3f}+{h:.3f}" for a, w, h in turns)
        note = TIMELINE_NOTE.format("performance", timeline)
        log.write_text(f"$ python3 harness.py performance\n# aka: {note}\n")
    trials = [module.read_log(p) for p in sorted(tmp_path.rglob("evaluation.log"))]
    line = module.summarize(trials)["timeline"]
    assert line == {
        "turns": 3,
        "span_s": 10.0,
        "alone_s": 5.5,  # 1-3, 5-8, 9.5-10
        "waited_not_alone_s": 3.0,  # 0-1 and 3-5
        "neither_s": 1.5,  # 8-9.5
        "wait_median_s": 1.0,
    }


def test_import_report_table_merges_reports_in_problem_order(tmp_path: Path) -> None:
    """A level probed over several device calls: one table, a later report's verdict winning."""
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location("import_report_table", REPO / "scripts" / "import_report_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    zeros = {"name": "zeros kernel rejected", "status": "FAIL", "message": "an all-zeros output matches"}
    first = {"tasks": {"23_softmax": {"status": "WARN", "seconds": 1, "checks": []}, "2_matmul": {"status": "PASS"}}}
    later = {"tasks": {"23_softmax": {"status": "FAIL", "seconds": 3.5, "checks": [zeros]}}}
    paths = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    for path, data in zip(paths, (first, later), strict=True):
        path.write_text(yaml.safe_dump(data))
    out = tmp_path / "table.md"
    assert module.main([*map(str, paths), "--out", str(out)]) == 1  # a FAIL: not every reference is sound
    text = out.read_text()
    assert text.startswith("2 problems: 1 PASS, 0 WARN, 1 FAIL.")
    assert text.index("| 2_matmul |") < text.index("| 23_softmax | FAIL | 3.5 | zeros kernel rejected: an all-zeros")
    (tmp_path / "c.yaml").write_text("counts: {}\n")
    with pytest.raises(SystemExit, match="not an import report"):
        module.main([str(tmp_path / "c.yaml")])


def test_kernelbench_solutions_pass_and_their_zeros_and_nan_variants_do_not(tmp_path: Path) -> None:
    """The template-style solutions in solutions/kernelbench on problem files in KernelBench's
    format at small sizes (the real sizes are for a GPU): each solution correct, its zeros and NaN
    variants rejected; where every value is under the tolerance (a softmax over 200 000 values) the
    judge stops on the task as defective, for the solution and the zeros variant alike."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kb_solutions", REPO / "scripts" / "kernelbench_solutions_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    problems = tmp_path / "kb" / "level1"
    problems.mkdir(parents=True)
    for name, (forward, shape) in {
        "19_ReLU.py": ("torch.relu(x)", "(4, 3000)"),
        "23_Softmax.py": ("torch.softmax(x, dim=1)", "(2, 200000)"),
    }.items():
        (problems / name).write_text(
            "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            f"        return {forward}\n\n\ndef get_inputs():\n    return [torch.rand{shape}]\n\n\n"
            "def get_init_inputs():\n    return []\n"
        )
    solutions = tmp_path / "solutions" / "level1"
    for name in ("19_relu", "23_softmax"):
        (solutions / name).mkdir(parents=True)
        (solutions / name / "kernel.py").write_text(
            (REPO / "solutions" / "kernelbench" / "level1" / name / "kernel.py").read_text()
        )
    out = tmp_path / "table.md"
    args = ["--solutions", str(tmp_path / "solutions"), "--through", "correctness", "--out", str(out)]
    code = module.main([str(tmp_path / "kb"), *args])
    text = out.read_text()
    assert code == 0, text
    relu = next(line for line in text.splitlines() if line.startswith("| level1/19_relu"))
    assert relu.count("OK: incorrect") == 2 and "OK: none" in relu
    softmax = next(line for line in text.splitlines() if line.startswith("| level1/23_softmax"))
    assert softmax.count("OK: infra_error (") == 2 and "OK: incorrect" in softmax
    assert "2 of 2 problems as required." in text
    (solutions / "99_not_there").mkdir()
    (solutions / "99_not_there" / "kernel.py").write_text("")
    with pytest.raises(SystemExit, match="no problem file for 99_not_there"):
        module.main([str(tmp_path / "kb"), *args])


def test_pause_cost_times_each_part_of_a_pause_on_a_real_worker(tmp_path: Path) -> None:
    out = tmp_path / "pause.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "pause_cost.py"), "--cycles", "20", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["cycles"] == 20 and result["worker_threads"] >= 1
    for part in ("walk_and_stop", "wait_until_stopped_and_read_clocks", "check_clocks", "pause_check_resume"):
        assert 0 < result[part]["median_ms"] <= result[part]["p90_ms"], (part, result)
