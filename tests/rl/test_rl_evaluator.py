"""The RL API on toy tasks (real step subprocesses, deterministic times): the same verdict as
`aka run`, the cache, the frozen baseline, bounded async evaluation and one-line input errors."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TOY_KERNEL, processes_under, toy_kernel_source

import aka
import aka.evaluation.steps as steps_module
import aka.rl.evaluator as rl_evaluator
from aka.config.tasks import task_identity
from aka.device import DeviceInfo
from aka.evaluation.baseline import baseline_path
from aka.evaluation.device_lock import Turn
from aka.evaluation.step_process import RunningTime
from aka.results.task_result import FailureKind, TaskStatus
from aka.run.runner import run_experiment

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
H100 = DeviceInfo("cuda", "H100", "NVIDIA H100", "sm_90", 1)
TASK = "triton2triton/toy/answer"
CANDIDATES = {
    "good": toy_kernel_source(time_ms=2.0),
    "wrong": toy_kernel_source(value=41),
    "broken": "def toy_kernel(:\n",
    "renamed": "VALUE = 42\nTIME_MS = 1.0\n\ndef other():\n    return 42\n",
}
COMPARED = (
    "pass_compilation",
    "pass_correctness",
    "speedup_ratio",
    "base_execution_time",
    "best_optimized_execution_time",
    "score",
    "status",
    "failure_kind",
    "failure_message",
    "valid_baseline_cases",
    "valid_optimized_cases",
    "cases",
    "scorer",
    "device",
)


@pytest.fixture
def evaluator(tasks_root: Path, make_toy_task, tmp_path: Path):
    make_toy_task(TASK, baseline="source")
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as made:
        yield made


def test_the_api_gives_the_verdict_aka_run_gives(
    tasks_root: Path, make_toy_task, write_run_config, tmp_path: Path
) -> None:
    solutions = tmp_path / "solutions"
    for name, source in CANDIDATES.items():
        make_toy_task(f"triton2triton/toy/{name}")
        (solutions / f"triton2triton/toy/{name}").mkdir(parents=True)
        (solutions / f"triton2triton/toy/{name}/kernel.py").write_text(source)
    outcome = run_experiment(
        write_run_config(agent={"template": "replay", "solutions_dir": str(solutions)}), device=CPU
    )
    by_name = {r.task_name: r for r in outcome.results}
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as api:
        for name, source in CANDIDATES.items():
            task = f"triton2triton/toy/{name}"
            got = api.evaluate(task, {"kernel.py": source})
            ran = by_name[task]
            assert {f: getattr(got.task_result, f) for f in COMPARED} == {f: getattr(ran, f) for f in COMPARED}, name
            assert (got.score, got.compiled, got.correct, got.speedup) == (
                ran.score,
                ran.pass_compilation,
                ran.pass_correctness,
                ran.speedup_ratio,
            )
    assert by_name["triton2triton/toy/good"].score == pytest.approx(320.0)


def test_cache_hits_across_evaluators_and_keys_on_what_is_evaluated(
    evaluator, tasks_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)})
    assert not first.cached and first.status is TaskStatus.PASS and first.speedup == pytest.approx(2.0)
    assert evaluator.cache.path(first.cache_key).is_file()

    pristine = evaluator.evaluate(TASK, {})
    assert pristine.speedup == pytest.approx(1.0) and not pristine.cached
    assert evaluator.evaluate(TASK, {"kernel.py": TOY_KERNEL}).cached  # the same files as evaluated

    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as other:
        again = other.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)})
        assert again.cached and again.score == first.score and again.cache_key == first.cache_key
        assert not other.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=1.0)}).cached
    identity = task_identity(evaluator.task(TASK))
    settings = {"scorer": "default"}
    assert (
        rl_evaluator.cache_key(TASK, identity, first.candidate_sha256, "cpu|None", evaluator.platform, settings)
        == first.cache_key
    )
    for name, device, platform, other_settings in [
        (TASK, "NVIDIA H200|sm_90", evaluator.platform, settings),
        (TASK, "cpu|None", {**evaluator.platform, "triton": "0.0"}, settings),
        ("triton2triton/toy/copy", "cpu|None", evaluator.platform, settings),
        # another scorer's numbers (a red team got the default scorer's record for its own)
        (TASK, "cpu|None", evaluator.platform, {"scorer": "mine:flat"}),
        (TASK, "cpu|None", evaluator.platform, {**settings, "AKA_NO_WORKER_SANDBOX": "1"}),
    ]:
        key = rl_evaluator.cache_key(name, identity, first.candidate_sha256, device, platform, other_settings)
        assert key != first.cache_key
    monkeypatch.setenv("AKA_TIMING_BUDGET_S", "1.5")  # an evaluator setting a step reads
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as tuned:
        assert not tuned.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}).cached
    monkeypatch.delenv("AKA_TIMING_BUDGET_S")

    (tasks_root / TASK / "harness.py").write_text((tasks_root / TASK / "harness.py").read_text() + "\n# changed\n")
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as changed:
        assert not changed.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}).cached
    # the evaluator that judged before the edit sees it too (it kept the old identity, red team G)
    assert task_identity(evaluator.task(TASK)) != identity
    assert evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}).cached  # changed's result


def test_every_spelling_of_a_task_id_is_one_task(evaluator) -> None:
    """Keyed by its folder: a red team's 1,024 spellings of one id each loaded the task anew and
    stayed (14 MB a request on the reward server); a NUL byte or an overlong name is an unknown
    task, not a server error."""
    task = evaluator.task(TASK)
    for spelling in (f"{TASK}/", f"/{TASK}", "triton2triton/./toy/answer", "triton2triton/toy/../toy/answer"):
        assert evaluator.task(spelling) is task
    assert len(evaluator._tasks) == 1
    for bad in (f"{TASK}\0", "x" * 6000):
        with pytest.raises(aka.CandidateError, match="unknown task id"):
            evaluator.task(bad)


def test_the_baseline_is_measured_once_and_frozen(evaluator, tasks_root: Path, tmp_path: Path) -> None:
    evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)})
    frozen = baseline_path(evaluator.cache_dir, evaluator.task(TASK))
    stamp = frozen.stat().st_mtime_ns
    evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=3.0)})
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as other:
        other.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=5.0)})
        assert other.baseline(TASK).measured_at == evaluator.baseline(TASK).measured_at
    assert frozen.stat().st_mtime_ns == stamp
    assert not list((evaluator.cache_dir / "scratch").iterdir())


def test_a_broken_task_is_infra_and_never_cached(tasks_root: Path, make_toy_task, tmp_path: Path) -> None:
    make_toy_task("triton2triton/toy/broken", kernel="def toy_kernel(:\n", baseline="source")
    make_toy_task("triton2triton/toy/elsewhere", platform_support={"status": "skip", "reason": "not here"})
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU) as api:
        result = api.evaluate("triton2triton/toy/broken", {"kernel.py": toy_kernel_source()})
        assert result.failure_kind is FailureKind.INFRA_ERROR and not result.applicable
        assert "pristine task" in (result.failure_message or "") and result.score == 0.0
        assert not api.cache.path(result.cache_key).exists()
        skipped = api.evaluate("triton2triton/toy/elsewhere", {})
        assert skipped.status is TaskStatus.SKIP and not skipped.applicable and skipped.failure_message == "not here"


def test_async_evaluations_are_bounded_ordered_and_deduplicated(evaluator, monkeypatch) -> None:
    running, most, calls = [0], [0], []
    lock = threading.Lock()
    real = rl_evaluator.evaluate_candidate

    def counted(*args, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            calls.append(args[0].name)
        try:
            time.sleep(0.05)
            return real(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(rl_evaluator, "evaluate_candidate", counted)
    candidates = [aka.Candidate(TASK, {"kernel.py": toy_kernel_source(time_ms=t)}) for t in (1.0, 2.0, 4.0, 2.0)]
    results = asyncio.run(evaluator.evaluate_batch_async(candidates))
    assert [r.speedup for r in results] == [
        pytest.approx(4.0),
        pytest.approx(2.0),
        pytest.approx(1.0),
        pytest.approx(2.0),
    ]
    assert most[0] == 1 and len(calls) == 3  # the repeated candidate waited for its twin, then hit the cache
    assert [r.speedup for r in evaluator.evaluate_batch(candidates[:2])] == [pytest.approx(4.0), pytest.approx(2.0)]
    assert len(calls) == 3


def test_bad_input_is_a_one_line_error(evaluator) -> None:
    for task_id, files, message in [
        ("triton2triton/toy/nope", {}, "unknown task id 'triton2triton/toy/nope'"),
        ("../../etc", {}, "unknown task id '../../etc'"),
        (TASK, {"harness.py": "x"}, "'harness.py' is not an editable file of the task (editable: kernel.py)"),
        (TASK, {"kernel.py": b"x"}, "must be source text"),
    ]:
        with pytest.raises(aka.CandidateError) as caught:
            evaluator.evaluate(task_id, files)
        assert message in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(aka.CandidateError, match="unknown task id"):
        evaluator.evaluate_batch([aka.Candidate(TASK, {}), aka.Candidate("nope", {})])
    empty = evaluator.evaluate_completion(TASK, "")
    assert (empty.status, empty.failure_kind, empty.score, empty.applicable) == (
        TaskStatus.FAIL,
        FailureKind.COMPILE_ERROR,
        0.0,
        True,
    )
    assert "the completion is empty" in (empty.failure_message or "")


def test_text_that_is_not_text_gets_a_verdict_or_a_one_line_error(evaluator) -> None:
    """A lone surrogate (a Python string, not text): in a candidate's error message it made the
    cache fail to serialize the verdict, so `evaluate` raised, no reward came and a whole batch
    was lost (red team, session 50); in submitted files it raised from deep inside."""
    surrogate = toy_kernel_source(extra='raise RuntimeError("not text: \\udcff")')
    wrong, good = evaluator.evaluate_batch(
        [
            aka.Candidate(TASK, {"kernel.py": surrogate}),
            aka.Candidate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}),
        ]
    )
    assert wrong.failure_kind is FailureKind.COMPILE_ERROR and wrong.applicable, wrong.failure_message
    assert "not text: \ufffd" in (wrong.failure_message or "")
    assert evaluator.cache.path(wrong.cache_key).is_file() and good.status is TaskStatus.PASS
    assert aka.reward(wrong, "score").value == 0.0
    with pytest.raises(aka.CandidateError) as caught:
        evaluator.evaluate(TASK, {"kernel.py": "VALUE = '\udcff'\n"})
    assert "the content of 'kernel.py' is not valid text (surrogates not allowed at character 9)" in str(caught.value)
    completion = evaluator.evaluate_completion(TASK, "```python\nVALUE = '\udcff'\n```")
    assert (completion.failure_kind, completion.score) == (FailureKind.COMPILE_ERROR, 0.0)
    assert "the completion is not valid text" in (completion.failure_message or "")


def test_the_prompt_is_the_runs_plus_the_answer_format(evaluator) -> None:
    bare = evaluator.prompt(TASK, with_baseline=False)
    assert not baseline_path(evaluator.cache_dir, evaluator.task(TASK)).exists()
    assert "# Task: triton2triton/toy/answer" in bare and "## Answer format" in bare and "```python kernel.py" in bare
    timed = evaluator.prompt(TASK)
    assert "- c1: 4.0000 ms (toy_clock)" in timed
    answer = "Faster:\n```python kernel.py\n" + toy_kernel_source(time_ms=2.0) + "```\n"
    assert evaluator.evaluate_completion(TASK, answer).speedup == pytest.approx(2.0)


def test_the_rl_api_is_re_exported_from_aka() -> None:
    from aka.rl import extract, presets, result

    names = {
        "KernelEvaluator": rl_evaluator.KernelEvaluator,
        "Candidate": result.Candidate,
        "CandidateResult": result.CandidateResult,
        "CandidateError": extract.CandidateError,
        "CompletionError": extract.CompletionError,
        "extract_files": extract.extract_files,
        "Reward": presets.Reward,
        "reward": presets.reward,
    }
    for name, target in names.items():
        assert name in aka.__all__ and getattr(aka, name) is target


def test_another_process_gets_the_same_reward(evaluator, tasks_root: Path, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    files = {"kernel.py": toy_kernel_source(time_ms=2.0)}
    here = evaluator.evaluate(TASK, files)
    code = (
        "import json, sys, aka\n"
        "from aka.device import DeviceInfo\n"
        "root, files = sys.argv[1], json.loads(sys.argv[4])\n"
        "for cache in sys.argv[2:4]:\n"
        "    with aka.KernelEvaluator(root, cache, device=DeviceInfo('cpu', 'cpu', 'cpu', None, 0)) as ev:\n"
        f"        r = ev.evaluate({TASK!r}, files)\n"
        "        print(json.dumps([r.cached, r.score, r.speedup, aka.reward(r, 'kevin').value]))\n"
    )
    src = Path(rl_evaluator.__file__).resolve().parents[2]
    argv = [
        sys.executable,
        "-c",
        code,
        str(tasks_root),
        str(evaluator.cache_dir),
        str(tmp_path / "fresh"),
        json.dumps(files),
    ]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        timeout=300,
        check=True,
    )
    shared, fresh = (json.loads(line) for line in out.stdout.splitlines())
    kevin = aka.reward(here, "kevin").value
    assert shared == [True, here.score, here.speedup, kevin] and fresh == [False, here.score, here.speedup, kevin]


def test_a_deadline_kills_a_hung_evaluation_and_nothing_is_cached(evaluator, tasks_root: Path) -> None:
    hung = toy_kernel_source(extra="import time\ntime.sleep(600)")
    started = time.monotonic()
    result = evaluator.evaluate(TASK, {"kernel.py": hung}, timeout_s=4.0)
    assert time.monotonic() - started < 30
    assert result.failure_kind is FailureKind.TIMEOUT and "deadline" in (result.failure_message or "")
    assert not evaluator.cache.path(result.cache_key).exists()
    assert processes_under(tasks_root.parent) == []
    with pytest.raises(aka.CandidateError, match="timeout_s"):
        evaluator.evaluate(TASK, {"kernel.py": hung}, timeout_s=0)


def test_evaluations_spread_over_devices(tasks_root: Path, make_toy_task, tmp_path: Path, monkeypatch) -> None:
    make_toy_task(TASK, baseline="source")
    devices = [DeviceInfo("cpu", "cpu", "cpu", None, 0, index=i) for i in range(2)]
    seen: list[int | None] = []
    running, most = [0], [0]
    lock = threading.Lock()
    real = rl_evaluator.evaluate_candidate

    def counted(task, candidate_dir, scratch, device, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            seen.append(device.index)
        try:
            time.sleep(0.3)
            return real(task, candidate_dir, scratch, device, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(rl_evaluator, "evaluate_candidate", counted)
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", devices=devices) as api:
        candidates = [aka.Candidate(TASK, {"kernel.py": toy_kernel_source(time_ms=t)}) for t in (1.0, 2.0, 4.0, 8.0)]
        results = api.evaluate_batch(candidates)
    assert [r.speedup for r in results] == [
        pytest.approx(4.0),
        pytest.approx(2.0),
        pytest.approx(1.0),
        pytest.approx(0.5),
    ]
    assert most[0] == 2 and sorted(seen) == [0, 0, 1, 1]
    with pytest.raises(aka.CandidateError, match="different models"):
        aka.KernelEvaluator(tasks_root, tmp_path / "cache", devices=[devices[0], H100])


class _SteppedAside(Turn):
    """A shared turn that reports having stood stopped 3 s for timed steps."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self.pauses = 1

    def paused_s(self) -> float:
        return 3.0


def test_time_a_shared_step_stood_stopped_for_timed_steps_counts_as_a_wait(evaluator, monkeypatch) -> None:
    """A shared turn that stepped aside (aka.evaluation.device_lock.SharedTurn) adds its stopped
    time to the evaluation's waits, as a wait for the lock does: not to its running time."""
    shared_turns: list[Turn] = []

    @contextlib.contextmanager
    def turn_of(device: DeviceInfo, exclusive: bool) -> Iterator[Turn]:
        turn = Turn(0.0) if exclusive else _SteppedAside()
        if not exclusive:
            shared_turns.append(turn)
        yield turn

    evaluator.baseline(TASK)
    monkeypatch.setattr(steps_module, "device_turn", turn_of)
    result = evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}, timeout_s=60.0)
    assert result.failure_kind is FailureKind.NONE, result.failure_message
    assert shared_turns and result.device_wait_seconds == pytest.approx(3.0 * len(shared_turns), abs=0.2)


def test_the_time_limit_leaves_out_waits_for_the_device_but_not_the_hard_end() -> None:
    limit = RunningTime(10.0)
    before = limit.left()
    limit.waited(5.0)
    assert 14.0 < limit.left() <= before + 5.0
    limit.waited(-3.0)  # a clock that went backwards never shortens it
    assert limit.left() > 14.0
    hard = RunningTime(10.0, not_after=time.monotonic() + 2.0)
    hard.waited(100.0)
    assert hard.left() <= 2.0


def test_an_honest_candidate_waiting_behind_others_is_not_judged_timeout(evaluator, monkeypatch) -> None:
    """On the H200 three honest candidates were judged `timeout` under load: their time limit ran
    while they waited for the device's lock. Here every step waits 4 s for its turn (12 s in all)
    under a time limit of 10 s, more than the candidate's own steps take."""
    waits: list[float] = []

    @contextlib.contextmanager
    def slow_turn(device: DeviceInfo, exclusive: bool) -> Iterator[Turn]:
        time.sleep(4.0)
        waits.append(4.0)
        yield Turn(4.0)

    evaluator.baseline(TASK)  # measured and frozen first, without waits
    monkeypatch.setattr(steps_module, "device_turn", slow_turn)
    started = time.monotonic()
    result = evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}, timeout_s=10.0)
    assert len(waits) == 3 and time.monotonic() - started > 12.0
    assert result.failure_kind is FailureKind.NONE and result.speedup == pytest.approx(2.0), result.failure_message
    assert result.device_wait_seconds == pytest.approx(12.0, abs=0.5)  # reported apart from its own time


def test_bad_evaluator_settings_in_the_environment_stop_it_before_anything_runs(
    tasks_root: Path, tmp_path: Path, write_run_config, monkeypatch
) -> None:
    """A bad `AKA_TIMING_BUDGET_S` or `AKA_DEVICE_YIELD_AFTER_S` would fail every evaluation of a
    run or a server: both are refused up front, naming the variable and the fix."""
    from aka.errors import PreflightError

    for name, bad in (("AKA_TIMING_BUDGET_S", "soon"), ("AKA_DEVICE_YIELD_AFTER_S", "-1")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(PreflightError, match=f"{name}=.*unset it"):
            aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU)
        with pytest.raises(PreflightError, match=f"{name}=.*unset it"):
            run_experiment(write_run_config(agent={"template": "noop"}), device=CPU)
        monkeypatch.delenv(name)


def test_each_evaluations_log_is_kept_where_asked(tasks_root: Path, make_toy_task, tmp_path: Path) -> None:
    """`log_dir` (`aka serve --log-dir`): the judge's log of every evaluation, in a run's trial layout
    (what benchmarks/device_holds.py reads); a cached result ran nothing and leaves none."""
    make_toy_task(TASK, baseline="source")
    logs = tmp_path / "logs"
    with aka.KernelEvaluator(tasks_root, tmp_path / "cache", device=CPU, log_dir=logs) as api:
        first = api.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)})
        assert api.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}).cached
        api.evaluate(TASK, {"kernel.py": "def toy_kernel(:\n"})
    assert first.status is TaskStatus.PASS
    kept = sorted(logs.glob("*/evaluation.log"))
    assert len(kept) == 2 and all(p.parent.name.startswith("triton2triton_toy_") for p in kept)
    assert all(p.read_text().startswith("$ ") for p in kept)  # each step's command, then its output


@pytest.mark.parametrize("failing", [1, 5], ids=["once", "every time"])
def test_an_infra_error_is_judged_again_up_to_three_times(evaluator, monkeypatch, failing: int) -> None:
    """An `infra_error` is no reward (a trainer drops it), and on a shared GPU its usual cause
    passes: beside an evaluation that filled the GPU's memory, honest candidates' steps ended so
    on the H200 (docs/benchmarks/2026-12-04_session40_h200.md). The evaluation is made again, at
    most three times in all; a verdict on the candidate is never made again."""
    real = rl_evaluator.evaluate_candidate
    calls: list[int] = []
    to_fail = [failing]

    def sometimes_infra(*args, **kwargs):
        outcomes = real(*args, **kwargs)
        calls.append(len(calls) + 1)
        if to_fail[0] > 0:
            to_fail[0] -= 1
            outcomes[-1].failure, outcomes[-1].message = FailureKind.INFRA_ERROR, "made an infra_error by the test"
        return outcomes

    evaluator.baseline(TASK)
    monkeypatch.setattr(rl_evaluator, "evaluate_candidate", sometimes_infra)
    monkeypatch.setattr(rl_evaluator, "INFRA_RETRY_WAIT_S", 0.0)
    result = evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(time_ms=2.0)}, timeout_s=120.0)
    if failing == 1:
        assert len(calls) == 2 and result.failure_kind is FailureKind.NONE, result.failure_message
        assert result.speedup == pytest.approx(2.0)
    else:
        assert len(calls) == 3 and result.failure_kind is FailureKind.INFRA_ERROR and not result.applicable
    calls.clear()
    to_fail[0] = 0
    wrong = evaluator.evaluate(TASK, {"kernel.py": toy_kernel_source(value=41)}, timeout_s=120.0)
    assert wrong.failure_kind is FailureKind.INCORRECT and len(calls) == 1
