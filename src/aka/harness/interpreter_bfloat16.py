"""bfloat16 under Triton's interpreter, computed as the GPU computes it.

Our CPU profile runs Triton kernels in the interpreter (`TRITON_INTERPRET=1`), which keeps a
bfloat16 tensor as its uint16 bit patterns and, checked on Triton 3.9, mostly computes on those
bits as if they were integers:

- Casts. Compiled Triton converts float32 to bfloat16 rounding to nearest, ties to even
  (`cvt.rn.bf16.f32`), as PyTorch does; the interpreter truncates the mantissa, and turns a
  float64 or integer value into bfloat16 by reinterpreting integers. A kernel that rounds its
  products to bfloat16 before subtracting them (RoPE, as its task requires) then differs from the
  reference by 8 ulps where the terms cancel: an honest candidate failed about one evaluation
  seed in 150 on the CPU and never on the GPU.
- Arithmetic, comparisons, min/max, fma, `tl.dot`, reductions and scans on bfloat16 values (no
  upcast first, which is valid Triton): integer math on the bit patterns, results off by up to 1e38.

Installing this decodes bfloat16 operands to float32, computes, and rounds results back to
nearest even (comparisons stay booleans), so a CPU verdict on bfloat16 code is the GPU's up to
the order of summation.
"""

from __future__ import annotations

from typing import Any

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


def _patch_builder(interpreter: Any, tl: Any) -> None:
    """Casts, elementwise arithmetic, comparisons, fma and dots on bfloat16 handles."""
    builder = interpreter.InterpreterBuilder
    Handle = interpreter.TensorHandle
    original = {
        name: getattr(builder, name)
        for name in ("cast_impl", "create_dot", "binary_op", "unary_op", "ternary_op", "create_fma")
    }

    def is_bf16(handle: Any) -> bool:
        return bool(handle.dtype.scalar == tl.bfloat16)

    def value(handle: Any) -> Any:
        return Handle(bfloat16_bits_to_float(handle.data), tl.float32) if is_bf16(handle) else handle

    def result(output: np.ndarray) -> Any:
        """A bfloat16 result, or a comparison's booleans."""
        if output.dtype == np.bool_:
            return Handle(output, tl.int1)
        return Handle(float_to_bfloat16_bits(output), tl.bfloat16)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        source, target = src.dtype.scalar, dst_type.scalar
        if tl.bfloat16 not in (source, target) or source == target:
            return original["cast_impl"](self, src, dst_type)
        values = bfloat16_bits_to_float(src.data) if source == tl.bfloat16 else src.data
        if target == tl.bfloat16:
            return Handle(float_to_bfloat16_bits(values), target)
        return Handle(values.astype(interpreter._get_np_dtype(dst_type)), target)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any) -> Any:
        return original["create_dot"](self, value(a), value(b), d, *args)

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return original["binary_op"](self, lhs, rhs, op)
        return result(op(value(lhs).data, value(rhs).data))

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if not is_bf16(arg):
            return original["unary_op"](self, arg, op)
        return result(op(value(arg).data))

    def ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if not is_bf16(other):
            return original["ternary_op"](self, lhs, rhs, other, op)
        return result(op(value(lhs).data, value(rhs).data, value(other).data))

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if not is_bf16(z):
            return original["create_fma"](self, x, y, z)
        product = np.multiply(value(x).data, value(y).data, dtype=np.float64)
        return result(np.add(product, value(z).data, dtype=np.float64).astype(np.float32))

    for name, patched in (
        ("cast_impl", cast_impl),
        ("create_dot", create_dot),
        ("binary_op", binary_op),
        ("unary_op", unary_op),
        ("ternary_op", ternary_op),
        ("create_fma", create_fma),
    ):
        setattr(builder, name, patched)


def _patch_reductions(interpreter: Any, tl: Any) -> None:
    """tl.sum/min/max/argmin/argmax and cumsum/cumprod, which run numpy on the raw handle data."""

    def on_values(method: Any) -> Any:
        def patched(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            tensor = input[0] if isinstance(input, tuple) else input
            if tensor.dtype.scalar != tl.bfloat16:
                return method(self, input, *args, **kwargs)
            values = tl.core.tensor(
                interpreter.TensorHandle(bfloat16_bits_to_float(tensor.handle.data), tl.float32),
                tensor.type.with_element_ty(tl.float32) if tensor.type.is_block() else tl.float32,
            )
            outputs = method(self, values, *args, **kwargs)
            single = not isinstance(outputs, (list, tuple))
            fixed = [
                self.to_tensor(float_to_bfloat16_bits(o.handle.data), tl.bfloat16)
                if o.dtype.scalar == tl.float32
                else o
                for o in ([outputs] if single else outputs)
            ]
            return fixed[0] if single else type(outputs)(fixed)

        return patched

    for owner, names in ((interpreter.ReduceOps, ("sum", "min_max")), (interpreter.ScanOps, ("cumsum", "cumprod"))):
        for name in names:
            setattr(owner, name, on_values(getattr(owner, name)))


def install() -> None:
    """Patch the interpreter's bfloat16 arithmetic (idempotent; a no-op without Triton)."""
    global _installed
    if _installed:
        return
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    _patch_builder(interpreter, tl)
    _patch_reductions(interpreter, tl)
    _installed = True
