"""`aka validate`: the mutations themselves (in-process), the static scan, the probe, and the
validator end to end through the real evaluator on a suite task and on deliberately weak tasks.

The end-to-end tests run a few mutants each (every one is a full evaluation on the CPU); the
whole catalogue is exercised in-process by `test_every_mutation_is_wrong_beyond_tolerance`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import processes_under

from aka.authoring.task_tools import scaffold_task
from aka.config.tasks import load_task, select_tasks
from aka.dashboard.validation import find_validation
from aka.device import detect_device
from aka.errors import AkaError
from aka.harness.compare import compare_outputs, tolerance_for
from aka.validation import mutant_runtime
from aka.validation.checks import reference_check, run_probe, self_containment_check
from aka.validation.mutants import (
    MUTANT_NAMES,
    TensorShape,
    applicable,
    entry_functions,
    harness_file,
    mutant_source,
)
from aka.validation.report import MutantResult, MutantVerdict, Status, TaskValidation, read_report, write_report
from aka.validation.static_scan import scan_python
from aka.validation.validate import (
    ValidationOptions,
    _earlier_report,
    _mutation_check,
    load_exceptions,
    run_mutants,
    self_timed,
    validate_tasks,
)

REPO = Path(__file__).resolve().parents[2]
TOLERANCES = {"float32": (1e-5, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1.6e-2)}


def _scale_task(root: Path, name: str = "triton2triton/mine/scale", patch: tuple[str, str] | None = None) -> Path:
    task_dir = scaffold_task(root, name)
    if patch is not None:
        harness = task_dir / "harness.py"
        text = harness.read_text()
        assert patch[0] in text
        harness.write_text(text.replace(*patch))
    return task_dir


@pytest.mark.parametrize("name", [n for n in mutant_runtime.MUTATIONS])
def test_every_mutation_is_wrong_beyond_tolerance(name: str) -> None:
    """Each output mutation, on a 2-D float32 output, is rejected by the judge's own comparison
    (or, for wrong_strides, keeps the values but loses contiguity, which the judge rejects)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn((6, 5), generator=generator)
    expected = x * 2
    got = mutant_runtime.corrupt(name, expected.clone(), [x], TOLERANCES)
    if name == "wrong_strides":
        assert torch.equal(got, expected) and not got.is_contiguous()
        return
    if got.dtype != expected.dtype:
        assert name == "wrong_dtype"
        return
    verdict = compare_outputs(got, expected, {"float32": tolerance_for(torch.float32)})
    assert not verdict.correct, name


def test_wrapped_entry_mutates_only_the_outermost_call_and_stale_returns_the_previous_output() -> None:
    source = (
        "import torch\n\n@triton.jit\ndef scale_kernel(x):\n    pass\n\n"
        "def inner(x):\n    return x * 2\n\ndef scale(x):\n    return inner(x)\n\n"
        "def _private(x):\n    return x\n"
    )
    assert entry_functions(source) == ["inner", "scale"]
    namespace: dict[str, object] = {}
    plain = source.replace("@triton.jit\n", "")
    exec(compile(mutant_source(plain, ["inner", "scale"], "perturb_one", TOLERANCES), "kernel.py", "exec"), namespace)
    x = torch.arange(5, dtype=torch.float32)
    out = namespace["scale"](x)  # type: ignore[operator]
    assert (out != x * 2).sum() == 1  # perturbed once, not twice
    stale: dict[str, object] = {}
    exec(compile(mutant_source(plain, ["scale"], "stale", TOLERANCES), "k.py", "exec"), stale)
    first = stale["scale"](x)  # type: ignore[operator]
    assert torch.equal(first, x * 2)
    assert torch.equal(stale["scale"](x + 1), x * 2)  # type: ignore[operator]


def test_applicability_gives_reasons() -> None:
    vector, scalar = TensorShape((100,), "float32"), TensorShape((), "float32")
    assert applicable("transposed", [vector], [vector]) == "no output with two dimensions of size > 1"
    assert applicable("transposed", [TensorShape((4, 3), "float32")], [vector]) is None
    assert applicable("beyond_tolerance", [TensorShape((4,), "int64")], [vector]) is not None
    assert applicable("off_by_one", [scalar], [vector]) == "every output has a single element"
    assert applicable("zeros", [scalar], []) is None
    assert set(MUTANT_NAMES) >= {
        "zeros",
        "ones",
        "constant",
        "input_copy",
        "perturb_one",
        "beyond_tolerance",
        "skip_last_block",
        "wrong_dtype",
        "transposed",
        "wrong_strides",
        "stale",
        "off_by_one",
        "lower_precision",
    }


def test_static_scan_finds_network_absolute_paths_and_climbs(tasks_root: Path) -> None:
    text = (
        '"""Docs may say /usr/local/cuda."""\nimport socket\nfrom pathlib import Path\n'
        'DATA = "/data/weights.bin"\nUP = Path(__file__).parents[2] / "x"\nREL = "../other/task.py"\n'
        'URL = "https://example.com/w.pt"\nOK = "kernel.py"\n'
    )
    problems = scan_python(text, "harness.py")
    assert [p.split(":")[1] for p in problems] == ["2", "4", "5", "6", "7"]
    task_dir = _scale_task(tasks_root, patch=("SIZES = (", 'DATA_DIR = "/opt/data"\nSIZES = ('))
    check = self_containment_check(load_task(tasks_root, task_dir))
    assert check.status is Status.FAIL and "harness.py" in check.message and "/opt/data" in check.message
    clean = self_containment_check(select_tasks(REPO / "tasks", ["triton2triton/basic/gelu"])[0])
    assert clean.status is Status.PASS


def test_probe_fails_a_nondeterministic_reference(tasks_root: Path, tmp_path: Path) -> None:
    task_dir = _scale_task(tasks_root, patch=("return x * 2", "return x * 2 + torch.rand(x.shape) * 1e-3"))
    probe = run_probe(load_task(tasks_root, task_dir), tmp_path, detect_device(), heldout=False)
    check = reference_check(probe)
    assert check.status is Status.FAIL
    assert "the reference gave different outputs on the same inputs" in check.message
    assert check.evidence[0].exit_code == 0 and "aka.validation.probe" in check.evidence[0].command


def test_probe_fails_a_reference_that_zeros_match(tasks_root: Path, tmp_path: Path) -> None:
    """Every value within tolerance of 0 on every input set of a case: the judge would stop on it
    as the task's defect, and the validator says so first."""
    task_dir = _scale_task(tasks_root, patch=("return x * 2", "return x * 1e-9"))
    probe = run_probe(load_task(tasks_root, task_dir), tmp_path, detect_device(), heldout=False)
    check = reference_check(probe)
    assert check.status is Status.FAIL
    assert "an all-zeros output matches the reference on every input set" in check.message


@pytest.mark.slow
def test_suite_task_passes_with_every_mutant_killed(tmp_path: Path) -> None:
    """The real GELU task: every check passes (A/A is a WARN on the CPU) and its mutants die."""
    out = tmp_path / "out"
    summary = validate_tasks(
        REPO / "tasks",
        ["triton2triton/basic/gelu"],
        out,
        detect_device(),
        ValidationOptions(
            mutants=("beyond_tolerance", "stale"), solutions=REPO / "solutions" / "examples", mutants_at_once=2
        ),
        lambda _: None,
    )
    report = read_report(out / "triton2triton/basic/gelu/validation_report.yaml")
    statuses = {c.name: c.status for c in report.checks}
    assert statuses.pop("aa_timing") is Status.WARN
    assert set(statuses) == {
        "schema",
        "files_and_symbols",
        "self_containment",
        "reference_deterministic",
        "baseline_correct",
        "heldout_cases",
        "hang",
        "mutation",
    }
    assert set(statuses.values()) == {Status.PASS}, report.checks
    assert report.mutation is not None and report.mutation.score == 1.0
    assert [m.verdict for m in report.mutation.mutants] == [MutantVerdict.KILLED] * 2
    assert all(m.failure_kind == "incorrect" for m in report.mutation.mutants)
    assert summary.tasks[0].mutation_score == 1.0 and summary.overall_status is Status.WARN
    dashboard_summary, dashboard_reports = find_validation(out)
    assert dashboard_summary is not None and dashboard_summary.overall_status.value == "WARN"
    assert [r.subject for r in dashboard_reports] == ["triton2triton/basic/gelu"]


def test_mutants_through_the_harness_wrap_what_load_candidate_returns(tasks_root: Path, tmp_path: Path) -> None:
    """The route CUDA sources take (no Python function to wrap), run here on a Triton task: a copy
    of the task whose harness mutates the loaded candidate. Each mutant is killed by the real
    correctness step; the pristine task is untouched."""
    task_dir = _scale_task(tasks_root)
    pristine = (task_dir / "harness.py").read_text()
    assert harness_file(task_dir, "python3 harness.py correctness") == (task_dir / "harness.py", "TASK")
    task = load_task(tasks_root, task_dir)
    probe = run_probe(task, tmp_path / "probe", detect_device(), heldout=False)
    check, score = run_mutants(
        task,
        task_dir,
        probe,
        tmp_path,
        detect_device(),
        ("zeros", "stale"),
        lambda _: None,
        through_harness=True,
        at_once=2,  # side by side, each from a task copy of its own
    )
    assert check.status is Status.PASS, check.message
    assert [m.verdict for m in score.mutants] == [MutantVerdict.KILLED] * 2, score.mutants
    assert all("wrapped load_candidate" in m.message and m.failure_kind == "incorrect" for m in score.mutants)
    copied = (tmp_path / "mutant_zeros" / "task" / "harness.py").read_text()
    assert copied.startswith(pristine.rstrip("\n")) and "mutate_task(TASK, 'zeros'" in copied
    assert (task_dir / "harness.py").read_text() == pristine


def test_cuda_mutants_are_not_run_without_a_gpu(tmp_path: Path) -> None:
    if detect_device().is_gpu:
        pytest.skip("a GPU is here: the CUDA mutants run (aka validate on the device, docs/benchmarks)")
    task = select_tasks(REPO / "tasks", ["cuda2cuda/llm/row_sum"])[0]
    probe = run_probe(task, tmp_path / "probe", detect_device(), heldout=False)
    check, score = run_mutants(task, task.directory, probe, tmp_path, detect_device(), ("zeros",), lambda _: None)
    assert score.mutants[0].verdict is MutantVerdict.NOT_RUN
    assert "needs a GPU: CUDA sources run only on the device" in score.mutants[0].message
    assert check.status is Status.WARN


@pytest.mark.slow
def test_a_task_with_a_huge_tolerance_fails_naming_the_surviving_mutant(tasks_root: Path, tmp_path: Path) -> None:
    """rtol 0.5 on float32 lets a bfloat16 computation pass: the lower_precision mutant survives,
    the one a transposed 1-D output cannot be is recorded as not applicable."""
    loose = "    tolerances={'float32': Tolerance(0.0, 0.5)},\n    min_bytes="
    _scale_task(tasks_root, patch=("    min_bytes=", loose))
    harness = tasks_root / "triton2triton/mine/scale/harness.py"
    harness.write_text(harness.read_text().replace("import Case,", "import Tolerance, Case,"))
    config = tasks_root / "triton2triton/mine/scale/config.yaml"
    config.write_text(config.read_text().replace("hidden_files: [heldout.py]", "hidden_files: []"))
    out = tmp_path / "out"
    summary = validate_tasks(
        tasks_root,
        ["triton2triton/mine/scale"],
        out,
        detect_device(),
        ValidationOptions(mutants=("lower_precision", "transposed")),
        lambda _: None,
    )
    report = read_report(out / "triton2triton/mine/scale/validation_report.yaml")
    mutation = next(c for c in report.checks if c.name == "mutation")
    assert report.overall_status is Status.FAIL and mutation.status is Status.FAIL
    assert "surviving mutant(s): lower_precision" in mutation.message
    assert report.mutation is not None and report.mutation.score == 0.0
    verdicts = {m.name: m.verdict for m in report.mutation.mutants}
    assert verdicts == {"lower_precision": MutantVerdict.SURVIVED, "transposed": MutantVerdict.NOT_APPLICABLE}
    assert summary.tasks[0].surviving_mutants == ["lower_precision"]
    assert summary.tasks[0].failed_checks == ["mutation"]
    shutil.rmtree(out)


def test_cli_fails_a_task_whose_config_does_not_load(tasks_root: Path, tmp_path: Path) -> None:
    """The real CLI: among the tasks of a family, one whose config does not load is a schema FAIL
    (exit 1), reported and summarized without running anything."""
    broken = tasks_root / "triton2triton/mine/broken"
    broken.mkdir(parents=True)
    (broken / "config.yaml").write_text("task_type: triton2triton\nsource_file_path: 5\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aka.cli",
            "validate",
            "triton2triton",
            "--tasks-root",
            str(tasks_root),
            "--output",
            str(tmp_path / "out"),
            "--no-mutants",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    summary = yaml.safe_load((tmp_path / "out" / "validation_summary.yaml").read_text())
    assert summary["overall_status"] == "FAIL" and summary["counts"]["FAIL"] == 1
    assert summary["tasks"][0]["failed_checks"] == ["schema"]
    assert "validate triton2triton" in summary["command"]
    report = read_report(tmp_path / "out" / "triton2triton/mine/broken/validation_report.yaml")
    assert "config.yaml: field" in report.checks[0].message


def test_mutation_score_and_recorded_exceptions(tmp_path: Path) -> None:
    def result(name: str, verdict: MutantVerdict) -> MutantResult:
        return MutantResult(name=name, description=name, verdict=verdict)

    check, score = _mutation_check(
        [
            result("zeros", MutantVerdict.KILLED),
            result("stale", MutantVerdict.SURVIVED),
            result("transposed", MutantVerdict.NOT_APPLICABLE),
        ]
    )
    assert check.status is Status.FAIL and "surviving mutant(s): stale" in check.message
    assert (score.killed, score.survived, score.not_applicable, score.score) == (1, 1, 1, 0.5)
    check, score = _mutation_check([result("zeros", MutantVerdict.KILLED), result("stale", MutantVerdict.EXCEPTED)])
    assert check.status is Status.WARN and score.score == 1.0 and score.excepted == 1
    (tmp_path / "validation_exceptions.yaml").write_text("a/b/c:\n  lower_precision: fp16 GEMM tolerance\n")
    exceptions = load_exceptions(tmp_path)
    assert exceptions.reason("a/b/c", "lower_precision") == "fp16 GEMM tolerance"
    assert exceptions.reason("a/b/c", "zeros") is None
    (tmp_path / "validation_exceptions.yaml").write_text("a/b/c: [1, 2]\n")
    with pytest.raises(AkaError, match="validation_exceptions.yaml"):
        load_exceptions(tmp_path)


@pytest.mark.parametrize("parallel", [1, 2, "mutants"])
def test_sigterm_stops_the_validator_and_leaves_no_scratch_or_process(tmp_path: Path, parallel: int | str) -> None:
    """Also with tasks validated side by side, or a task's mutants: what is in flight stops,
    nothing more starts."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # each step started cold (seconds a step), so SIGTERM finds the work in flight: with warm steps a
    # task without mutants could end within the 2 s below (a fresh clone's run wrote gelu's report)
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(REPO / "src"), "AKA_WARM_STEPS": "0"}
    command = [sys.executable, "-m", "aka.cli", "validate", "triton2triton/basic/gelu"]
    if parallel == "mutants":
        command += [arg for name in MUTANT_NAMES[:6] for arg in ("--mutant", name)] + ["--mutants-at-once", "2"]
    else:
        command += ["--no-mutants"]
    if parallel == 2:
        command += ["triton2triton/llm/softmax", "--parallel", "2"]
    errors = (tmp_path / "stderr.log").open("w")
    proc = subprocess.Popen(
        [*command, "--output", str(tmp_path / "out")],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors,
        start_new_session=True,
    )
    errors.close()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(scratch.glob("aka-validate-*/*")):
        time.sleep(0.2)
    assert list(scratch.glob("aka-validate-*")), "the validator never started a task"
    if parallel == 2:
        while time.monotonic() < deadline and len(list(scratch.glob("aka-validate-*"))) < parallel:
            time.sleep(0.2)
        assert len(list(scratch.glob("aka-validate-*"))) == parallel, "the tasks did not run side by side"
    if parallel == "mutants":
        while time.monotonic() < deadline and len(list(scratch.glob("aka-validate-*/mutant_*"))) < 2:
            time.sleep(0.1)
        assert len(list(scratch.glob("aka-validate-*/mutant_*"))) >= 2, "the mutants did not run side by side"
        assert proc.poll() is None, "the validation ended before SIGTERM"
    else:
        time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM, (tmp_path / "stderr.log").read_text()[-3000:]
    assert not list(scratch.glob("aka-validate-*")), "the scratch folder outlived SIGTERM"
    left = processes_under(tmp_path) + processes_under(REPO / "tasks")
    assert left == [], f"{left}\n{(tmp_path / 'stderr.log').read_text()[-3000:]}"
    # the tasks in flight had their steps killed: a report would keep that as verdicts, and --resume keep it
    assert not list((tmp_path / "out").rglob("validation_report.yaml"))


def test_resume_keeps_the_reports_an_earlier_validation_left_on_this_device(tasks_root: Path, tmp_path: Path) -> None:
    """A cut validation goes on: a task with a readable report from this device is kept as it is
    (nothing runs for it); a report from another device is not."""
    _scale_task(tasks_root)
    task = load_task(tasks_root, tasks_root / "triton2triton/mine/scale")
    out, device = tmp_path / "out", detect_device()
    earlier = TaskValidation(
        task_name=task.name,
        family=task.family,
        task_dir=str(task.directory),
        device=device.name,
        overall_status=Status.WARN,
        checks=[],
    )
    path = write_report(out / task.name, earlier)
    said: list[str] = []
    summary = validate_tasks(
        tasks_root, [task.name], out, device, ValidationOptions(mutants=()), said.append, resume=True
    )
    assert any("kept" in line for line in said), said
    assert read_report(path) == earlier
    assert [row.task_name for row in summary.tasks] == [task.name] and summary.overall_status is Status.WARN
    other = earlier.model_copy(update={"device": "another device"})
    write_report(out / task.name, other)
    assert _earlier_report(out, task, device) is None


def test_parallel_validation_runs_tasks_side_by_side_and_keeps_the_selectors_order(
    tasks_root: Path, tmp_path: Path
) -> None:
    """`--parallel 2`: both tasks validated at once, each line said with its task's name, the
    summary in the selectors' order whichever finished first."""
    names = ["triton2triton/mine/scale", "triton2triton/mine/twice"]
    for name in names:
        _scale_task(tasks_root, name)
    said: list[str] = []
    out = tmp_path / "out"
    summary = validate_tasks(
        tasks_root, list(reversed(names)), out, detect_device(), ValidationOptions(mutants=()), said.append, parallel=2
    )
    assert [row.task_name for row in summary.tasks] == list(reversed(names))
    for name in names:
        assert read_report(out / name / "validation_report.yaml").overall_status is not Status.FAIL
        assert any(line.startswith(f"[{name}]") and "probe" in line for line in said), said
    starts = [said.index(f"[{name}] {name}") for name in names]
    firsts_done = min(i for i, line in enumerate(said) if line.endswith(" s)"))
    assert max(starts) < firsts_done, "the second task started only after the first had finished"
    assert processes_under(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "solution"),
    [("torch2triton/basic/softmax", None), ("instruction2triton/llm/flash_attention_causal", "solutions/examples")],
)
def test_the_a_a_reading_times_the_passing_sources_against_themselves(
    tmp_path: Path, name: str, solution: str | None
) -> None:
    """The validator's A/A on the H200 timed the untouched sources (or a skeleton's solution)
    against the task's PyTorch reference: readings of 0.44x to 29x, none of them A/A. Now its copy
    of the task makes the passing sources its baseline (`baseline: source`), so an evaluation of
    them there times them against themselves; the task's own folder is untouched."""
    task = load_task(REPO / "tasks", REPO / "tasks" / name)
    sources = REPO / solution / name if solution else task.directory
    assert task.config.baseline_source.value == "reference"
    before = {p: p.read_bytes() for p in task.directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    copy = self_timed(task, sources, tmp_path / "a-a")
    assert copy.name == task.name and copy.config.baseline_source.value == "source"
    for relative in task.config.source_file_path:
        assert (copy.directory / relative).read_bytes() == (sources / relative).read_bytes()
    assert copy.config.model_dump(exclude={"baseline"}) == task.config.model_dump(exclude={"baseline"})
    assert before == {p: p.read_bytes() for p in before}


def test_the_a_a_check_says_why_it_has_no_reading() -> None:
    from aka.device import DeviceInfo
    from aka.validation.checks import aa_check

    gpu = DeviceInfo("cuda", "H200", "NVIDIA H200", "sm_90", 1)
    cpu = DeviceInfo("cpu", "cpu", "cpu", None, 0)
    assert "no GPU" in aa_check(cpu, None).message
    skeleton = aa_check(gpu, None)
    assert skeleton.status is Status.WARN and "nothing passing" in skeleton.message


_INFRA, _NONE = "infra_error", "none"


@pytest.mark.parametrize(
    ("script", "attempts", "final"),
    [
        ([_INFRA, _NONE], 2, _NONE),
        ([_INFRA, "incorrect"], 2, "incorrect"),
        ([_INFRA] * 4, 3, _INFRA),
        (["compile_error", _NONE], 1, "compile_error"),
    ],
)
def test_an_evaluation_ending_in_infra_error_is_made_again_and_each_attempt_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: list[str], attempts: int, final: str
) -> None:
    """An infra_error (the GPU's memory taken by a neighbour, session 39) is no verdict: made again,
    at most INFRA_ATTEMPTS in all; any other outcome, a failure included, is kept at once."""
    from aka.device import DeviceInfo
    from aka.evaluation.step_spec import Step
    from aka.evaluation.steps import StepOutcome
    from aka.process import CommandOutcome
    from aka.results.task_result import FailureKind
    from aka.validation import checks

    made = iter(script)
    calls: list[int] = []

    def evaluate_candidate(*_: object, **__: object) -> list[StepOutcome]:
        calls.append(1)
        kind = FailureKind(next(made))
        ran = CommandOutcome("python3 harness.py compile", 0 if kind is FailureKind.NONE else 2, False, 1.0, "")
        return [StepOutcome(Step.COMPILE, kind, kind.value, commands=[ran])]

    task = load_task(REPO / "tasks", REPO / "tasks" / "triton2triton/basic/gelu")
    monkeypatch.setattr(checks, "INFRA_RETRY_WAIT_S", 0.0)
    monkeypatch.setattr(checks, "evaluate_candidate", evaluate_candidate)
    cpu = DeviceInfo("cpu", "cpu", "cpu", None, 0)
    evaluation = checks.evaluate(task, task.directory, tmp_path, cpu, "mutant zeros", through=2)
    assert len(calls) == attempts and evaluation.outcomes[0].failure is FailureKind(final)
    assert [e.command.startswith("attempt ") for e in evaluation.evidence] == [True] * (attempts - 1) + [False]


def test_side_by_side_keeps_the_order_and_stops_everything_on_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from aka.validation import validate
    from aka.validation.checks import stopping

    running, most, lock = [0], [0], threading.Lock()

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2 if item % 2 else 0.05)
        with lock:
            running[0] -= 1
        return item * 10

    stopping.clear()
    assert validate.side_by_side(work, list(range(6)), 3, "t") == [0, 10, 20, 30, 40, 50]
    assert most[0] == 3 and not stopping.is_set()

    started: list[int] = []
    killed: list[int] = []
    monkeypatch.setattr(validate, "kill_descendants", lambda pid: killed.append(pid))

    def failing(item: int) -> int:
        started.append(item)
        if item == 0:
            raise RuntimeError("a bug in one")
        time.sleep(0.5)
        return item

    with pytest.raises(RuntimeError, match="a bug in one"):
        validate.side_by_side(failing, list(range(8)), 2, "t")
    assert stopping.is_set() and killed == [os.getpid()] * len(killed) and killed
    assert len(started) < 8  # the queued ones never started
    stopping.clear()
