"""The evaluator on purpose-made bad steps: forged reports, missing reports, deleted files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import toy_kernel_source

from aka.config.tasks import select_tasks
from aka.device import DeviceInfo
from aka.evaluation.eval_dir import build_eval_dir
from aka.evaluation.kernel_check import missing_kernels
from aka.evaluation.step_process import StepSetup
from aka.evaluation.step_spec import Step, Target
from aka.evaluation.steps import run_step
from aka.results.task_result import FailureKind

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
GOOD_REPORT = json.dumps(
    {"format": "aka-step-report/1", "step": "correctness", "status": "ok", "cases": [{"id": "c1", "correct": True}]}
)


def _task(tasks_root: Path, make_toy_task, **overrides: object):
    make_toy_task(**overrides)
    return select_tasks(tasks_root, ["all"])[0]


def _payload_task(tasks_root: Path, make_toy_task, name: str, payload: str, after: str = "", mode: str = "wrapped"):
    task_dir = make_toy_task(name, correctness_command=[f"python3 send.py payload.json {mode}" + after])
    (task_dir / "payload.json").write_text(payload)
    return next(t for t in select_tasks(tasks_root, ["all"]) if t.directory == task_dir)


def _run(task, tmp_path: Path, step: Step = Step.CORRECTNESS):
    eval_dir = tmp_path / "eval"
    build_eval_dir(task, eval_dir, None)
    return run_step(StepSetup(task, CPU, eval_dir, tmp_path / "reports", tmp_path / "log"), step, Target.CANDIDATE)


def test_nonzero_exit_fails_even_with_an_ok_report(tasks_root, make_toy_task, tmp_path: Path) -> None:
    outcome = _run(_payload_task(tasks_root, make_toy_task, "triton2triton/t/x", GOOD_REPORT, "; exit 4"), tmp_path)
    assert outcome.failure is FailureKind.CRASH and "status 4" in (outcome.message or "")


def test_exit_zero_without_report_fails(tasks_root, make_toy_task, tmp_path: Path) -> None:
    outcome = _run(
        _task(tasks_root, make_toy_task, correctness_command=["echo 'all 5 cases correct, 0.01 ms'"]), tmp_path
    )
    assert outcome.failure is FailureKind.CRASH and "no step report" in (outcome.message or "")


def test_stdout_claims_are_never_read(tasks_root, make_toy_task, tmp_path: Path) -> None:
    command = f"echo '{GOOD_REPORT}'"
    outcome = _run(_task(tasks_root, make_toy_task, correctness_command=[command]), tmp_path)
    assert outcome.failure is FailureKind.CRASH


def test_malformed_and_wrong_format_reports(tasks_root, make_toy_task, tmp_path: Path) -> None:
    for index, (payload, mode, expected) in enumerate(
        [
            ("{not json", "raw", "invalid JSON"),
            ('{"format": "other/1"}', "wrapped", "not in format"),
            ('{"format": "aka-step-report/1", "step": "c", "status": "great"}', "wrapped", "field status"),
        ]
    ):
        task = _payload_task(tasks_root, make_toy_task, f"triton2triton/t/x{index}", payload, mode=mode)
        outcome = _run(task, tmp_path)
        assert outcome.failure is FailureKind.CRASH and expected in (outcome.message or ""), outcome.message


def test_no_cases_is_not_correct(tasks_root, make_toy_task, tmp_path: Path) -> None:
    empty = json.dumps({"format": "aka-step-report/1", "step": "correctness", "status": "ok", "cases": []})
    outcome = _run(_payload_task(tasks_root, make_toy_task, "triton2triton/t/x", empty), tmp_path)
    assert outcome.failure is FailureKind.INCORRECT and "no cases" in (outcome.message or "")


def test_every_command_of_a_step_runs_and_cases_merge(tasks_root, make_toy_task, tmp_path: Path) -> None:
    task = _task(
        tasks_root,
        make_toy_task,
        correctness_command=["python3 harness.py correctness", "python3 harness.py correctness"],
    )
    outcome = _run(task, tmp_path)
    assert outcome.passed and len(outcome.cases) == 4 and len(outcome.commands) == 2


def test_eval_dir_takes_only_declared_sources(tasks_root, make_toy_task, tmp_path: Path) -> None:
    task = _task(tasks_root, make_toy_task)
    work = tmp_path / "work"
    build_eval_dir(task, work, None)
    (work / "kernel.py").write_text("def toy_kernel():\n    return 1\n")
    (work / "harness.py").write_text("raise SystemExit('tampered')\n")
    (work / "extra.py").write_text("x = 1\n")
    eval_dir = tmp_path / "eval"
    assert build_eval_dir(task, eval_dir, work) == []
    assert (eval_dir / "kernel.py").read_text().endswith("return 1\n")
    assert (eval_dir / "harness.py").read_text() == (task.directory / "harness.py").read_text()
    assert not (eval_dir / "extra.py").exists()

    (work / "kernel.py").unlink()
    assert build_eval_dir(task, eval_dir, work) == ["kernel.py: missing"]
    assert not (eval_dir / "kernel.py").exists(), "a deleted source must not fall back to the pristine one"


def test_symlinked_source_is_refused(tasks_root, make_toy_task, tmp_path: Path) -> None:
    task = _task(tasks_root, make_toy_task)
    work = tmp_path / "work"
    build_eval_dir(task, work, None)
    (work / "kernel.py").unlink()
    (work / "kernel.py").symlink_to(task.directory / "harness.py")
    assert build_eval_dir(task, tmp_path / "eval", work) == ["kernel.py: is a symbolic link"]


def test_missing_kernels_python_and_cuda(tasks_root, make_toy_task, tmp_path: Path) -> None:
    task = _task(tasks_root, make_toy_task)
    eval_dir = tmp_path / "eval"
    build_eval_dir(task, eval_dir, None)
    assert missing_kernels(task, eval_dir) == []
    (eval_dir / "kernel.py").write_text("toy_kernel = lambda: 42\n# def toy_kernel(): in a comment\n")
    assert missing_kernels(task, eval_dir) == ["toy_kernel"]
    (eval_dir / "kernel.py").write_text("def toy_kernel(:\n")
    assert missing_kernels(task, eval_dir) == [], "unparsable sources are left to the compile step"

    cuda_root = tasks_root / "cuda"
    cuda_root.mkdir()
    cu_dir = cuda_root / "cuda2cuda/x/add"
    cu_dir.mkdir(parents=True)
    (cu_dir / "add.cu").write_text("__global__ void\nadd_kernel(const float* a) {}\nvoid add_kernel2(int x) {}\n")
    (cu_dir / "config.yaml").write_text(
        "task_type: cuda2cuda\nsource_file_path: [add.cu]\ntarget_kernel_functions: [add_kernel, add_kernel2]\n"
        "compile_command: ['true']\ncorrectness_command: ['true']\n"
    )
    cuda_task = select_tasks(cuda_root, ["all"])[0]
    assert missing_kernels(cuda_task, cu_dir) == ["add_kernel2"]


def test_the_static_check_takes_any_source_in_one_pass() -> None:
    """Sources no parser takes (nested too deep: the parser's RecursionError and MemoryError) are
    left to the compile step like a syntax error, and `__global__` names are found in one pass: a
    lazy regex took 101 s on 172 KiB of repeated `__global__` (red team, session 48)."""
    import tempfile
    import time

    from aka.evaluation.kernel_check import defined_names, global_functions, parse_python

    assert parse_python("x = " + "+".join(["1"] * 3000)) is None
    assert parse_python("x = " + "-" * 7000 + "1") is None
    assert parse_python("x = 1\0") is None
    assert parse_python("def f():\n    return 1\n") is not None
    sources = {
        "__global__ void k(int a) {}": {"k"},
        'extern "C" __global__ void  k2 (float* x);': {"k2"},
        "template <int N> __global__\nvoid\n  tk  (int)": {"tk"},
        "__global__ int x; void y(int)": set(),  # a `;` before any call: no kernel
        "__global__ __forceinline__ void a_b1(": {"a_b1"},
        "__global__ void (*p)(int); __global__ void z(": {"void", "z"},  # as the regex read it
    }
    for text, names in sources.items():
        assert global_functions(text) == names, text
    started = time.monotonic()
    assert global_functions("__global__ " * 20_000) == set()
    assert time.monotonic() - started < 5.0  # the regex: about 100 s on this much
    # unclosed `__launch_bounds__(` (its arguments' pattern scanned to the end for each: 3.6 s on
    # 288 KiB), and a Python source too long to parse in the evaluator (4 MiB of `a;`: 32 s, 3.6 GiB)
    source = Path(tempfile.mkdtemp()) / "kernel.cu"
    source.write_text("__global__ void k(int a) {}\n" + "__launch_bounds__(" * 40_000)
    started = time.monotonic()
    assert defined_names(source) == {"k"}
    assert time.monotonic() - started < 5.0
    assert parse_python("a;" * 300_000) is None


def test_step_environment_contract(tasks_root, make_toy_task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_REWARD_TOKEN", "s3cr3t")  # the evaluator's secrets never reach a step
    monkeypatch.setenv("NVIDIA_API_KEY", "s3cr3t")  # nor under a prefix a step needs (red team E)
    monkeypatch.setenv("TORCH_HUB_TOKEN", "s3cr3t")
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-test")
    monkeypatch.setenv("MY_TOOL_HOME", "/opt/tool")
    monkeypatch.setenv("AKA_STEP_ENV", "MY_TOOL_HOME,AKA_SERVE_TOKEN")  # AKA_ names only as passed through
    monkeypatch.setenv("AKA_SERVE_TOKEN", "t0ken")
    dump = (
        'python3 -c \'import json, os; json.dump(dict(os.environ), open("env.json", "w")); '
        'open("proc.txt", "wb").write(open("/proc/self/environ", "rb").read())\'; exit 1'
    )
    task = _task(tasks_root, make_toy_task, correctness_command=[dump])
    _run(task, tmp_path)
    env = json.loads((tmp_path / "eval" / "env.json").read_text())
    assert not {"MY_REWARD_TOKEN", "NVIDIA_API_KEY", "TORCH_HUB_TOKEN", "AKA_SERVE_TOKEN", "AKA_STEP_ENV"} & set(env)
    assert b"s3cr3t" not in (tmp_path / "eval" / "proc.txt").read_bytes()
    assert env["CUDA_HOME"] == "/opt/cuda-test" and env["MY_TOOL_HOME"] == "/opt/tool" and "PATH" in env
    assert env["AKA_STEP"] == "correctness" and env["AKA_DEVICE"] == "cpu" and env["AKA_TARGET"] == "candidate"
    assert env["AKA_CASE_PROFILE"] == "ci" and env["TRITON_INTERPRET"] == "1"
    assert env["AKA_TARGET_KERNELS"] == "toy_kernel" and env["AKA_TASK_FAMILY"] == "triton2triton"
    assert int(env["AKA_RESULT_FD"]) > 2 and (tmp_path / "eval" / ".aka_baseline" / "kernel.py").is_file()


def test_forged_reports_are_tampering(tasks_root, make_toy_task, tmp_path: Path) -> None:
    outcome = _run(_payload_task(tasks_root, make_toy_task, "triton2triton/t/x", GOOD_REPORT, mode="notoken"), tmp_path)
    assert outcome.failure is FailureKind.TAMPERING and "forged" in (outcome.message or "")
    twice = _payload_task(
        tasks_root, make_toy_task, "triton2triton/t/y", GOOD_REPORT, after=" && python3 send.py payload.json notoken"
    )
    outcome = _run(twice, tmp_path)
    assert outcome.failure is FailureKind.TAMPERING and "2 messages" in (outcome.message or "")


PROBE = """
import os, socket
try:
    os.kill(EVALUATOR_PID, 0)
    print("evaluator visible")
except ProcessLookupError:
    print("evaluator hidden")
sock = socket.socket()
sock.settimeout(2)
try:
    sock.connect(("127.0.0.1", 9))
    print("net yes")
except OSError as exc:
    print("net no", exc.errno)
"""


def test_steps_cannot_see_or_signal_the_evaluator(tasks_root, make_toy_task, tmp_path: Path) -> None:
    task = _payload_task(tasks_root, make_toy_task, "triton2triton/t/x", GOOD_REPORT, after="")
    (task.directory / "probe.py").write_text(PROBE.replace("EVALUATOR_PID", str(os.getpid())))
    config = (task.directory / "config.yaml").read_text()
    (task.directory / "config.yaml").write_text(config.replace("python3 send.py", "python3 probe.py; python3 send.py"))
    outcome = _run(select_tasks(tasks_root, ["all"])[0], tmp_path)
    log = (tmp_path / "log").read_text()
    assert outcome.passed, outcome.message
    if "pid-namespace" in outcome.isolation:
        assert "evaluator hidden" in log and "net no" in log


def test_cuda_kernels_are_found_behind_launch_bounds(tmp_path: Path) -> None:
    from aka.evaluation.kernel_check import defined_names

    source = tmp_path / "kernel.cu"
    source.write_text(
        "__global__ void __launch_bounds__(256, 2) row_sum_kernel(const float* x) {}\n"
        "__launch_bounds__(128) __global__ void other_kernel(float* y) {}\n"
        "template <int N> __global__ void tiled_kernel(float* y) {}\n"
    )
    assert {"row_sum_kernel", "other_kernel", "tiled_kernel"} <= (defined_names(source) or set())


# Where a filler writes: its working folder; in its TMPDIR, the bottom of a chain of folders whose path passes
# 4,096 bytes (os.walk skipped it: the quota read 0.06 MiB for 201 MiB); the bottom of a chain 1,500
# deep (os.walk and shutil.rmtree recursed past Python's limit: RecursionError, an
# infra_error, and the files left on disk).
FILLER_FOLDERS = {
    "flat": "_fd = os.open('.', os.O_RDONLY)\n",
    "past PATH_MAX": "_fd = _chain(os.environ['TMPDIR'], 'b' * 250, 30)\n",
    "1,500 deep": "_fd = _chain(os.environ['TMPDIR'], 'a', 1500)\n",
}


@pytest.mark.parametrize("where", FILLER_FOLDERS)
def test_a_step_that_fills_the_disk_is_stopped_as_tampering(
    tasks_root, make_toy_task, tmp_path: Path, monkeypatch, where: str
) -> None:
    """Filling the disk would break the evaluator's own writes (an infra error a trainer drops):
    a step whose writable folders grow past the quota is killed while it writes, however it
    shapes their tree, and nothing it wrote stays."""
    from aka.evaluation import disk_quota
    from aka.evaluation.steps import evaluate_candidate

    monkeypatch.setattr(disk_quota, "STEP_DISK_QUOTA_BYTES", 32 * 2**20)
    filler = (
        "import os, time\n"
        "def _chain(base, name, depth):\n"
        "    fd = os.open(base, os.O_RDONLY)\n"
        "    for _ in range(depth):\n"
        "        try:\n"
        "            os.mkdir(name, dir_fd=fd)\n"
        "        except FileExistsError:\n"
        "            pass\n"
        "        child = os.open(name, os.O_RDONLY, dir_fd=fd)\n"
        "        os.close(fd)\n"
        "        fd = child\n"
        "    return fd\n" + FILLER_FOLDERS[where] + "for i in range(200):\n"
        "    with open(os.open(f'fill{i}.bin', os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=_fd), 'wb') as f:\n"
        "        f.write(os.urandom(8 * 2**20))\n"
        "    time.sleep(0.05)\n"
    )
    task_dir = make_toy_task("triton2triton/toy/filler")
    task = next(t for t in select_tasks(tasks_root, ["all"]) if t.directory == task_dir)
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(toy_kernel_source(extra=filler))
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", CPU)
    assert outcomes[-1].failure is FailureKind.TAMPERING and "grew by" in (outcomes[-1].message or "")
    assert disk_quota.disk_usage(tmp_path / "scratch") < 200 * 2**20  # stopped long before it wrote 1.6 GB
    if where != "flat":  # in its private folders: removed with them
        assert disk_quota.disk_usage(tmp_path / "scratch") < 8 * 2**20


def test_a_step_that_fills_the_disk_with_files_no_folder_names_is_stopped_as_tampering(
    tasks_root, make_toy_task, tmp_path: Path, monkeypatch
) -> None:
    """A red team's candidate held 18 files of 255 MiB, made with O_TMPFILE (unlinked from the
    start), and the quota, which read its folders, saw nothing while the disk lost 4.5 GiB. The
    files the step's processes hold open on its folders' file systems count too."""
    from aka.evaluation import disk_quota
    from aka.evaluation.steps import evaluate_candidate

    monkeypatch.setattr(disk_quota, "STEP_DISK_QUOTA_BYTES", 32 * 2**20)
    filler = (
        "import os, time\n"
        "_held = []\n"
        "for i in range(200):\n"
        "    if i % 2:\n"
        "        fd = os.open(os.environ['TMPDIR'], os.O_TMPFILE | os.O_WRONLY, 0o600)\n"
        "    else:\n"
        "        path = os.path.join(os.environ['TMPDIR'], f'gone{i}')\n"
        "        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "        os.unlink(path)\n"
        "    os.write(fd, os.urandom(8 * 2**20))\n"
        "    _held.append(fd)\n"
        "    time.sleep(0.05)\n"
    )
    task_dir = make_toy_task("triton2triton/toy/unlinked")
    task = next(t for t in select_tasks(tasks_root, ["all"]) if t.directory == task_dir)
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "kernel.py").write_text(toy_kernel_source(extra=filler))
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", CPU)
    assert outcomes[-1].failure is FailureKind.TAMPERING, outcomes[-1]
    assert "files its processes hold that no folder names" in (outcomes[-1].message or "")


def test_the_evaluation_folder_holds_the_held_out_cases_only_for_a_held_out_evaluation(
    tasks_root, make_toy_task, tmp_path: Path
) -> None:
    """The evaluation folder is the step's own: a candidate read the held-out cases there and put
    them in its failure message (red team, session 48). A module of that name deeper in the task
    is the task's own and stays."""
    task = _task(tasks_root, make_toy_task)
    (task.directory / "heldout.py").write_text("CASES = ['secret']\n")
    (task.directory / "helpers").mkdir()
    (task.directory / "helpers" / "heldout.py").write_text("# the task's own module\n")
    build_eval_dir(task, tmp_path / "plain", None)
    assert not (tmp_path / "plain" / "heldout.py").exists()
    assert (tmp_path / "plain" / "helpers" / "heldout.py").is_file()
    build_eval_dir(task, tmp_path / "held", None, heldout=True)
    assert (tmp_path / "held" / "heldout.py").read_text() == "CASES = ['secret']\n"
