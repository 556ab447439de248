"""A task's target kernels must be the Triton kernels that do the work, in every family whose
baseline writes them as Triton kernels: red team F (session 54) won at 5-31x on e2e and
repository tasks, whose torch policy is off, with a plain function of the target's name, a real
kernel whose module hid from the launch counter (leaving `sys.modules`, rebinding `__file__`),
and on an instruction task with a launcher object of its own in the kernel's place."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import aka
from aka.device import DeviceInfo
from aka.results.task_result import FailureKind

REPO = Path(__file__).resolve().parents[2]
CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
MLP = "e2e/llm/mlp_swiglu_decode"
TOPK = "instruction2triton/llm/topk"

_KERNEL = """
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, n_elements, inter, BLOCK_SIZE: tl.constexpr):
    o = tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + o, tl.load(out_ptr + o))


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.float().chunk(2, dim=-1)
    out = (F.silu(gate) * up).to(gate_up.dtype)
    silu_and_mul_kernel[(1,)](gate_up, out, 1, 1, BLOCK_SIZE=1)
    return out
"""
_PLAIN = """
import torch
import torch.nn.functional as F

BLOCK_SIZE = 128
NUM_WARPS = 4


def silu_and_mul_kernel(gate_up):
    gate, up = gate_up.float().chunk(2, dim=-1)
    return (F.silu(gate) * up).to(gate_up.dtype)


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    return silu_and_mul_kernel(gate_up)
"""
_LAUNCHER = """
import numpy as np
import torch

GROUP_SIZE = 32
BLOCK = 4096
NUM_WARPS = 4


def topk_kernel(x, k, values, indices):  # on the host in numpy: no torch operator to catch
    bf16 = x.dtype == torch.bfloat16
    a = x.view(torch.int16).numpy() if bf16 else x.numpy()
    f = (a.astype(np.int32) << 16).view(np.float32) if bf16 else a
    idx = np.argsort(-f.astype(np.float64), axis=1, kind="stable")[:, :k]
    values.view(torch.int16 if bf16 else x.dtype).numpy()[...] = np.take_along_axis(a, idx, axis=1)
    indices.numpy()[...] = idx


class _Launcher:
    def __init__(self, body):
        self.fn = body

    def run(self, *args, grid=None, warmup=False, **kwargs):
        dims = grid(kwargs) if callable(grid) else grid
        if not dims or 0 in tuple(dims):
            raise RuntimeError("launch failed")
        return self.fn(*args)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)


topk_kernel = _Launcher(topk_kernel)


def topk(x, k):
    values = torch.empty((x.shape[0], int(k)), dtype=x.dtype)
    indices = torch.empty((x.shape[0], int(k)), dtype=torch.int64)
    topk_kernel[(x.shape[0],)](x, int(k), values, indices)
    return values, indices
"""
CANDIDATES = {
    "plain_function_target": (MLP, _PLAIN),
    "leaves_sys_modules": (MLP, _KERNEL + "\n\ndel sys.modules[__name__]\n"),
    "rebinds_its_file": (MLP, _KERNEL + '\n\n__file__ = "/usr/lib/python3/dist-packages/mlp.py"\n'),
    "launcher_of_its_own": (TOPK, _LAUNCHER),
}


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("provenance") / "tasks"
    for task in (MLP, TOPK):
        shutil.copytree(REPO / "tasks" / task, root / task)
    with aka.KernelEvaluator(root, root.parent / "cache", device=CPU) as made:
        yield made


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_a_target_that_is_not_a_counted_triton_kernel_is_a_policy_violation(evaluator, name: str) -> None:
    task, source = CANDIDATES[name]
    result = evaluator.evaluate(task, {"kernel.py": source})
    assert result.failure_kind is FailureKind.POLICY_VIOLATION, (name, result.failure_kind, result.failure_message)
    assert result.score == 0


def test_the_unchanged_e2e_baseline_still_passes(evaluator) -> None:
    source = (REPO / "tasks" / MLP / "kernel.py").read_text()
    result = evaluator.evaluate(MLP, {"kernel.py": source})
    assert result.failure_kind is FailureKind.NONE and result.correct, result.failure_message


def test_the_baselines_triton_targets_are_read_from_its_decorators(tmp_path: Path) -> None:
    from aka.evaluation.kernel_check import triton_kernels_in

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ops.py").write_text(
        "import triton\nfrom triton import jit\n\n\n@triton.jit\ndef a(x):\n    pass\n\n\n"
        "@jit\ndef b(x):\n    pass\n\n\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef c(x):\n    pass\n\n\ndef d(x):\n    pass\n\n\n"
        "@staticmethod\ndef e(x):\n    pass\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    assert triton_kernels_in(tmp_path, frozenset("abcdef")) == {"a", "b", "c"}
    assert triton_kernels_in(tmp_path / "absent", frozenset("a")) == set()
