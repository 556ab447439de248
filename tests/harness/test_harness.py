"""Unit tests of aka.harness: case ids, seeded inputs, comparison, CPU timing, reports and steps."""

from __future__ import annotations

import io
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aka.evaluation.step_report import StepReport, StepStatus, parse_step_message
from aka.harness import (
    CPU_METHOD,
    NO_GPU_MESSAGE,
    BuildError,
    Case,
    KernelTask,
    StepContext,
    StepResult,
    Tolerance,
    ToolMissingError,
    case_id,
    compare_outputs,
    compile_cuda_library,
    cuda_arch,
    describe_exception,
    make_generator,
    parse_dtype,
    perf,
    random_tensor,
    run_task,
    sides,
    syscall_filter,
    time_function,
    tolerance_for,
)
from aka.harness.candidates import (
    BASELINE_MODULE_PREFIX,
    first_error_lines,
    import_candidate,
    load_cuda_library,
    separate_load,
)
from aka.harness.channel import ReportChannel
from aka.harness.paired import LateLaunchError
from aka.harness.report import CaseResult

CPU = torch.device("cpu")


# --- cases and inputs -------------------------------------------------------------------------


def test_case_ids_are_built_from_params_in_order() -> None:
    assert Case.make(n=1_000_003, dtype="float32").id == "n1000003_float32"
    assert case_id({"rows": 8, "cols": 4093, "dtype": "float16"}) == "rows8_cols4093_float16"
    assert case_id({"eps": 0.5, "causal": True, "bias": False, "extra": None}) == "eps0p5_causal_nobias"
    assert case_id({"name": "a b/c"}) == "a-b-c"


def test_case_seed_is_stable_and_differs_between_cases() -> None:
    first, again = Case.make(n=10, dtype="float32"), Case.make(n=10, dtype="float32")
    assert first.seed == again.seed
    assert first.seed != Case.make(n=11, dtype="float32").seed
    assert Case.make(seed=7, n=10).seed == 7


def test_case_rejects_non_scalar_params_and_checks_types() -> None:
    with pytest.raises(TypeError):
        Case("bad", {"shape": (1, 2)})  # type: ignore[dict-item,unused-ignore]
    case = Case.make(n=5, dtype="bfloat16")
    assert case.int_param("n") == 5
    assert case.dtype() == torch.bfloat16
    with pytest.raises(TypeError):
        case.int_param("dtype")


def test_parse_dtype_knows_report_names_only() -> None:
    assert parse_dtype("float16") is torch.float16
    assert parse_dtype("torch.int32") is torch.int32
    with pytest.raises(ValueError, match="unknown dtype"):
        parse_dtype("float8")


def test_inputs_are_deterministic_per_seed_and_never_zero() -> None:
    a = random_tensor((1000,), torch.float32, make_generator(3, CPU), CPU)
    b = random_tensor((1000,), torch.float32, make_generator(3, CPU), CPU)
    c = random_tensor((1000,), torch.float32, make_generator(4, CPU), CPU)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert a.count_nonzero() == a.numel()


def test_input_distributions_and_dtypes() -> None:
    gen = make_generator(0, CPU)
    uniform = random_tensor((500,), torch.float16, gen, CPU, distribution="uniform", low=2.0, high=3.0)
    assert uniform.dtype == torch.float16 and bool(((uniform >= 2) & (uniform <= 3)).all())
    ints = random_tensor((500,), torch.int32, gen, CPU, distribution="randint", low=-5, high=5)
    assert ints.dtype == torch.int32 and int(ints.min()) >= -5 and int(ints.max()) < 5
    flags = random_tensor((500,), torch.bool, gen, CPU)
    assert flags.dtype == torch.bool and 0 < int(flags.sum()) < 500
    scaled = random_tensor((4000,), torch.float32, gen, CPU, scale=3.0)
    assert 2.5 < float(scaled.std()) < 3.5


# --- comparison -------------------------------------------------------------------------------


def test_compare_within_and_beyond_tolerance() -> None:
    expected = torch.tensor([1.0, 2.0, 3.0])
    ok = compare_outputs(expected + 5e-6, expected)
    assert ok.correct and ok.max_abs_error == pytest.approx(5e-6, rel=0.1)
    bad = compare_outputs(expected + torch.tensor([0.0, 0.1, 0.0]), expected)
    assert not bad.correct
    assert bad.max_abs_error == pytest.approx(0.1, rel=1e-3)
    assert "1 of 3 values differ" in bad.message and "index (1,)" in bad.message
    assert "\n" not in bad.message


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.int32, torch.bool]
)
@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-6, 1e-4, 1e-2, 1.0])
def test_zeros_would_pass_agrees_with_the_comparison(dtype: torch.dtype, scale: float) -> None:
    """Read from the extremes alone, the answer is the comparison's own for an all-zeros output."""
    from aka.harness.compare import Overrides, Tolerance, zeros_would_pass

    values = (torch.linspace(-1, 1, 257, dtype=torch.float64) * scale).to(dtype)
    kernelbench: Overrides = {torch.float32: Tolerance(1e-4, 1e-4)}
    for overrides in (None, kernelbench):
        expected = (values, torch.zeros(3))
        judged = compare_outputs(tuple(torch.zeros_like(t) for t in expected), expected, overrides).correct
        assert zeros_would_pass(expected, overrides) is judged
    assert not zeros_would_pass(torch.full((4,), float("nan")))  # NaN is never matched by zeros
    assert not zeros_would_pass(torch.empty(0)) and not zeros_would_pass([])  # nothing to tell


def test_constant_would_pass_agrees_with_the_comparison() -> None:
    """One value everywhere passes where every value lies within tolerance of some c: read from the
    extremes; outputs of one value each (a loss) are never asked."""
    from aka.harness.compare import compare_outputs, constant_would_pass

    near = 3.0 + torch.randn(1000) * 1e-6
    spread = torch.randn(1000)
    cases: list[tuple[torch.Tensor | tuple[torch.Tensor, ...], bool]] = [
        (near, True),
        (spread, False),
        (torch.full((5,), 7, dtype=torch.int64), True),
        (torch.arange(5), False),
        (torch.tensor([1.0, float("nan")]), False),
        (torch.tensor(2.5), False),  # one value: the answer itself
        ((torch.tensor(1.0), near), True),
        ((near, spread), False),
    ]
    for expected, passes in cases:
        assert constant_would_pass(expected) is passes, expected
    middle = float((near.max() + near.min()) / 2)
    assert compare_outputs(torch.full_like(near, middle), near).correct


def test_a_nan_in_a_later_chunk_of_a_float8_reference_is_never_matched() -> None:
    """float8 has no aminmax: its extremes are read a chunk at a time, and a NaN in a chunk after
    the first was dropped by Python's `max` (the order of NaN comparisons), so zeros matched it."""
    from aka.harness.compare import CHUNK_ELEMENTS, constant_would_pass, zeros_would_pass

    expected = torch.zeros(CHUNK_ELEMENTS + 10, dtype=torch.float8_e4m3fn)
    expected[-1] = float("nan")
    assert not zeros_would_pass(expected) and not constant_would_pass(expected)


@pytest.mark.parametrize(
    "dtype, bits",
    [
        (torch.float16, torch.int16),
        (torch.bfloat16, torch.int16),
        (torch.float32, torch.int32),
        (torch.float64, torch.int64),
    ],
)
def test_default_tolerances_accept_one_rounding_step(dtype: torch.dtype, bits: torch.dtype) -> None:
    expected = torch.linspace(-8, 8, 1001, dtype=torch.float64).to(dtype)
    one_ulp_away = (expected.view(bits) + 1).view(dtype)
    assert bool((one_ulp_away != expected).all())
    assert compare_outputs(one_ulp_away, expected).correct
    assert not compare_outputs(expected * 1.1, expected).correct


def test_nan_and_inf_handling() -> None:
    expected = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare_outputs(expected.clone(), expected).correct
    nan_where_finite = torch.tensor([float("nan"), float("nan"), float("inf"), -float("inf")])
    result = compare_outputs(nan_where_finite, expected)
    assert not result.correct and "NaN" in result.message
    finite_where_nan = torch.tensor([1.0, 0.0, float("inf"), -float("inf")])
    assert not compare_outputs(finite_where_nan, expected).correct
    wrong_sign = torch.tensor([1.0, float("nan"), -float("inf"), -float("inf")])
    assert "Inf" in compare_outputs(wrong_sign, expected).message
    inf_where_finite = torch.tensor([float("inf"), float("nan"), float("inf"), -float("inf")])
    assert not compare_outputs(inf_where_finite, expected).correct


def test_shape_dtype_and_type_mismatches_fail() -> None:
    expected = torch.zeros(2, 3)
    assert "shape mismatch" in compare_outputs(torch.zeros(3, 2), expected).message
    half = compare_outputs(expected.half(), expected)
    assert "dtype mismatch: got float16, expected float32" in half.message
    assert "expected a tensor" in compare_outputs([1.0], expected).message
    assert not compare_outputs(torch.zeros(2, 3), (expected, expected)).correct


def test_integers_compare_exactly_and_sequences_are_checked_one_by_one() -> None:
    expected = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert compare_outputs(expected.clone(), expected).correct
    off = compare_outputs(torch.tensor([1, 2, 4], dtype=torch.int32), expected)
    assert not off.correct and off.max_abs_error == 1.0
    pair = (torch.ones(2), torch.ones(2, dtype=torch.bool))
    assert compare_outputs([t.clone() for t in pair], pair).correct
    result = compare_outputs((pair[0], ~pair[1]), pair)
    assert not result.correct and result.message.startswith("output 1:")


def test_int64_outputs_off_by_two_to_the_63_are_wrong() -> None:
    """int64's `got - expected` wraps: a red team's top-k indices, each stored as `index - 2**63`,
    compared 0 apart and passed (session 51). Values past 2**53 that differ by less than a
    float64 step are wrong too."""
    expected = torch.tensor([575, 791, 3, 0], dtype=torch.int64)
    wrapped = compare_outputs(expected - 2**63, expected)
    assert not wrapped.correct and "4 of 4 values differ" in wrapped.message, wrapped.message
    big = torch.tensor([2**62, -(2**62)], dtype=torch.int64)
    assert not compare_outputs(big + 1, big).correct
    assert compare_outputs(big.clone(), big).correct


def test_tolerance_overrides_by_dtype_or_name() -> None:
    assert tolerance_for(torch.int8) == Tolerance(0.0, 0.0)
    assert tolerance_for(torch.float32, {"float32": Tolerance(1e-2, 0.0)}) == Tolerance(1e-2, 0.0)
    assert tolerance_for(torch.float16, {torch.float16: Tolerance(0.5, 0.5)}) == Tolerance(0.5, 0.5)
    expected = torch.ones(4)
    assert compare_outputs(expected + 1e-3, expected, {"float32": Tolerance(1e-2, 0.0)}).correct


# --- timing, messages, reports ----------------------------------------------------------------


def test_cpu_timing_is_a_short_wall_clock_median() -> None:
    calls: list[int] = []
    timing = time_function(lambda: calls.append(1), "cpu")
    assert timing.method == CPU_METHOD == "wall_clock_median"
    assert timing.time_ms > 0 and timing.reps == 3
    assert len(calls) == 4


def test_exception_messages_are_one_line() -> None:
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"
    triton_like = RuntimeError("at 3:8:\ndef kernel(x):\n    y = foo\n        ^\nNameError('foo undefined')")
    assert describe_exception(triton_like) == "RuntimeError: at 3:8: NameError('foo undefined')"
    assert describe_exception(KeyError()) == "KeyError"


def test_report_goes_through_the_private_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = Case.make(n=4, dtype="float32")
    result = StepResult(
        "performance",
        "ok",
        None,
        [
            CaseResult(case, correct=True, time_ms=0.5, timing_method=CPU_METHOD, max_abs_error=float("inf")),
            CaseResult(Case.make(n=5), correct=False, time_ms=0.0, timing_method=CPU_METHOD, message="a\nb"),
        ],
    )
    read_end, write_end = os.pipe()
    monkeypatch.setenv("AKA_RESULT_FD", str(write_end))
    monkeypatch.setattr("sys.stdin", io.StringIO("secret-token\n"))
    saved_stdin = os.dup(0)
    try:
        channel = ReportChannel.claim()
    finally:
        os.dup2(saved_stdin, 0)
        os.close(saved_stdin)
    assert "AKA_RESULT_FD" not in os.environ and channel.fd not in (None, write_end)
    assert channel.fd is not None and channel.fd >= 300
    channel.send(result.to_json())
    with os.fdopen(read_end, "rb") as pipe:
        received = pipe.read()
    assert received.startswith(b"ready\n")  # sent before the token is read (the evaluator drops it)
    report = parse_step_message(received.removeprefix(b"ready\n"), "secret-token")
    assert report.status is StepStatus.OK
    assert report.cases[0].time_ms == 0.5 and report.cases[0].max_abs_error is None
    assert report.cases[1].time_ms is None and report.cases[1].timing_method is None
    assert report.cases[1].message == "a b"


# --- steps: the judge in this process, its workers real processes, on a tiny task folder ------

HARNESS = """
import os, sys
from pathlib import Path
import torch
from aka.harness import BuildError, Case, KernelTask, PairedConfig, ToolMissingError, candidate_function, random_tensor
from aka.harness import run_task


def make_inputs(case, generator, device):
    return (random_tensor((case.int_param("n"),), case.dtype(), generator, device),)


def reference(x):
    return {reference}


def build(directory):
    {build}


def load(directory):
    function = candidate_function("kernel", "double")(directory)
    print(f"aka-load {{directory.name}} {{os.environ.get('TRITON_CACHE_DIR')}}", file=sys.stderr, flush=True)
    return function


TASK = KernelTask(
    name="test/double", cases=[Case.make(n=64, dtype="float32")],
    ci_cases=[Case.make(n=8, dtype="float32"), Case.make(n=9, dtype="float16")],
    make_inputs=make_inputs, reference=reference, load_candidate=load, build=build, {fields})

if __name__ == "__main__":
    raise SystemExit(run_task(TASK))
"""
DOUBLE = "def double(x):\n    return x * 2\n"


def _task_dir(
    tmp_path: Path,
    candidate: str = DOUBLE,
    baseline: str = DOUBLE,
    build: str = "pass",
    fields: str = "",
    family: str = "e2e",
    reference: str = "x * 2",
) -> Path:
    """A task folder as the evaluator builds it: harness, config, the candidate's kernel.py and the
    pristine one in .aka_baseline/ (torch-only kernels: the e2e family, exempt from the policy)."""
    (tmp_path / ".aka_baseline").mkdir(parents=True, exist_ok=True)
    (tmp_path / "harness.py").write_text(HARNESS.format(build=build, fields=fields, reference=reference))
    (tmp_path / "config.yaml").write_text(f"task_type: {family}\nsource_file_path: [kernel.py]\n")
    (tmp_path / "kernel.py").write_text(candidate)
    (tmp_path / ".aka_baseline" / "kernel.py").write_text(baseline)
    return tmp_path


def _step(
    directory: Path, step: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str
) -> StepReport:
    return _run_step(directory, step, monkeypatch, capsys, **env)[0]


def _load_task(directory: Path) -> KernelTask:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_test_harness_{abs(hash(directory))}", directory / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TASK  # type: ignore[no-any-return]


def _run_step(
    directory: Path, step: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str
) -> tuple[StepReport, str]:
    """Run one step as the judge, in this process, as by hand (no channel: its report printed, its
    verdict the last line on standard error, exit 1 when it failed); the report, and what was
    written to standard error (the workers' too, with `capfd`)."""
    monkeypatch.chdir(directory)
    task = _load_task(directory)
    environ = {
        **os.environ,
        "AKA_DEVICE": "cpu",
        "AKA_TASK_FAMILY": env.pop("family", "e2e"),
        "AKA_BASELINE_DIR": str(directory / ".aka_baseline"),
        **env,
    }
    environ.pop("AKA_RESULT_FD", None)
    capsys.readouterr()
    code = run_task(task, [step], environ)
    captured = capsys.readouterr()
    report = StepReport.model_validate_json(captured.out)
    word = {StepStatus.OK: "PASS", StepStatus.FAILED: "FAIL", StepStatus.SKIPPED: "SKIPPED"}[report.status]
    assert code == (1 if report.status is StepStatus.FAILED else 0)
    assert captured.err.strip().splitlines()[-1].startswith(f"{step}: {word}"), captured.err[-500:]
    return report, captured.err


def _ctx(step: str, **env: str) -> StepContext:
    return StepContext.from_env(step, {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e", **env})


def test_context_defaults_and_errors() -> None:
    ctx = _ctx("correctness")
    assert (ctx.device.type, ctx.target, ctx.profile, ctx.baseline) == ("cpu", "candidate", "ci", "source")
    assert _ctx("performance", AKA_CASE_PROFILE="full", AKA_TARGET="reference").profile == "full"
    bad: list[tuple[str, dict[str, str]]] = [
        ("bench", {}),
        ("compile", {"AKA_TARGET": "both"}),
        ("compile", {"AKA_CASE_PROFILE": "x"}),
    ]
    for step, env in bad:
        with pytest.raises(Exception, match="neither|unknown step|not one of"):
            _ctx(step, **env)


def test_correct_candidate_passes_every_ci_case(tmp_path: Path, monkeypatch, capsys) -> None:
    result = _step(_task_dir(tmp_path), "correctness", monkeypatch, capsys)
    assert result.status is StepStatus.OK
    assert [c.id for c in result.cases] == ["n8_float32", "n9_float16"] and all(c.correct for c in result.cases)
    assert "separate-judge" in result.isolation
    if platform.machine() in syscall_filter.MACHINES:  # read by the judge from the worker's /proc status
        assert syscall_filter.FEATURE in result.isolation, result.isolation
    full = _step(tmp_path, "correctness", monkeypatch, capsys, AKA_CASE_PROFILE="full")
    assert [c.id for c in full.cases] == ["n64_float32"]


def test_the_judge_never_imports_the_candidates_code(tmp_path: Path, monkeypatch, capsys) -> None:
    """The candidate's module exists only in its worker: nothing of it is loaded here."""
    candidate = "import builtins\nbuiltins.aka_candidate_ran_here = True\n" + DOUBLE
    for step in ("compile", "correctness", "performance"):
        assert _step(_task_dir(tmp_path, candidate), step, monkeypatch, capsys).status is StepStatus.OK
    import builtins
    import sys as _sys

    assert not hasattr(builtins, "aka_candidate_ran_here")
    assert not [
        m
        for m in _sys.modules.values()
        if str(getattr(m, "__file__", "")).startswith(str(tmp_path)) and not m.__name__.startswith("_test_harness_")
    ]


def test_wrong_and_crashing_candidates_fail_with_a_reason(tmp_path: Path, monkeypatch, capsys) -> None:
    wrong = _step(
        _task_dir(tmp_path / "wrong", "def double(x):\n    return x * 3\n"), "correctness", monkeypatch, capsys
    )
    assert wrong.status is StepStatus.FAILED and wrong.cases[0].correct is False
    assert wrong.message is not None and wrong.message.startswith("2 of 2 cases failed; first: n8_float32")
    crash = "def double(x):\n    raise RuntimeError('kernel exploded\\nsecond line')\n"
    crashed = _step(_task_dir(tmp_path / "crash", crash), "correctness", monkeypatch, capsys)
    assert crashed.status is StepStatus.FAILED and crashed.cases[0].message == "RuntimeError: kernel exploded"
    broken = _step(_task_dir(tmp_path / "broken", "def double(x)\n"), "compile", monkeypatch, capsys)
    assert broken.status is StepStatus.FAILED and "SyntaxError" in (broken.message or "")
    dying = "import os\ndef double(x):\n    os._exit(7)\n"
    died = _step(_task_dir(tmp_path / "dies", dying), "correctness", monkeypatch, capsys)
    assert died.status is StepStatus.FAILED and died.failure_kind == "crash" and "died" in (died.message or "")


def test_a_candidate_that_breaks_its_worker_mapping_memory_crashed(tmp_path: Path, monkeypatch, capsys) -> None:
    """On the H200 a candidate that wrote into its own device files broke its CUDA context, and its
    worker could no longer map the judge's memory: its crash, not a harness error."""
    breaks = (
        "import aka.harness.shared as _shared\n\n\ndef _refuse(cls, *args):\n"
        "    raise OSError('operation not supported')\n\n\n"
        "_shared.OpenedArena.open = classmethod(_refuse)\n" + DOUBLE
    )
    result = _step(_task_dir(tmp_path, breaks), "correctness", monkeypatch, capsys)
    assert result.status is StepStatus.FAILED and result.failure_kind == "crash"
    assert "could not map the judge's memory" in (result.message or "")


def test_performance_times_the_candidate_and_checks_its_output(tmp_path: Path, monkeypatch, capsys) -> None:
    timed = _step(_task_dir(tmp_path / "ok"), "performance", monkeypatch, capsys)
    assert timed.status is StepStatus.OK and all(c.time_ms and c.time_ms > 0 and c.correct for c in timed.cases)
    assert all(c.speedup and c.baseline_time_ms and c.unexplained_ms is not None for c in timed.cases)
    wrong = _step(
        _task_dir(tmp_path / "wrong", "def double(x):\n    return x + 1\n"), "performance", monkeypatch, capsys
    )
    assert wrong.status is StepStatus.FAILED and wrong.cases[0].time_ms is None
    assert "timed call" in (wrong.cases[0].message or "")
    reference = _step(
        _task_dir(tmp_path / "ref", "raise ValueError('never loaded')\n"),
        "performance",
        monkeypatch,
        capsys,
        AKA_TARGET="reference",
    )
    assert reference.status is StepStatus.OK and reference.cases[0].correct is None and reference.cases[0].time_ms


def test_a_case_that_cannot_be_timed_fairly_is_a_performance_error(tmp_path: Path, monkeypatch, capsys) -> None:
    """Every pair's baseline launched late (a baseline whose launch work outlasts the longest
    hold): not timed, not called cheating."""

    def late(*args: object, **kwargs: object) -> None:
        raise LateLaunchError("the baseline's host launches outlasted the GPU hold in every timed pair")

    monkeypatch.setattr(perf, "take_pairs", late)
    result = _step(_task_dir(tmp_path), "performance", monkeypatch, capsys)
    assert result.status is StepStatus.FAILED and result.failure_kind == "performance_error"
    assert result.cases[0].time_ms is None and "[performance_error]" in (result.cases[0].message or "")


def test_gpu_tasks_skip_on_cpu_but_still_compile(tmp_path: Path, monkeypatch, capsys) -> None:
    directory = _task_dir(tmp_path, fields="requires_gpu=True")
    for step in ("correctness", "performance"):
        result = _step(directory, step, monkeypatch, capsys)
        assert (result.status, result.message) == (StepStatus.SKIPPED, NO_GPU_MESSAGE)
    assert _step(directory, "compile", monkeypatch, capsys).status is StepStatus.OK


def test_build_errors_fail_and_missing_tools_skip_compile(tmp_path: Path, monkeypatch, capsys) -> None:
    error = "nvcc failed on k.cu: k.cu(3): error: expected a ';'"
    failing = _task_dir(tmp_path / "bad", build=f"raise BuildError({error!r})")
    failed = _step(failing, "compile", monkeypatch, capsys)
    assert failed.status is StepStatus.FAILED and "expected a ';'" in (failed.message or "")


def test_a_missing_tool_skips_only_where_the_judge_misses_it_too(tmp_path: Path, monkeypatch, capsys) -> None:
    """A worker's "missing tool" is the side's claim (its code can raise the error): a skip drops
    the reward, so it skips only a build on a machine where the judge finds no nvcc either."""
    claims = "raise ToolMissingError('nvcc is not on PATH')"
    missing = _task_dir(tmp_path / "missing", build=claims)
    monkeypatch.setattr(sides, "judge_has_nvcc", lambda: True)
    failed = _step(missing, "compile", monkeypatch, capsys)  # the judge has nvcc: the claim is false
    assert failed.status is StepStatus.FAILED and "nvcc is not on PATH" in (failed.message or "")
    monkeypatch.setattr(sides, "judge_has_nvcc", lambda: False)
    assert _step(missing, "compile", monkeypatch, capsys).status is StepStatus.SKIPPED
    # claimed by the candidate's import: past the compile step it is never a skip, nvcc or not
    at_import = _task_dir(tmp_path / "import", candidate=f"from aka.harness import ToolMissingError\n{claims}\n")
    for step in ("correctness", "performance"):
        result = _step(at_import, step, monkeypatch, capsys)
        assert result.status is StepStatus.FAILED, (step, result)
    monkeypatch.setattr(sides, "judge_has_nvcc", lambda: True)
    assert _step(at_import, "compile", monkeypatch, capsys).status is StepStatus.FAILED


def test_kernel_families_forbid_torch_compute(tmp_path: Path, monkeypatch, capsys) -> None:
    result = _step(
        _task_dir(tmp_path / "plain", family="triton2triton"),
        "correctness",
        monkeypatch,
        capsys,
        family="triton2triton",
    )
    assert result.status is StepStatus.FAILED and result.failure_kind == "policy_violation"
    assert "mul" in (result.message or "")
    allowed = _task_dir(tmp_path / "allowed", fields="allowed_torch_ops=frozenset({'mul'})", family="triton2triton")
    assert _step(allowed, "correctness", monkeypatch, capsys, family="triton2triton").status is StepStatus.OK


def test_run_task_exits_non_zero_on_harness_errors(tmp_path: Path, monkeypatch, capsys) -> None:
    directory = _task_dir(tmp_path, reference='(_ for _ in ()).throw(RuntimeError("the task\'s reference is broken"))')
    monkeypatch.chdir(directory)
    env = {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"}
    assert run_task(_load_task(directory), ["benchmark"], env) == 2
    assert run_task(_load_task(directory), ["correctness"], env) == 3
    assert capsys.readouterr().out == ""


def test_a_reference_that_is_not_finite_stops_the_step_as_the_tasks_fault(tmp_path: Path, monkeypatch, caplog) -> None:
    """Exit 2: the evaluator records an infrastructure error (the task's defect), never the candidate's."""
    directory = _task_dir(tmp_path, reference="x * float('nan')")
    monkeypatch.chdir(directory)
    assert run_task(_load_task(directory), ["correctness"], {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"}) == 2
    assert "not finite" in caplog.text


def test_each_worker_builds_into_its_own_cache(tmp_path: Path, monkeypatch, capfd) -> None:
    """The baseline's worker builds into the step's fresh cache, the candidate's into the
    evaluation's shared one, so nothing the candidate leaves there reaches the baseline."""
    private, shared = tmp_path / "private", tmp_path / "shared"
    for path in (private, shared):
        path.mkdir()
    env = {"TRITON_CACHE_DIR": str(private), "AKA_SHARED_CACHE_DIR": str(shared)}
    for step in ("performance", "correctness"):
        report, err = _run_step(_task_dir(tmp_path / step), step, monkeypatch, capfd, **env)
        assert report.status is StepStatus.OK
        loads = {tuple(line.split()[1:3]) for line in err.splitlines() if line.startswith("aka-load")}
        expected = {(".aka_baseline", str(private)), ("worker-candidate", str(shared))}
        assert loads == (expected if step == "performance" else {("worker-candidate", str(shared))}), err[-2000:]


REACHES_FOR_A_SOCKET = """import socket


def double(x):
    try:
        socket.socket(socket.AF_UNIX).connect({path!r})
        reached = "reached"
    except OSError as exc:
        reached = exc.errno
    left, right = socket.socketpair()  # a pair reaches nothing outside: still allowed
    left.send(b"x")
    print("aka-probe:", reached, right.recv(1), flush=True)
    return x * 2
"""


@pytest.mark.skipif(platform.machine() not in syscall_filter.MACHINES, reason="no filter for this machine")
def test_a_candidates_worker_makes_no_unix_socket(tmp_path: Path, monkeypatch, capfd) -> None:
    """A socket bound where no mask covers it (here none does: this judge runs without the step's
    confinement, as a socket bound after a step starts or reached under another name would be)
    still reaches its service from any network namespace: the worker, once its CUDA is up, makes
    no Unix socket at all (EACCES), and the judge reads both filters from its /proc."""
    import errno
    import socket

    path = tmp_path / "service.sock"
    service = socket.socket(socket.AF_UNIX)
    service.bind(str(path))
    service.listen()
    try:
        task = _task_dir(tmp_path / "task", candidate=REACHES_FOR_A_SOCKET.format(path=str(path)))
        report, err = _run_step(task, "correctness", monkeypatch, capfd)
    finally:
        service.close()
    assert report.status is StepStatus.OK, err[-2000:]
    probes = {line for line in err.splitlines() if line.startswith("aka-probe:")}
    assert probes == {f"aka-probe: {errno.EACCES} b'x'"}, err[-2000:]
    assert syscall_filter.SOCKETS_FEATURE in report.isolation, report.isolation


def test_workers_are_started_before_the_steps_turn(tmp_path: Path, monkeypatch, capfd, caplog) -> None:
    """Each worker answers once it has started (torch imported, CUDA up on a GPU) before the judge
    claims its turn: a turn on the device, which keeps other evaluations' timing waiting, is not
    spent starting processes."""
    caplog.set_level(logging.INFO, logger="aka.harness")
    report, _ = _run_step(_task_dir(tmp_path), "performance", monkeypatch, capfd)
    assert report.status is StepStatus.OK
    lines = [record.getMessage() for record in caplog.records]
    assert lines.index("workers started") < lines.index("the step's turn came"), lines
    assert not [line for line in lines if "did not start before the turn" in line], lines


def test_the_timing_budget_of_a_performance_step_can_be_set(tmp_path: Path, monkeypatch, capfd, caplog) -> None:
    """`AKA_TIMING_BUDGET_S` (passed through to steps by the evaluator) caps the step's seconds of
    pairs: fewer seconds, more evaluations a GPU-hour, wider intervals."""
    from aka.evaluation.step_spec import PASSED_THROUGH
    from aka.evaluation.wire import ENV_TIMING_BUDGET, timing_budget_s

    assert ENV_TIMING_BUDGET in PASSED_THROUGH
    caplog.set_level(logging.INFO, logger="aka.harness")
    monkeypatch.setenv(ENV_TIMING_BUDGET, "0.5")
    report, _ = _run_step(_task_dir(tmp_path), "performance", monkeypatch, capfd)
    assert report.status is StepStatus.OK
    assert any("pairs take at most 0.5 s" in record.getMessage() for record in caplog.records)
    for bad in ("0", "-2", "fast", "nan", "1e9"):
        monkeypatch.setenv(ENV_TIMING_BUDGET, bad)
        with pytest.raises(ValueError, match="AKA_TIMING_BUDGET_S=.*seconds above 0.*unset it"):
            timing_budget_s()
    monkeypatch.delenv(ENV_TIMING_BUDGET)
    assert timing_budget_s() is None


def test_a_worker_that_dies_before_the_turn_is_a_warning_there(tmp_path: Path, caplog) -> None:
    """A worker gone before the step's turn (killed here on purpose, once it has started) does not
    stop the judge from saying it is ready: it is found out where it was before, at its set-up."""
    from aka.harness.sides import StepWorkers

    caplog.set_level(logging.WARNING, logger="aka.harness")
    workers = StepWorkers.start(_ctx("compile"), {**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert workers.candidate is not None
        assert workers.candidate.request({"op": "ping"}, 60).ok  # started (and its own process group made)
        workers.candidate.kill()
        workers.wait_started(_ctx("compile"))
        said = [record.getMessage() for record in caplog.records]
        assert any("the candidate's worker did not start before the turn" in line for line in said), said
    finally:
        workers.close()


def test_a_worker_killed_in_its_first_moments_after_the_fork_dies(tmp_path: Path) -> None:
    """A signal sent before the worker has made its own process group (its first moments after
    the fork) used to reach nobody (`killpg` found no such group): a worker killed then lived on.
    The judge now waits for the group while the worker lives, then signals it."""
    from aka.harness.sides import StepWorkers

    for _ in range(3):
        workers = StepWorkers.start(_ctx("compile"), {**os.environ, "TMPDIR": str(tmp_path)})
        try:
            assert workers.candidate is not None
            workers.candidate.kill()  # at once, right after the fork
            assert not workers.candidate.alive()
        finally:
            workers.close()


def test_performance_spreads_each_side_over_separate_loads(tmp_path: Path, monkeypatch, capfd) -> None:
    """Each side is loaded `paired.loads` times (the baseline before any candidate load) and
    pair i calls load i mod loads on both sides; a load whose output is wrong fails the case."""
    counting = (
        "import builtins, sys, time\nbuiltins._n = getattr(builtins, '_n', -1) + 1\n_LOAD = builtins._n\n"
        "print(f'aka-loaded {{time.monotonic()}} {side} {{_LOAD}}', file=sys.stderr, flush=True)\n"
        "def double(x):\n    print(f'aka-call {side} {{_LOAD}}', file=sys.stderr, flush=True)\n"
        "    return x * ({wrong} if _LOAD == 2 else 2)\n"
    )
    fields = "paired=PairedConfig(loads=3)"

    def run(wrong: int) -> tuple[StepReport, list[list[str]], list[list[str]]]:
        directory = _task_dir(
            tmp_path / f"wrong{wrong}",
            counting.format(side="candidate", wrong=wrong),
            counting.format(side="baseline", wrong=2),
            fields=fields,
        )
        report, err = _run_step(directory, "performance", monkeypatch, capfd)
        return (
            report,
            [line.split()[1:] for line in err.splitlines() if line.startswith("aka-loaded")],
            [line.split()[1:] for line in err.splitlines() if line.startswith("aka-call")],
        )

    report, loads, calls = run(2)
    assert report.status is StepStatus.OK
    ordered = [side for _, side, _ in sorted(loads, key=lambda entry: float(entry[0]))]
    assert ordered == ["baseline"] * 3 + ["candidate"] * 3
    timed = [int(load) for side, load in calls if side == "candidate"]
    assert (
        sorted(set(timed)) == [0, 1, 2]
        and max(timed.count(s) for s in range(3)) - min(timed.count(s) for s in range(3)) <= 1
    )
    wrong, _, _ = run(3)
    assert wrong.status is StepStatus.FAILED and "n8_float32" in (wrong.message or "")


def test_a_worker_that_prints_without_end_fills_neither_the_step_log_nor_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker's output goes to a file of its own, at most `MAX_FILE_BYTES` long (beyond, its
    writes fail: the candidate's failure); the judge copies its last 32 KiB into the step log."""
    from aka.harness import spawn

    loud = "import sys\nsys.stderr.write('x' * 100_000 + '\\n')\nsys.stderr.flush()\n" + DOUBLE
    report, err = _run_step(_task_dir(tmp_path / "loud", loud), "correctness", monkeypatch, capsys)
    assert report.status is StepStatus.OK, report.message
    assert "the candidate's worker printed, the last 32768 of 1000" in err and len(err) < 40_000  # and its load line
    monkeypatch.setattr(spawn, "MAX_FILE_BYTES", 50_000)  # the forked worker inherits it
    report, err = _run_step(_task_dir(tmp_path / "louder", loud), "correctness", monkeypatch, capsys)
    assert report.status is StepStatus.FAILED and "File too large" in (report.message or ""), report.message


# --- CUDA builds ------------------------------------------------------------------------------


def test_cuda_arch_and_error_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AKA_CUDA_ARCH", raising=False)
    assert cuda_arch() == "sm_90"
    monkeypatch.setenv("AKA_CUDA_ARCH", "80")
    assert cuda_arch() == "sm_80"
    output = 'k.cu(3): error: identifier "foo" is undefined\nk.cu(4): error: x\nk.cu(5): error: y\n3 errors'
    assert first_error_lines(output) == 'k.cu(3): error: identifier "foo" is undefined | k.cu(4): error: x'
    assert first_error_lines("ld: something odd\n") == "ld: something odd"


def test_missing_nvcc_is_reported_as_a_missing_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissingError):
        compile_cuda_library(tmp_path / "k.cu")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_nvcc_errors_become_one_line_build_errors(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[0] = undefined_name; }\n")
    with pytest.raises(BuildError, match="undefined_name") as info:
        compile_cuda_library(source, build_dir=tmp_path / "build")
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "build").glob("*.so"))


def test_a_step_run_by_hand_exits_non_zero_when_it_fails(tmp_path: Path) -> None:
    """`python3 harness.py correctness` in a shell (an agent checking its work): the exit status
    and the last line say whether the step passed; the evaluator's protocol (a channel) is not
    involved, so its steps still exit 0 once they report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), env.get("PYTHONPATH", "")])
    env.update(AKA_DEVICE="cpu")

    def by_hand(directory: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "harness.py", "correctness"],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    wrong = by_hand(_task_dir(tmp_path / "wrong", "def double(x):\n    return x * 3\n"))
    assert wrong.returncode == 1, wrong.stderr[-2000:]
    assert json.loads(wrong.stdout)["status"] == "failed"
    assert wrong.stderr.strip().splitlines()[-1].startswith("correctness: FAIL (incorrect): 2 of 2 cases failed")
    right = by_hand(_task_dir(tmp_path / "right"))
    assert right.returncode == 0 and right.stderr.strip().splitlines()[-1] == "correctness: PASS (2 case(s))"


def test_a_step_run_by_hand_reads_the_family_from_config_yaml(tmp_path: Path) -> None:
    from aka.harness.task import family_from_config

    assert family_from_config(tmp_path) == "triton2triton"
    (tmp_path / "config.yaml").write_text("# e2e workload\ntask_type: e2e\nsource_file_path: [kernel.py]\n")
    assert family_from_config(tmp_path) == "e2e"


def test_a_separate_load_executes_the_sources_anew(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "kernel.py").write_text(
        "import builtins\nbuiltins._aka_test_runs = "
        "getattr(builtins, '_aka_test_runs', 0) + 1\nRUN = builtins._aka_test_runs\n"
    )
    monkeypatch.chdir(tmp_path)
    import builtins

    monkeypatch.setattr(builtins, "_aka_test_runs", 0, raising=False)
    first = import_candidate("kernel")
    assert import_candidate("kernel") is first and first.RUN == 1
    with separate_load(1):
        second = import_candidate("kernel")
    with separate_load(2):
        third = import_candidate("kernel")
    assert (second.RUN, third.RUN) == (2, 3)
    assert {first.__name__, second.__name__, third.__name__} == {"kernel", "kernel__aka_load1", "kernel__aka_load2"}
    assert import_candidate("kernel") is first  # outside: the shared load again
    baseline = tmp_path / ".aka_baseline"
    baseline.mkdir()
    shutil.copy(tmp_path / "kernel.py", baseline / "kernel.py")
    with separate_load(1):
        assert import_candidate("kernel", baseline).__name__.startswith(BASELINE_MODULE_PREFIX)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_a_separate_load_of_a_cuda_library_is_a_new_copy(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text('static int count = 0;\nextern "C" int bump() { return ++count; }\n')
    library = compile_cuda_library(source, build_dir=tmp_path / "build")
    assert load_cuda_library(library).bump() == 1
    assert load_cuda_library(library).bump() == 2  # the same path: the handle already loaded
    with separate_load(1):
        assert load_cuda_library(library).bump() == 1  # a copy: its own code and statics
    assert (tmp_path / "build" / f"{library.stem}-load1.so").is_file()


def test_launches_are_counted_in_every_load_of_the_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from aka.harness import guard
    from aka.harness.guard import LaunchCounter

    class FakeJit:  # the shape of triton's JITFunction: `fn` and `run`, taken as Triton's own here
        def __init__(self) -> None:
            self.fn = lambda: None

        def run(self, *args: object, grid: object, warmup: bool = False) -> str:
            dims = grid({"BLOCK": 4}) if callable(grid) else grid
            return "compiled" if warmup else f"launched {dims}"

    monkeypatch.setitem(guard._TRITON_RUN, FakeJit, FakeJit.run)

    loads = [types.ModuleType(f"kernel{n}") for n in range(3)]
    for module in loads:
        module.k = FakeJit()  # type: ignore[attr-defined]
    alias = types.ModuleType("helper")
    alias.k = loads[0].k  # type: ignore[attr-defined]  # the same function seen twice: wrapped once
    counter = LaunchCounter()
    counter.instrument([*loads, alias], ["k", "missing"])
    assert counter.instrumented == {"k"}
    assert [module.k.run(grid=(1,)) for module in loads] == ["launched (1,)"] * 3  # type: ignore[attr-defined]
    assert counter.total() == 3
    counter.suppressed = True  # the ablation: launched as any launch, on no programs, not counted
    assert loads[0].k.run(grid=(1, 2)) == "launched (0, 0)"  # type: ignore[attr-defined]
    asked: list[object] = []

    def grid(meta: object) -> tuple[int]:
        asked.append(meta)
        return (3,)

    assert loads[1].k.run(grid=grid) == "launched (0,)"  # type: ignore[attr-defined]
    assert asked == [{"BLOCK": 4}]  # the candidate's grid function asked, as at any launch
    assert counter.total() == 3


def test_only_tritons_own_jit_objects_are_counted_through_tritons_own_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target that is an object of the candidate's own with a `.fn` and a `run` is no kernel
    (a red team's did the work in numpy and raised on the suppressed launch's empty grid, so the
    ablation read nothing: red team F, session 54); a `run` replaced on Triton's class after the
    harness took it is never what a counted or suppressed launch calls."""
    import types

    from aka.harness import guard
    from aka.harness.guard import LaunchCounter

    class Launcher:
        def __init__(self) -> None:
            self.fn = lambda: None

        def run(self, *args: object, grid: object, warmup: bool = False) -> str:
            return "the candidate's own launch"

    class Jit(Launcher):  # stands for Triton's JIT class, taken before candidate code
        def run(self, *args: object, grid: object, warmup: bool = False) -> str:
            dims = grid({}) if callable(grid) else grid
            return f"triton launched {dims}"

    class Subclassed(Jit):  # Triton's class with the candidate's own launch: no kernel either
        def run(self, *args: object, grid: object, warmup: bool = False) -> str:
            return "the candidate's own launch"

    monkeypatch.setitem(guard._TRITON_RUN, Jit, Jit.run)
    module = types.ModuleType("kernel")
    module.fake, module.real, module.sub = Launcher(), Jit(), Subclassed()  # type: ignore[attr-defined]
    module.wrapped = types.SimpleNamespace(fn=types.SimpleNamespace(fn=module.real))  # type: ignore[attr-defined]
    counter = LaunchCounter()
    counter.instrument([module], ["fake", "sub", "wrapped"])
    assert counter.instrumented == {"wrapped"}
    monkeypatch.setattr(Jit, "run", Launcher.run)  # the candidate's code replaces Triton's launch
    counter.suppressed = True
    assert module.real.run(grid=(4,)) == "triton launched (0,)"  # type: ignore[attr-defined]
    counter.suppressed = False
    assert module.real.run(grid=(4,)) == "triton launched (4,)" and counter.total() == 1  # type: ignore[attr-defined]


def test_a_launch_that_runs_no_program_is_not_counted(tmp_path: Path, monkeypatch) -> None:
    """An empty grid, a grid function that returns one, and a warm-up compile run no program: a
    red team's target kernel launched on `(0,)` beside work done elsewhere (session 51)."""
    import importlib.util

    import torch
    import triton

    from aka.harness.guard import LaunchCounter, remember_triton_launchers

    (tmp_path / "kernels_under_count.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) + 1, mask=offsets < n)\n"
    )
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read as the kernel is decorated
    spec = importlib.util.spec_from_file_location("kernels_under_count", tmp_path / "kernels_under_count.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    remember_triton_launchers()
    counter = LaunchCounter()
    counter.instrument([module], ["k"])
    assert counter.instrumented == {"k"}  # the interpreter's JIT class is Triton's own
    x = torch.zeros(8)
    module.k[(0,)](x, 8, BLOCK=8)
    module.k[(1, 0)](x, 8, BLOCK=8)
    module.k[lambda meta: (0,)](x, 8, BLOCK=8)
    module.k.run(x, 8, BLOCK=8, grid=(1,), warmup=True)  # compiles, runs nothing
    assert counter.total() == 0 and x.sum().item() == 0.0  # nothing ran, nothing counted
    module.k[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, 8, BLOCK=8)
    module.k[(1,)](x, 8, BLOCK=8)
    assert counter.total() == 2 and x.tolist() == [2.0] * 8


def test_only_the_baseline_copy_imports_under_the_baseline_prefix(tmp_path: Path, monkeypatch) -> None:
    """A repository task's package lives in a folder of the evaluation directory: still the
    candidate (its kernels get the launch counter); `.aka_baseline/` and outside dirs are not."""
    for folder in ("pkg", ".aka_baseline/pkg"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "ops.py").write_text("VALUE = 1\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "ops.py").write_text("VALUE = 2\n")
    monkeypatch.chdir(tmp_path)
    candidate = import_candidate("ops", tmp_path / "pkg")
    assert candidate.__name__.startswith("_aka_candidate_ops__pkg") and candidate.VALUE == 1
    baseline = import_candidate("ops", tmp_path / ".aka_baseline" / "pkg")
    assert baseline.__name__.startswith(f"{BASELINE_MODULE_PREFIX}ops__pkg") and baseline.VALUE == 1
    elsewhere = import_candidate("ops", outside)
    assert elsewhere.__name__.startswith(f"{BASELINE_MODULE_PREFIX}ops__pkg") and elsewhere.VALUE == 2
    assert elsewhere.__name__ != baseline.__name__  # each folder its own package
    from aka.harness.guard import modules_under

    counted = [m.__name__ for m in modules_under(tmp_path) if not m.__name__.startswith(BASELINE_MODULE_PREFIX)]
    assert counted == [candidate.__name__]  # what make_verifier instruments


def test_a_folders_module_imports_its_neighbours_relatively(tmp_path: Path, monkeypatch) -> None:
    """A repository's module may use `from ._x import y` and `from . import z` (its package's
    `__init__.py` run): an honest candidate that did failed "no known parent package" (red team
    F, session 54). Each separate load gets its own neighbours; each folder its own package."""
    import warnings

    from aka.harness.candidates import separate_load

    for folder, value in (("pkg", 1), ("other/pkg", 2)):
        package = tmp_path / folder
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"FROM_INIT = {value}\n")
        (package / "_build_info.py").write_text(f"COMMIT = 'c{value}'\n")
        (package / "ops.py").write_text(
            "from ._build_info import COMMIT\nfrom . import FROM_INIT, _build_info\nVALUE = (COMMIT, FROM_INIT)\n"
        )
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = import_candidate("ops", tmp_path / "pkg")
        with separate_load(1):
            again = import_candidate("ops", tmp_path / "pkg")
        other = import_candidate("ops", tmp_path / "other" / "pkg")
    assert first.VALUE == again.VALUE == ("c1", 1) and other.VALUE == ("c2", 2)
    assert first._build_info is not again._build_info  # a separate load's neighbours are its own
    assert import_candidate("ops", tmp_path / "pkg") is first


def test_an_ablation_never_uses_inputs_whose_answer_is_zeros() -> None:
    """Cross-entropy's last row is always ignored (loss 0): with one row, or two both ignored, the
    right answer is all zeros, and an honest kernel that leaves a zeroed output alone there was
    judged a `policy_violation` by the ablation (the fresh clone's suite test, session 51). Such
    inputs are drawn again, and an ablation that can only get them is not made."""
    from aka.harness.cases import Case
    from aka.harness.checks import ABLATION_DRAWS, ablation_inputs
    from aka.harness.describe import load_kernel_task
    from aka.harness.task import StepContext

    task = load_kernel_task(Path(__file__).resolve().parents[2] / "tasks" / "torch2triton" / "llm" / "cross_entropy")
    assert task is not None
    ctx = StepContext("correctness", torch.device("cpu"), "candidate", "ci", None)
    one_row = Case.make(rows=1, vocab=64, dtype="float32")
    assert ablation_inputs(task, ctx, one_row, list(range(ABLATION_DRAWS))) is None
    drawn = ablation_inputs(task, ctx, Case.make(rows=64, vocab=64, dtype="float32"), [1, 2])
    assert drawn is not None and float(drawn[1].abs().max()) > 0  # type: ignore[union-attr]


def test_an_ablation_never_uses_inputs_whose_answer_is_empty(monkeypatch) -> None:
    """An empty output is right whoever computed it: such an ablation call could not tell."""
    from aka.harness import checks
    from aka.harness.cases import Case
    from aka.harness.task import StepContext

    monkeypatch.setattr(checks, "reference_for", lambda *args: ((torch.ones(3),), (torch.empty(0), torch.empty(0, 4))))
    ctx = StepContext("correctness", torch.device("cpu"), "candidate", "ci", None)
    assert checks.ablation_inputs(None, ctx, Case.make(n=3, dtype="float32"), [1, 2, 3]) is None  # type: ignore[arg-type]


def test_a_task_can_forbid_the_copies_it_is_about(monkeypatch) -> None:
    """Where a copy is the whole work (a transpose), `x.t().contiguous()` beside a kernel that
    copied its result once more passed (red team, session 51): the task forbids the copies.
    Under Triton's interpreter, whose launches copy their tensors back, `copy_` stays allowed."""
    from aka.harness.guard import ForbiddenOps

    x = torch.ones(3, 2)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with ForbiddenOps(["-clone", "-copy_"]) as mode:
        x.t().contiguous()
        torch.empty(2, 3).copy_(x.t())
    assert set(mode.violations) == {"clone", "copy_"}
    with ForbiddenOps() as mode:
        x.t().contiguous()
    assert not mode.violations  # allowed everywhere else
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with ForbiddenOps(["-clone", "-copy_"]) as mode:
        torch.empty(2, 3).copy_(x.t())
    assert not mode.violations


def test_allocating_and_reshaping_in_place_are_not_computing() -> None:
    """An honest moe_align_block_size kernel whose outputs came from `topk_ids.new_full` and
    `new_zeros` was judged a `policy_violation` (red team, session 52); in-place views likewise.
    Computing stays one."""
    from aka.harness.guard import ForbiddenOps

    x = torch.ones(4, 2)
    with ForbiddenOps() as mode:
        x.new_zeros(3), x.new_ones(3), x.new_full((3,), 7), x.new_empty(3)
        y = torch.empty(4, 2)
        y.unsqueeze_(0).squeeze_(0).t_().transpose_(0, 1)
        y.resize_as_(x).diagonal()
    assert not mode.violations, mode.violations
    with ForbiddenOps() as mode:
        x.sum(), x * 2
    assert set(mode.violations) == {"sum", "mul"}


def test_an_autotuned_kernel_runs_under_the_interpreter(tmp_path: Path, monkeypatch) -> None:
    """The autotuner's benchmarker asks for a GPU driver under Triton's interpreter ("0 active
    drivers"): an honest autotuned kernel failed on the CPU (red team, session 51). Its configs
    are taken untimed there, the first kept, and the kernel computes."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (tmp_path / "tuned.py").write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK': 8}), triton.Config({'BLOCK': 16})], key=['n'])\n"
        "@triton.jit\n"
        "def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)\n\n\n"
        "def run(x):\n"
        "    out = torch.empty_like(x)\n"
        "    double[lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']),)](x, out, x.numel())\n"
        "    return out\n"
    )
    module = import_candidate("tuned", tmp_path)
    x = torch.arange(20, dtype=torch.float32)
    assert torch.equal(module.run(x), 2 * x)
    assert module.double.best_config.kwargs == {"BLOCK": 8}  # untimed: the first


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn])
def test_the_fast_comparison_agrees_with_the_full_tally(dtype: torch.dtype) -> None:
    """`compare_tensor` accepts only through its one-pass check (`_all_within`), which must say
    yes exactly where the full tally finds nothing wrong: values near the tolerance's edge, NaN and
    Inf where the reference has them (matched or not), a float64 output left unchanged."""
    from aka.harness.compare import Tolerance, _tally, compare_tensor

    generator = torch.Generator().manual_seed(7)
    tolerance = Tolerance(1e-3, 1e-2)
    for trial in range(60):
        expected = (torch.randn(513, generator=generator, dtype=torch.float64) * 3).to(dtype)
        scale = [0.0, 1e-4, 5e-3, 2e-2, 1.0][trial % 5]
        got = expected.to(torch.float64) * (1 + scale * torch.randn(513, generator=generator, dtype=torch.float64))
        got = got.to(dtype)
        if trial % 3 == 1 and dtype != torch.float8_e4m3fn:
            expected[5], got[5] = float("nan"), float("nan")  # matched NaN: only the full tally accepts it
            expected[9], got[9] = float("inf"), float("inf") if trial % 2 else float("-inf")
        if trial % 7 == 3:
            got[100] = float("nan")
        before = got.clone()
        verdict = compare_tensor(got, expected, tolerance)
        tally = _tally(got, expected, tolerance)
        assert verdict.correct is (tally.nan == tally.inf == tally.bad == 0), (trial, verdict.message)
        if verdict.correct:
            assert verdict.max_abs_error == pytest.approx(tally.max_abs, rel=1e-12, abs=0.0)
        assert torch.equal(got.to(torch.float64).nan_to_num(), before.to(torch.float64).nan_to_num())
