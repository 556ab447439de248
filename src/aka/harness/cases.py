"""Test cases and their inputs: a stable id per case, and seeded, never-zero random tensors.

The id is what the evaluator matches baseline and candidate times by, so it is built from the
case's parameters alone and never changes between runs. The inputs come from a `torch.Generator`
seeded per case on the target device, so every process (baseline, candidate, reference) sees the
same data for the same case.
"""

from __future__ import annotations

import contextlib
import math
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

Param = str | int | float | bool | None
Distribution = Literal["normal", "uniform", "wide_uniform", "randint"]

_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
    "uint16": torch.uint16,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def parse_dtype(name: str) -> torch.dtype:
    """`float16` -> `torch.float16`; only the names the report can carry are accepted."""
    try:
        return _DTYPES[name.removeprefix("torch.")]
    except KeyError:
        raise ValueError(f"unknown dtype name '{name}'; known: {', '.join(_DTYPES)}") from None


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float16` -> `float16`, the spelling case ids and messages use."""
    return str(dtype).removeprefix("torch.")


def _id_part(key: str, value: Param) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return key if value else f"no{key}"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{key}{value:g}".replace(".", "p")
    return f"{key}{value}"


def case_id(params: Mapping[str, Param]) -> str:
    """Build `n1000003_float32` from `{"n": 1000003, "dtype": "float32"}`, in the order given.

    Numbers are prefixed by their key, strings stand alone (dtype names read well bare), booleans
    become the key or `no<key>`.
    """
    parts = [_id_part(key, value) for key, value in params.items()]
    text = "_".join(part for part in parts if part)
    return _UNSAFE_ID_CHARS.sub("-", text) or "case"


@dataclass(frozen=True)
class Case:
    """One test case: its stable id, scalar parameters (as reported) and the seed of its inputs."""

    id: str
    params: Mapping[str, Param] = field(default_factory=dict, hash=False)
    seed: int = 0

    def __post_init__(self) -> None:
        for key, value in self.params.items():
            if value is not None and not isinstance(value, str | int | float | bool):
                raise TypeError(f"case {self.id}: param '{key}' must be a scalar, not {type(value).__name__}")

    @classmethod
    def make(cls, seed: int | None = None, **params: Param) -> Case:
        """A case whose id comes from its params; the seed defaults to a hash of that id."""
        ident = case_id(params)
        return cls(ident, dict(params), zlib.crc32(ident.encode()) if seed is None else seed)

    def int_param(self, key: str) -> int:
        """An integer parameter (a size, a count), type-checked so a typo fails loudly."""
        value = self.params[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"case {self.id}: param '{key}' is not an integer")
        return value

    def dtype(self, key: str = "dtype") -> torch.dtype:
        """The torch dtype named by a string parameter (`dtype` by default)."""
        value = self.params[key]
        if not isinstance(value, str):
            raise TypeError(f"case {self.id}: param '{key}' is not a dtype name")
        return parse_dtype(value)


def sync(device: torch.device) -> None:
    """Wait for all device work (every stream), so nothing a call launched escapes a check."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_generator(seed: int, device: torch.device | str) -> torch.Generator:
    """A generator on the device the inputs live on, so no host-to-device copy is needed."""
    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(seed)
    return generator


_current_distribution: list[Distribution] = ["normal"]


@contextlib.contextmanager
def input_distribution(distribution: Distribution) -> Iterator[None]:
    """Inputs drawn inside the block use `distribution` unless a task names one explicitly: the
    harness rotates distributions between checks, so a kernel tuned to one shape of data fails."""
    _current_distribution.append(distribution)
    try:
        yield
    finally:
        _current_distribution.pop()


def random_tensor(
    shape: Sequence[int],
    dtype: torch.dtype,
    generator: torch.Generator,
    device: torch.device | str,
    distribution: Distribution | None = None,
    scale: float = 1.0,
    low: float = -1.0,
    high: float = 1.0,
) -> torch.Tensor:
    """A seeded random tensor: `normal` (std `scale`), `uniform` in [low, high), `randint` in [low, high).

    Values are drawn in float32 and cast, so the same case gives the same numbers in every dtype.
    Zeros would hide kernels that never write their output, hence random data always.
    """
    distribution = distribution or _current_distribution[-1]
    size = tuple(int(s) for s in shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, size, generator=generator, device=device).to(torch.bool)
    if distribution == "randint" or not dtype.is_floating_point:
        lo, hi = (int(low), int(high)) if distribution != "normal" else (-100, 100)
        if dtype == torch.uint8:
            lo, hi = max(lo, 0), max(hi, 1)
        return torch.randint(lo, hi, size, generator=generator, device=device, dtype=torch.int64).to(dtype)
    if distribution == "uniform":
        values = torch.rand(size, generator=generator, device=device, dtype=torch.float32)
        return (values * (high - low) + low).to(dtype)
    if distribution == "wide_uniform":
        values = torch.rand(size, generator=generator, device=device, dtype=torch.float32)
        return ((values * 2.0 - 1.0) * scale * math.sqrt(3.0)).to(dtype)
    values = torch.randn(size, generator=generator, device=device, dtype=torch.float32)
    return (values * scale).to(dtype)
