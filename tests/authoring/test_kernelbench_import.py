"""`aka import kernelbench`: problem files in KernelBench format become loadable, correct tasks."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch
import yaml

from aka.authoring.kernelbench import import_kernelbench, parse_tolerances, snake_case
from aka.config.task_config import load_task_config
from aka.config.tasks import select_tasks
from aka.errors import AkaError
from aka.harness import StepContext, StepResult, make_generator
from aka.harness.runner import judge_step

LEVEL2 = """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        \"\"\"Level-2 style: weights made in __init__ with randn and uniform_.\"\"\"

        def __init__(self, features, scale):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(features))
            self.bias = nn.Parameter(torch.empty(features).uniform_(-0.5, 0.5))
            self.scale = scale

        def forward(self, x):
            return torch.relu(x * self.weight + self.bias) * self.scale

    def get_inputs():
        return [torch.rand(8, 64)]

    def get_init_inputs():
        return [64, 2.0]
    """
# The solution the template asks for: the same __init__ (weights made with randn / uniform_), a
# Triton kernel in forward.
LEVEL2_SOLUTION = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kernel(out_ptr, x_ptr, w_ptr, b_ptr, n, features, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    w = tl.load(w_ptr + offs % features, mask=mask)
    b = tl.load(b_ptr + offs % features, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x * w + b, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.empty(features).uniform_(-0.5, 0.5))
        self.scale = scale

    def forward(self, x):
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 256),)](out, x, self.weight, self.bias, x.numel(), x.shape[-1], self.scale,
                                               BLOCK=256)
        return out
"""
ZEROS_SOLUTION = """
import torch
from reference import Model


class ModelNew(Model):
    def forward(self, *args):
        return torch.zeros_like(super().forward(*args))
"""
NAN_SOLUTION = ZEROS_SOLUTION.replace(
    "torch.zeros_like(super().forward(*args))", "torch.full_like(super().forward(*args), float('nan'))"
)
PROBLEMS = {
    "19_ReLU.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, x):
                return torch.relu(x)

        def get_inputs():
            return [torch.randn(16, 64)]

        def get_init_inputs():
            return []
        """,
    "LinearBias.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.linear = nn.Linear(in_features, out_features)
                self.bias = nn.Parameter(torch.randn(out_features))

            def forward(self, x):
                return self.linear(x) + self.bias

        def get_inputs():
            return [torch.randn(8, 32)]

        def get_init_inputs():
            return [32, 16]
        """,
    "FusedMulAdd.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, a, b, c, scale):
                return a + b * c * scale

        def get_inputs():
            return [torch.randn(4, 33), torch.randn(4, 33), torch.randn(4, 33), 0.5]

        def get_init_inputs():
            return []
        """,
    "13_SymmetricMatmul.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, A, B):
                return torch.matmul(A, B)

        def get_inputs():
            A = torch.rand(24, 24)
            B = torch.rand(24, 24)
            return [(A + A.T) / 2, (B + B.T) / 2]

        def get_init_inputs():
            return []
        """,
    "15_TriangularMatmul.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, A, B):
                return torch.tril(torch.matmul(A, B))

        def get_inputs():
            return [torch.tril(torch.rand(24, 24)), torch.tril(torch.rand(24, 24))]

        def get_init_inputs():
            return []
        """,
    "100_HingeLoss.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, predictions, targets):
                return torch.mean(torch.clamp(1 - predictions * targets, min=0))

        def get_inputs():
            return [torch.rand(64, 1), torch.randint(0, 2, (64, 1)).float() * 2 - 1]

        def get_init_inputs():
            return []
        """,
    "98_KLDivLoss.py": """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, predictions, targets):
                return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")

        def get_inputs():
            return [torch.rand(16, 32).softmax(dim=-1), torch.rand(16, 32).softmax(dim=-1)]

        def get_init_inputs():
            return []
        """,
    "12_Scale_Bias_ReLU.py": LEVEL2,
    "NoInputs.py": """
        import torch.nn as nn

        class Model(nn.Module):
            pass

        def get_init_inputs():
            return []
        """,
}
VALID = {
    "19_relu",
    "linear_bias",
    "fused_mul_add",
    "13_symmetricmatmul",
    "15_triangularmatmul",
    "100_hingeloss",
    "98_kldivloss",
    "12_scale_bias_relu",
}


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    folder = tmp_path / "kb" / "level1"
    folder.mkdir(parents=True)
    for name, source in PROBLEMS.items():
        (folder / name).write_text(textwrap.dedent(source))
    return tmp_path / "kb"


def test_snake_case() -> None:
    assert snake_case("19_ReLU") == "19_relu"
    assert snake_case("ConvTranspose2d_Add") == "convtranspose2d_add"
    assert snake_case("FusedMulAdd") == "fused_mul_add"


@pytest.mark.parametrize("family", ["torch2triton", "torch2cuda"])
def test_import_writes_loadable_tasks(problems: Path, tmp_path: Path, family: str) -> None:
    out = tmp_path / "tasks"
    result = import_kernelbench(problems, family, out, level=1, probe=False)
    assert {p.name for p in result.created} == VALID
    assert len(result.skipped) == 1 and "NoInputs.py" in result.skipped[0] and "get_inputs" in result.skipped[0]
    for task_dir in result.created:
        config = load_task_config(task_dir)
        assert config.task_type == family and config.baseline_source.value == "reference"
        original = problems / "level1" / f"{_stem(task_dir.name)}.py"
        assert (task_dir / "reference.py").read_bytes() == original.read_bytes()
        instructions = config.prompt.instructions if config.prompt else ""
        assert "0.0001 (float32), 0.01 (float16)" in instructions
        assert ("nvcc" in instructions and (task_dir / "kernel.cu").is_file()) == (family == "torch2cuda")
    tasks = select_tasks(out, [f"{family}/kernelbench_level1"])
    assert {t.name for t in tasks} == {f"{family}/kernelbench_level1/{n}" for n in VALID}


def _stem(name: str) -> str:
    return next(Path(file).stem for file in PROBLEMS if snake_case(Path(file).stem) == name)


def _harness(task_dir: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_kb_harness_{task_dir.name}", task_dir / "harness.py")
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    return harness


def _judge(task_dir: Path, family: str, kernel: str | None = None) -> StepResult:
    if kernel is not None:
        (task_dir / "kernel.py").write_text(kernel)
    harness = _harness(task_dir)
    return judge_step(
        harness.TASK, StepContext.from_env("correctness", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": family})
    )


@pytest.fixture
def imported(problems: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    result = import_kernelbench(problems, "torch2triton", tmp_path / "tasks", level=1, probe=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return {p.name: p for p in result.created}


@pytest.mark.parametrize("name", sorted(VALID))
def test_reference_passes_and_zeros_and_nan_fail(
    imported: dict[str, Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The untouched ModelNew (the reference's forward) is correct; a zeros and a NaN kernel are not."""
    task_dir = imported[name]
    monkeypatch.chdir(task_dir)
    report = _judge(task_dir, "e2e")
    assert report.status == "ok", report.message
    assert report.cases and all(c.correct for c in report.cases)
    for kernel in (ZEROS_SOLUTION, NAN_SOLUTION):
        wrong = _judge(task_dir, "e2e", kernel)
        assert wrong.status == "failed" and wrong.failure_kind == "incorrect", wrong.message


def test_policy_rejects_the_untouched_model_new(imported: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(imported["19_relu"])
    policy = _judge(imported["19_relu"], "torch2triton")
    assert policy.status == "failed" and "policy" in str(policy.failure_kind) + (policy.message or "")


def test_template_solution_with_weights_in_init_passes_the_policy(
    imported: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A level-2 ModelNew builds its weights (randn, uniform_) in __init__: not the policed call."""
    task_dir = imported["12_scale_bias_relu"]
    monkeypatch.chdir(task_dir)
    report = _judge(task_dir, "torch2triton", LEVEL2_SOLUTION)
    assert report.status == "ok", report.message
    broken = _judge(task_dir, "torch2triton", LEVEL2_SOLUTION.replace("* scale, mask", "* scale * 1.001, mask"))
    assert broken.status == "failed" and broken.failure_kind == "incorrect", broken.message


def test_inputs_are_the_problems_own_per_seed(imported: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.manual_seed(seed) then get_inputs(): structure kept, a new draw per seed, the same per seed."""

    def inputs(name: str, seed: int) -> tuple[torch.Tensor, ...]:
        monkeypatch.chdir(imported[name])
        harness = _harness(imported[name])
        return tuple(harness.make_inputs(harness.CASE, make_generator(seed, "cpu"), torch.device("cpu")))

    a, b = inputs("13_symmetricmatmul", 5)
    assert torch.equal(a, a.T) and torch.equal(b, b.T) and bool((a >= 0).all())
    assert torch.equal(a, inputs("13_symmetricmatmul", 5)[0]) and not torch.equal(a, inputs("13_symmetricmatmul", 6)[0])
    a, b = inputs("15_triangularmatmul", 5)
    assert torch.equal(a, torch.tril(a)) and torch.equal(b, torch.tril(b))
    predictions, targets = inputs("100_hingeloss", 5)
    assert set(targets.unique().tolist()) == {-1.0, 1.0} and bool(((predictions >= 0) & (predictions < 1)).all())
    predictions, targets = inputs("98_kldivloss", 5)
    assert torch.allclose(predictions.sum(-1), torch.ones(16)) and bool((predictions > 0).all())
    harness = _harness(imported["98_kldivloss"])
    assert torch.isfinite(torch.as_tensor(harness.reference(predictions, targets))).all()
    assert harness.TOLERANCES[torch.float32].atol == 1e-4 and harness.TOLERANCES[torch.float16].rtol == 1e-2


def test_tolerance_override(problems: Path, tmp_path: Path) -> None:
    assert parse_tolerances(["1e-3"]) == {"float32": 1e-3, "float16": 1e-3, "bfloat16": 1e-3}
    assert parse_tolerances(["float32=2e-4"])["float32"] == 2e-4 and parse_tolerances([])["float16"] == 1e-2
    with pytest.raises(AkaError, match="float64=1"):
        parse_tolerances(["float64=1"])
    result = import_kernelbench(
        problems,
        "torch2triton",
        tmp_path / "tasks",
        level=1,
        probe=False,
        tolerances=parse_tolerances(["float32=2e-4"]),
    )
    harness = (result.created[0] / "harness.py").read_text()
    assert "torch.float32: Tolerance(0.0002, 0.0002)" in harness and "(set at import)" in harness


def _write_problem(
    folder: Path, name: str, forward: str, get_inputs: str = "[torch.rand(8, 16)]", prelude: str = ""
) -> None:
    """A problem file in KernelBench's format: `Model.forward(x)` returns `forward`, `get_inputs()`
    runs `prelude` and returns `get_inputs`."""
    folder.mkdir(parents=True, exist_ok=True)
    body = "".join(f"    {line}\n" for line in prelude.splitlines())
    (folder / name).write_text(
        "import os, signal\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {forward}\n\n\ndef get_inputs():\n{body}"
        f"    return {get_inputs}\n\n\ndef get_init_inputs():\n    return []\n"
    )


BAD_PROBLEMS = {
    "LogShifted.py": "torch.log(x - 2)",  # NaN on [0, 1) inputs
    "ZeroOut.py": "x - x",  # zeros pass
    "MeanOfMany.py": "torch.sign(x.sum()).expand(4)",  # one value everywhere: a constant passes
    "SameForEverySeed.py": "torch.arange(4, dtype=x.dtype) + 0 * x.sum()",  # a stored answer passes
    "RandomEveryCall.py": "torch.nn.functional.dropout(x, 0.5, training=True)",  # no kernel can match it
    "19_ReLU.py": "torch.relu(x - 0.5)",
    "MSELike.py": "((x - 0.5) ** 2).mean()",  # one value: a constant is itself, "inputs matter" judges it
}


def test_import_report_records_bad_references(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    for name, expression in BAD_PROBLEMS.items():
        _write_problem(folder, name, expression)
    with pytest.raises(AkaError, match="probe device must be cpu or cuda"):
        import_kernelbench(folder, "torch2triton", tmp_path / "tasks", probe_device="tpu")
    result = import_kernelbench(folder, "torch2triton", tmp_path / "tasks", probe_jobs=2)
    assert len(result.created) == 7 and result.report is not None
    report = yaml.safe_load(result.report.read_text())
    statuses = {name: task["status"] for name, task in report["tasks"].items()}
    assert statuses == {
        "log_shifted": "FAIL",
        "zero_out": "FAIL",
        "mean_of_many": "FAIL",
        "same_for_every_seed": "WARN",
        "random_every_call": "FAIL",
        "19_relu": "PASS",
        "mse_like": "PASS",
    }
    checks = {t: {c["name"]: c["status"] for c in report["tasks"][t]["checks"]} for t in report["tasks"]}
    assert checks["mean_of_many"]["constant kernel rejected"] == "FAIL"
    assert checks["same_for_every_seed"]["inputs matter"] == "WARN"
    assert checks["random_every_call"]["deterministic"] == "FAIL"
    relu = {c["name"]: c["status"] for c in report["tasks"]["19_relu"]["checks"]}
    assert relu["NaN kernel rejected"] == "PASS" and relu["zeros kernel rejected"] == "PASS"
    failed = {c["name"] for c in report["tasks"]["log_shifted"]["checks"] if c["status"] == "FAIL"}
    assert failed == {"finite"} and report["counts"] == {"PASS": 2, "WARN": 1, "FAIL": 4}
    assert report["tolerances"]["float32"] == 1e-4 and "get_tolerance_for_precision" in report["tolerance_source"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_torch2cuda_compile_step_builds_kernel_cu(
    problems: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = import_kernelbench(problems, "torch2cuda", tmp_path / "tasks", level=1, probe=False)
    task_dir = next(p for p in result.created if p.name == "19_relu")
    monkeypatch.chdir(task_dir)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    compile_ctx = StepContext.from_env("compile", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "torch2cuda"})
    assert judge_step(_harness(task_dir).TASK, compile_ctx).status == "ok"
    assert list((tmp_path / "cache").rglob("kernel-*.so")), "kernel.cu was not compiled"
    (task_dir / "kernel.cu").write_text((task_dir / "kernel.cu").read_text().replace("if (i < n)", "if (i < n) {"))
    broken = judge_step(_harness(task_dir).TASK, compile_ctx)
    assert broken.status == "failed" and "nvcc" in (broken.message or ""), broken.message


def test_cli_import_with_a_tolerance_and_without_the_probe(problems: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aka.cli import app

    out = tmp_path / "tasks"
    done = CliRunner().invoke(
        app,
        [
            "import",
            "kernelbench",
            str(problems),
            "--family",
            "torch2triton",
            "--level",
            "1",
            "--out",
            str(out),
            "--tolerance",
            "float16=5e-3",
            "--no-probe",
        ],
    )
    assert done.exit_code == 0, done.output
    assert f"{len(VALID)} tasks written, 1 files skipped" in done.output
    harness = (out / "torch2triton" / "kernelbench_level1" / "19_relu" / "harness.py").read_text()
    assert "torch.float16: Tolerance(0.005, 0.005)" in harness and "torch.float32: Tolerance(0.0001, 0.0001)" in harness
    assert not (out / "torch2triton" / "kernelbench_level1" / "import_report.yaml").exists()
    bad = CliRunner().invoke(
        app,
        ["import", "kernelbench", str(problems), "--family", "torch2triton", "--out", str(out), "--tolerance", "lots"],
    )
    assert bad.exit_code != 0 and "--tolerance lots: not a number" in bad.output


def test_a_probe_killed_for_memory_is_the_machines_limit_not_a_task_defect(tmp_path: Path) -> None:
    """On a 24 GiB CPU machine the probe of KernelBench level 1's 19_ReLU (inputs of 4096 x 393216
    float32: 6 GiB, and its reference as much again, three seeds) was killed by the kernel's
    out-of-memory killer and read `FAIL` ("exit -9: no output"), as if the task were broken.
    Killed by signal 9 it is a WARN that says so; a problem that fails any other way stays FAIL."""
    folder = tmp_path / "kb"
    # what the out-of-memory killer does
    _write_problem(folder, "huge.py", "torch.relu(x)", "[]", prelude="os.kill(os.getpid(), signal.SIGKILL)")
    result = import_kernelbench(folder, "torch2triton", tmp_path / "tasks")
    assert result.report is not None
    task = yaml.safe_load(result.report.read_text())["tasks"]["huge"]
    assert task["status"] == "WARN"
    (check,) = task["checks"]
    assert check["name"] == "reference runs" and "killed by signal 9, most likely out of memory" in check["message"]


def test_a_probe_past_its_memory_share_fails_its_allocation_as_a_warn(tmp_path: Path) -> None:
    """On the CPU the probe's child runs under an address-space cap (its share of the available
    memory): a problem too large fails its allocation at once and reads WARN, instead of growing
    until the kernel's out-of-memory killer stops it or another process."""
    from aka.authoring.reference_probe import memory_share, probe_in_child

    folder = tmp_path / "kb"
    _write_problem(folder, "Huge.py", "torch.relu(x)", "[torch.rand(2**33)]")  # 32 GiB of float32
    result = import_kernelbench(folder, "torch2triton", tmp_path / "tasks", probe=False)
    share = memory_share(4)
    assert share is not None and 0 < share < (memory_share(1) or 0)
    verdict = probe_in_child(result.created[0], memory_limit=4 * 2**30)
    assert verdict.status == "WARN", verdict
    (check,) = verdict.checks
    assert (
        check.name == "reference runs"
        and "out of memory on cpu" in check.message
        and "not a task defect" in check.message
    )


def test_cli_import_probes_several_at_once_and_says_each_verdict_as_it_comes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from aka.cli import app

    folder = tmp_path / "kb"
    for name, expression in (("19_ReLU.py", "torch.relu(x - 0.5)"), ("ZeroOut.py", "x - x")):
        _write_problem(folder, name, expression)
    out = tmp_path / "tasks"
    args = ["import", "kernelbench", str(folder), "--family", "torch2triton", "--out", str(out), "--probe-jobs", "2"]
    done = CliRunner().invoke(app, args)
    text = done.output + (done.stderr if done.stderr_bytes is not None else "")
    assert done.exit_code == 0, text
    assert "probed 19_relu: PASS" in text and "probed zero_out: FAIL" in text
    assert "references: 1 PASS, 0 WARN, 1 FAIL" in text
    bad = CliRunner().invoke(app, [*args[:-2], "--probe-device", "tpu"])
    assert bad.exit_code != 0 and "probe device must be cpu or cuda" in bad.output + (bad.stderr or "")
