"""Compiled Triton's rule on globals, checked under the interpreter (the CPU profile)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aka.harness.candidates import import_candidate
from aka.harness.jit_globals import non_constexpr_globals

KERNELS = """
import math
import triton
import triton.language as tl

SCALE = 1.4426950408889634
BLOCK = tl.constexpr(128)
DTYPE = tl.float32


@triton.jit
def helper(x):
    return x * 2


@triton.jit
def plain_global(x_ptr, n):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n).to(DTYPE)
    tl.store(x_ptr + offsets, helper(x) * SCALE, mask=offsets < n)


@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n"])
@triton.jit
def autotuned_plain_global(x_ptr, n):
    tl.store(x_ptr, SCALE)


@triton.jit
def argument_shadows(x_ptr, SCALE):
    tl.store(x_ptr, SCALE + math.pi)


def host_code(x):
    return x * SCALE
"""


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, name: str) -> ModuleType:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_plain_globals_read_by_kernels_are_found_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _load(tmp_path, monkeypatch, KERNELS, "jit_globals_case")
    assert non_constexpr_globals(module) == [
        "autotuned_plain_global: SCALE",
        "plain_global: SCALE",
    ]


def test_constexpr_globals_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = KERNELS.replace("SCALE = 1.4426950408889634", "SCALE = tl.constexpr(1.4426950408889634)")
    assert non_constexpr_globals(_load(tmp_path, monkeypatch, fixed, "jit_globals_fixed")) == []


def test_the_interpreted_candidate_fails_to_load_as_it_would_fail_to_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kernel.py").write_text(KERNELS)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("kernel", None)
    with pytest.raises(NameError, match="plain_global: SCALE"):
        import_candidate("kernel")
    assert "kernel" not in sys.modules
