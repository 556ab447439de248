"""bfloat16 rounding under Triton's interpreter equals PyTorch's (and the GPU's): nearest, ties to even."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from aka.harness.candidates import import_candidate
from aka.harness.cases import Case, make_generator
from aka.harness.interpreter_casts import bfloat16_bits_to_float, float_to_bfloat16_bits

TASKS = Path(__file__).resolve().parents[1] / "tasks"

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def to_bf16(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, x.to(tl.bfloat16), mask=offsets < n)


@triton.jit
def to_bf16_rtz(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, x.to(tl.bfloat16, fp_downcast_rounding="rtz"), mask=offsets < n)


@triton.jit
def convert(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Whatever the pointers' types are: the store casts to out_ptr's element type."""
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets, x, mask=offsets < n)


@triton.jit
def product_difference(a_ptr, b_ptr, c_ptr, d_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """RoPE's first half: r(r(a * b) - r(c * d)), products in float32, r() rounding to bfloat16."""
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=mask).to(tl.float32)
    c = tl.load(c_ptr + offsets, mask=mask).to(tl.float32)
    d = tl.load(d_ptr + offsets, mask=mask).to(tl.float32)
    out = (a * b).to(tl.bfloat16).to(tl.float32) - (c * d).to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + offsets, out.to(tl.bfloat16), mask=mask)
'''


def _hard_floats() -> torch.Tensor:
    """Random float32 spanning the range, exact ties both ways, carries into the exponent, specials."""
    generator = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 2**32, (4000,), generator=generator, dtype=torch.int64)
    random = (bits - 2**31).to(torch.int32).view(torch.float32)
    ties = torch.tensor([0x3F808000, 0x3F818000, 0xBF808000, 0x3F7FFFFF, 0x3F7F8000, 0x7F7FFFFF,
                         0x7F7F8000, 0x00008000, 0x00018000, 0x00000001], dtype=torch.int64)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -3e38, 65504.0])
    return torch.cat([random, (ties - (ties >= 2**31).long() * 2**32).to(torch.int32).view(torch.float32), specials])


def _same(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Bit-equal, except that any NaN matches any NaN."""
    nan = expected.isnan()
    return bool(torch.equal(got.isnan(), nan)) and bool(torch.equal(got[~nan].view(torch.int16),
                                                                    expected[~nan].view(torch.int16)))


def test_the_bit_conversion_equals_pytorchs() -> None:
    values = _hard_floats()
    bits = float_to_bfloat16_bits(values.numpy())
    assert _same(torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16), values.to(torch.bfloat16))
    back = bfloat16_bits_to_float(bits)
    assert np.array_equal(back[~np.isnan(back)], values.to(torch.bfloat16).float().numpy()[~np.isnan(back)])


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """The kernels above, imported as the harness imports a candidate under the CPU profile."""
    (tmp_path / "cast_kernels.py").write_text(KERNELS)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("cast_kernels", None)
    yield import_candidate("cast_kernels")
    sys.modules.pop("cast_kernels", None)


def _launch(kernel: object, *tensors: torch.Tensor) -> None:
    n = tensors[0].numel()
    kernel[(1,)](*tensors, n, BLOCK=_block(n))  # type: ignore[index]


def _block(n: int) -> int:
    return 1 << max(n - 1, 1).bit_length()


def test_interpreted_kernels_round_to_nearest_even(kernels: object) -> None:
    values = _hard_floats()
    out = torch.empty(values.shape, dtype=torch.bfloat16)
    _launch(kernels.to_bf16, values, out)  # type: ignore[attr-defined]
    assert _same(out, values.to(torch.bfloat16))


def test_explicit_round_toward_zero_still_truncates(kernels: object) -> None:
    values = torch.tensor([1.0 + 2**-8 + 2**-12, -1.0 - 3 * 2**-9, 3.0])
    out = torch.empty(values.shape, dtype=torch.bfloat16)
    _launch(kernels.to_bf16_rtz, values, out)  # type: ignore[attr-defined]
    assert out.float().tolist() == [1.0, -1.0, 3.0]  # to nearest: 1.0078125 and -1.0078125


@pytest.mark.parametrize("source, target", [(torch.float64, torch.bfloat16), (torch.int32, torch.bfloat16),
                                            (torch.bfloat16, torch.int32), (torch.bfloat16, torch.float16),
                                            (torch.float16, torch.bfloat16), (torch.bfloat16, torch.float32)])
def test_other_conversions_through_bfloat16_are_value_conversions(kernels: object, source: torch.dtype,
                                                                  target: torch.dtype) -> None:
    """Value conversions, not bit reinterpretations (the interpreter turned the integer 3 into the bits 0x0003)."""
    values = torch.tensor([3.0, -7.0, 100.0, 0.5, 1.0 + 2**-8, -250.0, 1.5e4]).to(source)
    out = torch.empty(values.shape, dtype=target)
    _launch(kernels.convert, values, out)  # type: ignore[attr-defined]
    assert torch.equal(out, values.to(target))


def test_cancelling_rounded_products_match_pytorch_bit_for_bit(kernels: object) -> None:
    """The RoPE pattern that failed one CPU evaluation seed in ~150: now equal on every element."""
    generator = make_generator(7, "cpu")
    a, c = ((torch.randn(4096, generator=generator) * 3).bfloat16() for _ in range(2))
    b, d = (torch.rand(4096, generator=generator).bfloat16() for _ in range(2))
    out = torch.empty(4096, dtype=torch.bfloat16)
    _launch(kernels.product_difference, a, b, c, d, out)  # type: ignore[attr-defined]
    assert torch.equal(out, a * b - c * d)


def test_the_rotary_starting_kernel_equals_its_reference_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out case and seeds on which CI saw the untouched kernel fail (an 8-ulp cancellation)."""
    task_dir = TASKS / "torch2triton/llm/rotary_embedding"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(task_dir)
    monkeypatch.syspath_prepend(str(task_dir))
    for name in ("kernel", "harness"):
        sys.modules.pop(name, None)
    try:
        kernel = import_candidate("kernel")
        harness = import_candidate("harness")
        case = Case.make(batch=2, seqlen=3, heads=5, head_dim=80, dtype="bfloat16")
        for eval_seed in (11, 194):
            generator = make_generator(eval_seed ^ case.seed, "cpu")
            q, cos, sin = harness.TASK.make_inputs(case, generator, torch.device("cpu"))
            assert torch.equal(kernel.rotary_embedding(q, cos, sin), harness.reference(q, cos, sin))
    finally:
        for name in ("kernel", "harness"):
            sys.modules.pop(name, None)
