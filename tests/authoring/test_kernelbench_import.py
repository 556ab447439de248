"""`aka import kernelbench`: problem files in KernelBench format become loadable, correct tasks."""

from __future__ import annotations

import importlib.util
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from aka.authoring.kernelbench import import_kernelbench, snake_case
from aka.config.task_config import load_task_config
from aka.config.tasks import select_tasks
from aka.harness import StepContext
from aka.harness.runner import judge_step

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
    "NoInputs.py": """
        import torch.nn as nn

        class Model(nn.Module):
            pass

        def get_init_inputs():
            return []
        """,
}
VALID = {"19_relu", "linear_bias", "fused_mul_add"}


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    folder = tmp_path / "kb" / "level1"
    folder.mkdir(parents=True)
    for name, source in PROBLEMS.items():
        (folder / name).write_text(textwrap.dedent(source))
    return tmp_path / "kb"


@pytest.fixture
def in_dir() -> Iterator[object]:
    old = Path.cwd()
    yield os.chdir
    os.chdir(old)


def test_snake_case() -> None:
    assert snake_case("19_ReLU") == "19_relu"
    assert snake_case("ConvTranspose2d_Add") == "convtranspose2d_add"
    assert snake_case("FusedMulAdd") == "fused_mul_add"


@pytest.mark.parametrize("family", ["torch2triton", "torch2cuda"])
def test_import_writes_loadable_tasks(problems: Path, tmp_path: Path, family: str) -> None:
    out = tmp_path / "tasks"
    result = import_kernelbench(problems, family, out, level=1)
    assert {p.name for p in result.created} == VALID
    assert len(result.skipped) == 1 and "NoInputs.py" in result.skipped[0] and "get_inputs" in result.skipped[0]
    for task_dir in result.created:
        config = load_task_config(task_dir)
        assert config.task_type == family and config.baseline_source.value == "reference"
        original = problems / "level1" / f"{_stem(task_dir.name)}.py"
        assert (task_dir / "reference.py").read_bytes() == original.read_bytes()
    tasks = select_tasks(out, [f"{family}/kernelbench_level1"])
    assert {t.name for t in tasks} == {f"{family}/kernelbench_level1/{n}" for n in VALID}


def _stem(name: str) -> str:
    return {"19_relu": "19_ReLU", "linear_bias": "LinearBias", "fused_mul_add": "FusedMulAdd"}[name]


@pytest.mark.parametrize("name", sorted(VALID))
def test_generated_correctness_step_passes(problems: Path, tmp_path: Path, name: str, in_dir: object,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    result = import_kernelbench(problems, "torch2triton", tmp_path / "tasks", level=1)
    task_dir = next(p for p in result.created if p.name == name)
    monkeypatch.chdir(task_dir)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = importlib.util.spec_from_file_location(f"_kb_harness_{name}", task_dir / "harness.py")
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    ctx = StepContext.from_env("correctness", {"AKA_DEVICE": "cpu", "AKA_TASK_FAMILY": "e2e"})
    report = judge_step(harness.TASK, ctx)
    assert report.status == "ok", report.message
    assert report.cases and all(c.correct for c in report.cases)
    policy = judge_step(harness.TASK, StepContext.from_env("correctness", {"AKA_DEVICE": "cpu",
                                                                           "AKA_TASK_FAMILY": "torch2triton"}))
    # the starting ModelNew only calls PyTorch: the torch2triton policy rejects it by design
    assert policy.status == "failed" and "policy" in str(policy.failure_kind) + (policy.message or "")
