"""The autotune agent: knob rewriting, the search, and whole searches on purpose-made toy tasks.

Toy kernels compute `TIME_MS` (what the toy harness reports as the time) and `VALUE` (correct
when 42) from their knobs, so every search has a known optimum and known wrong variants.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from aka.agents import AgentContext, AgentSettings, get_agent
from aka.agents.autotune import AutotuneOptions
from aka.agents.autotune.knobs import KnobError, read_knob, write_knob
from aka.agents.autotune.search import SearchSpace, VariantSearch
from aka.agents.autotune.tuner import LOG_NAME, SCRATCH_NAME, TuningLog
from aka.config.task_config import BaselineSource
from aka.config.tasks import load_task
from aka.device import DeviceInfo
from aka.evaluation.baseline import BaselineRecord
from aka.results.task_result import AgentOutcome, FailureKind, TaskStatus
from aka.run.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]

GRID_KERNEL = """\"\"\"A toy kernel whose speed depends on two knobs: best at BLOCK=64, WARPS=4 (256 is wrong).\"\"\"

BLOCK = 16  # elements per program
WARPS: int = 1
VALUE = 42 if BLOCK != 256 else 41
TIME_MS = 0.5 if BLOCK == 256 else 1.0 + abs(BLOCK - 64) / 16 + abs(WARPS - 4)


def toy_kernel():
    BLOCK = 999  # a local of the same name is not the knob
    return VALUE if BLOCK else 0
"""
GRID_TUNABLES = [{"name": "BLOCK", "values": [16, 32, 64, 128, 256]}, {"name": "WARPS", "values": [1, 2, 4, 8]}]

DEFINE_KERNEL = """import pathlib
import re

_SOURCE = pathlib.Path(__file__).with_name("launch.cu").read_text()
THREADS = int(dict(re.findall(r"^#define (\\w+) (\\S+)", _SOURCE, re.M))["THREADS"])
VALUE = 42 if THREADS <= 1024 else 0
TIME_MS = 1024.0 / THREADS


def toy_kernel():
    return VALUE
"""
DEFINE_SOURCE = """// launch parameters
#include <cuda_runtime.h>
#define THREADS_EXTRA 7
#define THREADS 128  // threads per block
#define MAX(a, b) ((a) > (b) ? (a) : (b))

__global__ void toy_kernel() {}
"""


@dataclass
class Tuned:
    outcome: AgentOutcome
    log: TuningLog
    work: Path
    scratch: Path


@pytest.fixture
def autotune(tmp_path: Path, tasks_root: Path):
    """Run the agent directly on a toy task's fresh workspace copy, as the pipeline would."""

    def run(
        task_dir: Path,
        max_iterations: int | None = None,
        timeout: float | None = None,
        margin: float = 0.01,
        seed: int = 0,
    ) -> Tuned:
        task = load_task(tasks_root, task_dir)
        workspace = tmp_path / f"ws_{task.slug}"
        work = workspace / "work"
        shutil.copytree(task_dir, work)
        baseline = BaselineRecord(task_name=task.name, task_identity="x", device="cpu", source=BaselineSource.SOURCE)
        context = AgentContext(
            agent_name="autotune",
            settings=AgentSettings(None, None, max_iterations, timeout),
            options=AutotuneOptions(margin=margin, seed=seed),
            task_name=task.name,
            prompt="",
            editable_files=tuple(task.config.source_file_path),
            log_path=workspace / "agent.log",
            task=task,
            device=DeviceInfo("cpu", "cpu", "cpu", None, 0),
            baseline=baseline,
        )
        outcome = get_agent("autotune").launch(context, task_dir, work)
        log_file = workspace / LOG_NAME
        log = TuningLog.model_validate_json(log_file.read_text()) if log_file.is_file() else None
        return Tuned(outcome, log, work, workspace / SCRATCH_NAME)  # type: ignore[arg-type]

    return run


# ---- knobs -------------------------------------------------------------------------------------


def test_python_knob_rewrite_touches_only_the_module_level_value() -> None:
    text = (
        's = "BLOCK = 1"\n# BLOCK = 2\nBLOCK: int = (\n    128\n)  # keep\nλ = "é"; X = 1\n\ndef f():\n    BLOCK = 3\n'
    )
    assert read_knob(text, "BLOCK", "kernel.py") == 128
    assert write_knob(text, "BLOCK", 512, "kernel.py") == text.replace("    128\n", "    512\n")
    assert write_knob(text, "X", 2.5, "kernel.py").endswith('λ = "é"; X = 2.5\n\ndef f():\n    BLOCK = 3\n')
    assert write_knob("MODE = 'a'\r\n", "MODE", "b", "k.py") == "MODE = 'b'\r\n"
    assert write_knob("ON = False\n", "ON", True, "k.py") == "ON = True\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("def f():\n    BLOCK = 1\n", "no module-level `BLOCK = value`"),
        ("BLOCK = 1\nBLOCK = 2\n", "assigns it 2 times"),
        ("BLOCK = OTHER = 1\n", "together with other names"),
        ("BLOCK = (\n", "does not parse"),
    ],
)
def test_python_knob_errors(text: str, problem: str) -> None:
    with pytest.raises(KnobError, match=problem):
        read_knob(text, "BLOCK", "kernel.py")


def test_define_knob_rewrite_keeps_comments_and_other_macros() -> None:
    assert read_knob(DEFINE_SOURCE, "THREADS", "launch.cu") == 128
    rewritten = write_knob(DEFINE_SOURCE, "THREADS", 256, "launch.cu")
    assert rewritten == DEFINE_SOURCE.replace("#define THREADS 128  //", "#define THREADS 256  //")
    assert write_knob("#  define FLAG 0\r\n", "FLAG", True, "a.cuh") == "#  define FLAG 1\r\n"
    assert write_knob("#define T float /* type */\n", "T", "half", "a.h") == "#define T half /* type */\n"
    for text, problem in [
        ("#define MAX(a) a\n", "no `#define MAX value`"),
        ("#define N 1\n#define N 2\n", "2 `#"),
        ("#define N \\\n 1\n", "continues over lines"),
        ("#define N // none\n", "no value"),
    ]:
        with pytest.raises(KnobError, match=problem):
            read_knob(text, text.split()[1].split("(")[0], "k.cu")


# ---- search ------------------------------------------------------------------------------------


def test_exhaustive_search_covers_the_grid_once_starting_from_the_start() -> None:
    space = SearchSpace.of(("A", "B"), [[1, 2, 2], [True, 1]], start=(3, True))
    search = VariantSearch(space, budget=5, seed=0, margin=0.0)
    assert search.exhaustive and space.size == 4
    proposed = iter(search.next_variant, None)
    assert list(proposed) == [(3, True), (1, True), (1, 1), (2, True), (2, 1)]


@pytest.mark.parametrize("seed", range(5))
def test_sampled_search_descends_to_the_optimum(seed: int) -> None:
    values: list[int | float | str | bool] = list(range(10))
    space = SearchSpace.of(("I", "J"), [values, values], start=(0, 0))
    search = VariantSearch(space, budget=30, seed=seed, margin=0.01)
    assert not search.exhaustive and search.random_quota == 14
    seen = []
    for _ in range(30):
        variant = search.next_variant()
        assert variant is not None and variant not in seen
        seen.append(variant)
        i, j = variant
        search.record(variant, 1.0 / (1 + abs(int(i) - 6) + abs(int(j) - 3)))
    assert search.best == (6, 3)


def test_margin_rule_ignores_small_gains_and_failures() -> None:
    search = VariantSearch(SearchSpace.of(("A",), [[1, 2, 3]], start=(1,)), budget=None, seed=0, margin=0.05)
    assert search.record((1,), 1.00) and not search.record((2,), 1.04) and not search.record((3,), None)
    assert search.best == (1,) and search.record((3,), 1.06) and search.best == (3,)


# ---- the agent on toy tasks --------------------------------------------------------------------


def test_finds_the_optimum_and_rejects_the_faster_wrong_variant(make_toy_task, write_run_config) -> None:
    make_toy_task("triton2triton/toy/grid", kernel=GRID_KERNEL, tunables=GRID_TUNABLES)
    outcome = run_experiment(write_run_config(agent={"template": "autotune", "max_iterations": 20}))
    (result,) = outcome.results
    assert (result.status, result.failure_kind) == (TaskStatus.PASS, FailureKind.NONE)
    assert result.speedup_ratio == pytest.approx(7.0 / 1.0)
    assert result.agent and result.agent.exit_reason == "exhausted" and result.agent.files_changed == ["kernel.py"]
    assert "chose BLOCK=64, WARPS=4" in (result.agent.message or "")
    (workspace,) = [p for p in outcome.run_dir.iterdir() if (p / LOG_NAME).is_file()]
    assert (workspace / "work/kernel.py").read_text() == GRID_KERNEL.replace("BLOCK = 16", "BLOCK = 64").replace(
        "WARPS: int = 1", "WARPS: int = 4"
    )
    log = TuningLog.model_validate_json((workspace / LOG_NAME).read_text())
    assert log.strategy == "exhaustive" and len(log.variants) == 20 and log.speedup_reference == "baseline"
    assert log.best is not None and log.best.values == {"BLOCK": 64, "WARPS": 4}
    wrong = [v for v in log.variants if v.values["BLOCK"] == 256]
    assert len(wrong) == 4 and all(v.failure is FailureKind.INCORRECT and not v.correct for v in wrong)
    assert all(v.correct and v.case_times_ms and v.mean_time_ms for v in log.variants if v.values["BLOCK"] != 256)
    assert "variant 1 (BLOCK=16, WARPS=1): correct" in (workspace / "agent.log").read_text()
    assert not (workspace / "work" / SCRATCH_NAME).exists()


def test_respects_max_iterations(make_toy_task, autotune) -> None:
    tuned = autotune(
        make_toy_task("triton2triton/toy/grid", kernel=GRID_KERNEL, tunables=GRID_TUNABLES), max_iterations=6
    )
    assert tuned.outcome.ok and tuned.outcome.exit_reason == "max_iterations" and tuned.outcome.limit == "turns"
    assert tuned.outcome.turns == len(tuned.log.variants)
    assert tuned.log.strategy.startswith("random") and len(tuned.log.variants) == 6
    assert len(list(tuned.scratch.iterdir())) == 6 and tuned.log.variants[0].start
    best = min((v for v in tuned.log.variants if v.correct), key=lambda v: v.mean_time_ms or 0)
    assert tuned.log.best == best and best.mean_speedup and best.mean_speedup > 1
    assert f"BLOCK = {best.values['BLOCK']}  #" in (tuned.work / "kernel.py").read_text()


def test_stops_at_the_timeout_and_keeps_the_best_so_far(make_toy_task, autotune) -> None:
    slow = "import time\ntime.sleep(0.3)\n" + GRID_KERNEL.split('"""', 2)[2]
    task = make_toy_task("triton2triton/toy/slow", kernel=slow, tunables=GRID_TUNABLES)
    started = time.monotonic()
    tuned = autotune(task, timeout=2.5)
    assert time.monotonic() - started < 2.5 + 4
    assert tuned.outcome.ok and (tuned.outcome.exit_reason, tuned.outcome.limit) == ("timeout", "time")
    assert 1 <= len(tuned.log.variants) < 20
    best = tuned.log.best
    assert best is not None and best.correct
    kernel = (tuned.work / "kernel.py").read_text()
    assert f"BLOCK = {best.values['BLOCK']}  #" in kernel and f"WARPS: int = {best.values['WARPS']}" in kernel


@pytest.mark.parametrize(("margin", "chosen"), [(0.01, 4.0), (0.001, 3.98)])
def test_margin_decides_whether_a_small_gain_replaces_the_start(
    make_toy_task, autotune, margin: float, chosen: float
) -> None:
    task = make_toy_task("triton2triton/toy/noise", tunables=[{"name": "TIME_MS", "values": [3.98]}])
    tuned = autotune(task, margin=margin)
    assert tuned.outcome.exit_reason == "exhausted" and len(tuned.log.variants) == 2
    assert f"\nTIME_MS = {chosen}\n" in (tuned.work / "kernel.py").read_text()
    assert tuned.outcome.files_changed == ([] if chosen == 4.0 else ["kernel.py"])


def test_rewrites_a_define_in_a_cuda_like_file(make_toy_task, autotune) -> None:
    task = make_toy_task(
        "cuda2cuda/toy/define",
        kernel=DEFINE_KERNEL,
        source_file_path=["kernel.py", "launch.cu"],
        tunables=[{"name": "THREADS", "file": "launch.cu", "values": [256, 512, 2048]}],
    )
    (task / "launch.cu").write_text(DEFINE_SOURCE)
    tuned = autotune(task)
    assert tuned.outcome.files_changed == ["launch.cu"]
    assert (tuned.work / "launch.cu").read_text() == DEFINE_SOURCE.replace("THREADS 128", "THREADS 512")
    assert (tuned.work / "kernel.py").read_text() == DEFINE_KERNEL
    assert [v.correct for v in tuned.log.variants] == [True, True, True, False]


def test_a_tunable_missing_from_its_file_is_an_agent_error(make_toy_task, autotune) -> None:
    task = make_toy_task("triton2triton/toy/missing", tunables=[{"name": "NOPE", "values": [1, 2]}])
    tuned = autotune(task)
    assert not tuned.outcome.ok and tuned.outcome.exit_reason == "tunable_not_found"
    assert "NOPE" in (tuned.outcome.message or "") and "kernel.py" in (tuned.outcome.message or "")
    assert tuned.log is None and (tuned.work / "kernel.py").read_text() == (task / "kernel.py").read_text()


def test_a_task_without_tunables_is_left_unchanged(make_toy_task, autotune) -> None:
    task = make_toy_task("triton2triton/toy/plain")
    tuned = autotune(task)
    assert tuned.outcome.ok and tuned.outcome.exit_reason == "no_tunables" and tuned.outcome.files_changed == []
    assert "no tunables" in (tuned.outcome.message or "") and tuned.log is None
    assert (tuned.work / "kernel.py").read_text() == (task / "kernel.py").read_text()
