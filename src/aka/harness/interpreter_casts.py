"""bfloat16 conversions under Triton's interpreter, rounded as the GPU rounds them.

Compiled Triton converts float32 to bfloat16 rounding to nearest, ties to even (`cvt.rn.bf16.f32`),
as PyTorch does. The interpreter (`TRITON_INTERPRET=1`, our CPU profile; checked on Triton 3.9)
truncates the mantissa instead, and turns a float64 or integer value into bfloat16 by reinterpreting
integers. A kernel that rounds its products to bfloat16 before subtracting them (RoPE, as its task
requires) then differs from the reference by 8 ulps where the terms cancel: an honest candidate
failed about one evaluation seed in 150 on the CPU and never on the GPU. Installing this keeps the
CPU verdict equal to the GPU's for bfloat16 rounding.
"""

from __future__ import annotations

import numpy as np

_installed = False


def float_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of `values`, rounded to nearest even; NaN stays a quiet NaN."""
    single = np.ascontiguousarray(values, dtype=np.float32)
    bits = single.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | 0x0040).astype(np.uint16)
    return np.where(np.isnan(single), quiet_nan, rounded).reshape(np.shape(values))


def bfloat16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def install_bfloat16_rounding() -> None:
    """Patch the interpreter's casts to and from bfloat16 (idempotent; a no-op without Triton)."""
    global _installed
    if _installed:
        return
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    builder = interpreter.InterpreterBuilder
    original = builder.cast_impl

    def cast_impl(self: object, src: interpreter.TensorHandle, dst_type: tl.dtype) -> interpreter.TensorHandle:
        source, target = src.dtype.scalar, dst_type.scalar
        if tl.bfloat16 not in (source, target) or source == target:
            return original(self, src, dst_type)
        values = bfloat16_bits_to_float(src.data) if source == tl.bfloat16 else src.data
        if target == tl.bfloat16:
            data = float_to_bfloat16_bits(values)
        else:
            data = values.astype(interpreter._get_np_dtype(dst_type))
        return interpreter.TensorHandle(data, target)

    builder.cast_impl = cast_impl
    _installed = True
