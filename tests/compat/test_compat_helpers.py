"""The original's perf helpers as our code (materialized, same API), the pristine twin that lets them
time the baseline interleaved with the candidate, symbol scopes, and the original's report format."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from original_task_fixtures import ADD_TEST_FILE, v2_task, vllm_task

from aka.compat.bench import _benchmark_cuda_graph_or_events, _TimedRun, measure_samples
from aka.compat.pairing import ENV_PAIRING, baseline_twin
from aka.compat.perf_helpers import AKA_BENCHMARK_SHIM, PYTEST_SHIM, HelperError, helper_files, materialize_helpers
from aka.compat.spec import EditScope
from aka.compat.symbol_scope import scope_problem, scope_violations
from aka.evaluation.wire import ENV_BASELINE_DIR, ENV_PLACEMENTS, ENV_TARGET
from aka.reports.writers import RunHeader, report_files
from aka.results.task_result import FailureKind, TaskResult, TaskStatus


def test_helpers_are_materialized_where_the_task_expects_them(tmp_path: Path) -> None:
    task = vllm_task(tmp_path)
    (task / "performance_utils_pytest.py").write_text("raise RuntimeError('stub')\n")
    (task / "adapter").mkdir()
    (task / "adapter/_eval.py").write_text("from _aka_benchmark import TimedRun\n")
    files = helper_files(task, {"source/toy_scale.py"})
    assert files["performance_utils_pytest.py"] == PYTEST_SHIM
    assert files["adapter/_aka_benchmark.py"] == AKA_BENCHMARK_SHIM
    runner = files["scripts/task_runner.py"]
    assert "from aka.compat.bench import (" in runner and "were not materialized" not in runner
    assert runner.count("AKA-GENERATED") == 2 and "def run_performance" in runner
    assert sorted(materialize_helpers(task, {"source/toy_scale.py"})) == sorted(files)
    assert helper_files(task, {"scripts/task_runner.py"}).get("scripts/task_runner.py") is None  # editable: untouched
    probe = "import performance_utils_pytest as p; print(p.do_bench_config(1, 2))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=task,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.stdout.strip() == "BenchConfig(warm_up=1, repetition=2)", done.stderr  # imports aka by itself
    (task / "scripts/task_runner.py").write_text("# >>> AKA-GENERATED: x >>>\nstub\n")
    with pytest.raises(HelperError, match="task_runner.py: invalid AKA-GENERATED helper markers"):
        helper_files(task, set())


PRISTINE = "NAME = 'pristine'\n\n\ndef op(calls):\n    calls.append(NAME)\n    return NAME\n"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An evaluation directory: the candidate's `source/op.py`, the pristine one in `.aka_baseline/`."""
    for rel, text in (
        ("source/op.py", PRISTINE.replace("'pristine'", "'candidate'")),
        (".aka_baseline/source/op.py", PRISTINE),
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setenv(ENV_PAIRING, "1")
    monkeypatch.setenv(ENV_TARGET, "candidate")
    monkeypatch.setenv(ENV_BASELINE_DIR, str(tmp_path / ".aka_baseline"))
    return tmp_path


def test_twin_of_a_closure_over_the_editable_module(eval_dir: Path) -> None:
    mod = _load(eval_dir / "source/op.py", "toy_kernel")
    calls: list[str] = []

    def _bench_fn() -> str:
        return str(mod.op(calls))

    twin, why = baseline_twin(_bench_fn)
    assert twin is not None and why == "paired" and twin.files == ("source/op.py",)
    assert (twin.fn(), _bench_fn()) == ("pristine", "candidate") and calls == ["pristine", "candidate"]
    unrelated, why = baseline_twin(lambda: calls.append("x"))
    assert unrelated is None and why == "the timed function reaches no editable source directly"


def test_twin_of_a_lambda_in_an_editable_test_file(eval_dir: Path) -> None:
    """rocmbench: the lambda calls the kernel through the globals of its own (editable) file."""
    test_file = (
        "def add_kernel(out):\n    out.append(KIND)\n\n\nKIND = 'KIND_VALUE'\n\n\n"
        "def make(out):\n    return lambda: add_kernel(out)\n"
    )
    (eval_dir / "test_add.py").write_text(test_file.replace("KIND_VALUE", "candidate"))
    (eval_dir / ".aka_baseline/test_add.py").write_text(test_file.replace("KIND_VALUE", "pristine"))
    out: list[str] = []
    op_lambda = _load(eval_dir / "test_add.py", "test_add").make(out)
    twin, _ = baseline_twin(op_lambda)
    assert twin is not None
    twin.fn()
    op_lambda()
    assert out == ["pristine", "candidate"]


def test_paired_timing_runs_both_sides_and_the_candidate_last(eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PLACEMENTS, "1")  # one load a side (the default's copies: the next test)
    mod = _load(eval_dir / "source/op.py", "toy_kernel")
    calls: list[str] = []
    samples, meta = measure_samples(lambda: mod.op(calls), warmup=1, repetition=6)
    assert len(samples) == 6 and meta["benchmark_method"] == "cpu_timer_fallback" and meta["aka_pairing"] == "paired"
    assert meta["aka_pairs"] == 6 and 0 < meta["aka_speedup_ci_low"] <= meta["aka_speedup_ci_high"]
    assert calls.count("pristine") == 7 and calls[-1] == "candidate"
    monkeypatch.setenv(ENV_TARGET, "baseline")  # the frozen baseline: timed alone
    mean, meta = _benchmark_cuda_graph_or_events(lambda: mod.op(calls), warmup=0, repetition=3)
    assert mean > 0 and meta["aka_pairing"] == "not requested" and "aka_speedup" not in meta
    with pytest.raises(RuntimeError, match="timed_run requires an observable CUDA-graph replay"):
        _benchmark_cuda_graph_or_events(lambda: None, repetition=1, timed_run=_TimedRun())


def test_each_side_is_timed_over_several_loads_in_turn(eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With AKA_PLACEMENTS=3 each side's calls go to three separate loads of its files in turn (a
    fixed placement per side would be a fixed offset between the sides)."""
    monkeypatch.setenv(ENV_PLACEMENTS, "3")
    mod = _load(eval_dir / "source/op.py", "toy_kernel")
    calls: list[str] = []
    samples, meta = measure_samples(lambda: mod.op(calls), warmup=0, repetition=6)
    assert meta["aka_pairing"] == "paired" and meta["aka_pairs"] == 6
    assert calls.count("candidate") == 7 and calls.count("pristine") == 6 and calls[-1] == "candidate"
    for side in ("candidate", "baseline"):
        copies = [sys.modules.get(f"aka_{side}{serial}_source_op_py") for serial in (1, 2)]
        assert all(copy is not None for copy in copies) and copies[0] is not copies[1]
    assert sys.modules["aka_candidate1_source_op_py"].NAME == "candidate"
    assert sys.modules["aka_baseline2_source_op_py"].NAME == "pristine"


def test_a_task_that_checks_the_timed_run_keeps_one_load_a_side(eval_dir: Path) -> None:
    """`timed_run` validates one graph's outputs: copies of the candidate would be timed unchecked
    (a candidate could compute only in the load whose outputs are seen), so there are none."""
    from aka.compat.bench import _Loads

    mod = _load(eval_dir / "source/op.py", "toy_kernel")

    def timed() -> str:
        return str(mod.op([]))

    twin, _ = baseline_twin(timed)
    assert twin is not None
    assert len(_Loads.of(timed, twin).candidate) == 4
    checked = _Loads.of(timed, twin, checked=True)
    assert len(checked.candidate) == 1 and len(checked.baseline) == 1


def test_symbol_scopes(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine.py"
    pristine.write_text(ADD_TEST_FILE)
    scope = EditScope("test_toy_add.py", ("add_kernel", "sub_kernel"), allow_new_helpers=True)

    def violations(text: str, scope: EditScope = scope) -> list[str]:
        candidate = tmp_path / "candidate.py"
        candidate.write_text(text)
        return scope_violations(scope, pristine, candidate)

    faster = ADD_TEST_FILE.replace(
        "    for i in range(len(x)):\n        out[i] = sum((x[i], y[i]))",
        "    out[:] = [a + b for a, b in zip(x, y)]  # reformatted, commented",
    )
    assert faster != ADD_TEST_FILE
    assert violations(faster + "\n\ndef _helper():\n    return 1\n\nimport math\n") == []
    assert violations(ADD_TEST_FILE.replace("assert out == [a + b", "assert True or out == [a + b")) == [
        "test_add changed"
    ]
    assert violations(ADD_TEST_FILE.replace("def sub_kernel(", "def renamed_kernel(")) == [
        "sub_kernel removed (a declared editable symbol must stay)"
    ]
    assert violations(ADD_TEST_FILE.replace("import pytest\n", "")) == [
        "module-level statements outside the editable symbols changed"
    ]
    assert violations(ADD_TEST_FILE + "\nresult_gold = {'forged': 1}\n") == ["result_gold changed"]
    strict = EditScope("test_toy_add.py", ("add_kernel", "sub_kernel"))
    assert violations(ADD_TEST_FILE + "\ndef _helper():\n    return 1\n", strict) == [
        "_helper added (new helpers are not allowed)"
    ]
    assert violations("def add_kernel(:\n") == []  # the compile step reports what does not parse
    (tmp_path / "eval").mkdir()
    edited = ADD_TEST_FILE.replace("def test_sub(SIZE):", "def test_sub(SIZE=1):")
    (tmp_path / "eval/test_toy_add.py").write_text(edited)
    (tmp_path / "pristine_dir").mkdir()
    (tmp_path / "pristine_dir/test_toy_add.py").write_text(ADD_TEST_FILE)
    assert scope_problem([scope], tmp_path / "pristine_dir", tmp_path / "eval") == (
        "test_toy_add.py (editable: add_kernel, sub_kernel): test_sub changed"
    )


def _result(name: str, status: TaskStatus, **fields: object) -> TaskResult:
    return TaskResult(task_name=name, task_type=name.split("/")[0], status=status, **fields)  # type: ignore[arg-type]


RESULTS = [
    _result(
        "triton2triton/vllm/a",
        TaskStatus.PASS,
        pass_compilation=True,
        pass_correctness=True,
        speedup_ratio=1.5,
        score=270.0,
        optimization_summary=" summary ",
    ),
    _result(
        "triton2triton/vllm/b",
        TaskStatus.PARTIAL,
        pass_compilation=True,
        score=20.0,
        failure_kind=FailureKind.INCORRECT,
        failure_message="Shape 1: mismatch",
    ),
    _result(
        "instruction2triton/rocmbench/c",
        TaskStatus.INFRA,
        failure_kind=FailureKind.INFRA_ERROR,
        failure_message="the task cannot be loaded",
        score=0.0,
    ),
    _result("triton2triton/vllm/skipped", TaskStatus.SKIP, failure_kind=FailureKind.SKIPPED),
]


def test_the_original_report_format() -> None:
    header = RunHeader("run_20261202_101010", "noop", "H200", "NVIDIA H200", "2026-12-02", "default", "original")
    files = report_files(RESULTS, header)
    breakdown = json.loads(files["task_type_breakdown.json"])
    assert list(breakdown) == ["run_timestamp", "agent", "target_gpu", "overall", "task_types"]
    assert [breakdown[k] for k in ("run_timestamp", "agent", "target_gpu")] == ["20261202_101010", "noop", "H200"]
    overall = breakdown["overall"]
    assert overall["total_tasks"] == 3 and overall["compilation_pass_rate"] == pytest.approx(200 / 3)
    assert overall["correctness_pass_rate"] == pytest.approx(100 / 3) and overall["valid_speedup_count"] == 1
    assert breakdown["task_types"]["triton2triton"]["count"] == 2
    assert breakdown["task_types"]["instruction2triton"]["compilation_pass_rate"] == 0.0
    text = files["overall_report.txt"].splitlines()
    assert text[:7] == [
        "=" * 80,
        "AgentKernelArena Task Results Report",
        "=" * 80,
        "Run: 20261202_101010",
        "Agent: noop",
        "Target GPU: H200",
        "=" * 80,
    ]
    assert "  Pass Count:            2/3" in text and "  Pass Rate:             66.7%" in text
    assert "  Best Speedup:            1.50x (task: triton2triton/vllm/a)" in text
    assert f"{'PASS':<8} {'triton2triton/vllm/a':<40} Score: {270.0:>6.1f}  Speedup: 1.50x" in text
    assert "         Error: infra_error: the task cannot be loaded" in text
    assert "    Speedup > 1.0:        1/2 (50.0%)" in text and not any("skipped" in line for line in text)
    csv_lines = files["overall_summary.csv"].splitlines()
    assert csv_lines[0] == "Task Name,Task Type,Score,Speedup,Optimization_summary"
    assert "triton2triton/vllm/a,triton2triton,270.0000,1.5000,summary" in csv_lines
    ours = report_files(RESULTS, RunHeader("run_x", "noop", "H200", "H200", "", "default"))
    assert "by_task_type" in json.loads(ours["task_type_breakdown.json"]) and "Status" in ours["overall_summary.csv"]


def test_v2_adapter_fixture_speaks_the_protocol(tmp_path: Path) -> None:
    """The fixture's own adapter, run by hand on its pristine task (as an author would check it)."""
    task = v2_task(tmp_path)
    materialize_helpers(task, {"source/toy_scale.py"})
    done = subprocess.run(
        [sys.executable, "_arena_eval.py", "validate-task"], cwd=task, capture_output=True, text=True, check=False
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("ARENA_EVAL_RESULT="))
    assert done.returncode == 0 and json.loads(line.split("=", 1)[1])["metadata"] == {"candidate_state": "implemented"}
    assert textwrap.dedent(line)  # one line
