"""Memory the judge owns and lends to a worker: inputs it writes, outputs the worker copies into.

An `Arena` is one allocation holding only shared tensors (on a GPU memory of its own from
`cuMemCreate`, so what the worker maps reaches nothing else of the judge; on the CPU a memfd),
passed to the worker as a file descriptor and carved into named tensors at aligned offsets. The
judge keeps everything it judges by (expected outputs, the pristine inputs, snapshots of the
outputs) in its own memory, outside every arena.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from aka.harness import cuda_driver
from aka.harness.cases import dtype_name, parse_dtype

ALIGN = 512


class Slot(NamedTuple):
    """One tensor of an arena; `stride` keeps an input's layout (a column-major operand stays one)."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...] | None = None

    @classmethod
    def like(cls, name: str, tensor: torch.Tensor) -> Slot:
        """Strides of a dense tensor are kept; an overlapping or gapped one (expanded, sliced) is
        lent contiguous, since a copy cannot write through aliasing elements."""
        return cls(name, tuple(tensor.shape), tensor.dtype, tuple(tensor.stride()) if _dense(tensor) else None)

    def elements(self) -> int:
        """How many elements its storage spans."""
        if any(size == 0 for size in self.shape):
            return 0
        if self.stride is None:
            return _numel(self.shape)
        return 1 + sum((size - 1) * step for size, step in zip(self.shape, self.stride, strict=True))


Layout = Sequence[Slot]


def _dense(tensor: torch.Tensor) -> bool:
    """Its elements fill a block of memory exactly once, in some order of the dimensions."""
    expected = 1
    for step, size in sorted(
        (step, size) for step, size in zip(tensor.stride(), tensor.shape, strict=True) if size > 1
    ):
        if step != expected:
            return False
        expected *= size
    return True


def _offsets(layout: Layout) -> tuple[dict[str, int], int]:
    offsets: dict[str, int] = {}
    end = 0
    for slot in layout:
        offsets[slot.name] = end
        nbytes = max(1, slot.elements()) * _itemsize(slot.dtype)
        end += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    return offsets, max(end, ALIGN)


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _carve(memory: torch.Tensor, layout: Layout, offsets: dict[str, int]) -> dict[str, torch.Tensor]:
    tensors = {}
    for slot in layout:
        start = offsets[slot.name]
        flat = memory[start : start + slot.elements() * _itemsize(slot.dtype)].view(slot.dtype)
        if slot.stride is None:
            tensors[slot.name] = flat.view(slot.shape)
        else:
            tensors[slot.name] = flat.as_strided(slot.shape, slot.stride)
    return tensors


def _described(slot: Slot) -> list[object]:
    return [slot.name, list(slot.shape), dtype_name(slot.dtype), None if slot.stride is None else list(slot.stride)]


def _parsed(raw: object) -> Slot:
    assert isinstance(raw, list | tuple) and len(raw) == 4, "an arena slot is [name, shape, dtype, stride]"
    name, shape, dtype, stride = raw
    return Slot(
        str(name),
        tuple(int(size) for size in shape),
        parse_dtype(str(dtype)),
        None if stride is None else tuple(int(step) for step in stride),
    )


@dataclass
class Arena:
    """The judge's side of one shared allocation."""

    device: torch.device
    layout: Layout
    nbytes: int
    tensors: dict[str, torch.Tensor]
    fd: int = -1
    mapping: cuda_driver.Mapping | None = None

    @classmethod
    def allocate(cls, device: torch.device, layout: Layout) -> Arena:
        offsets, nbytes = _offsets(layout)
        if device.type == "cuda":
            mapping = cuda_driver.export(nbytes)
            memory = cuda_driver.byte_tensor(mapping.pointer, mapping.nbytes)
            return cls(device, layout, mapping.nbytes, _carve(memory, layout, offsets), mapping.fd, mapping)
        fd = os.memfd_create("aka-arena", os.MFD_CLOEXEC)
        os.ftruncate(fd, nbytes)
        memory = torch.frombuffer(mmap.mmap(fd, nbytes), dtype=torch.uint8)
        return cls(device, layout, nbytes, _carve(memory, layout, offsets), fd=fd)

    def descriptor(self) -> dict[str, object]:
        """What the worker opens it from (its file descriptor travels beside it)."""
        return {"device": self.device.type, "nbytes": self.nbytes, "layout": [_described(slot) for slot in self.layout]}

    def close(self) -> None:
        """Only once the worker has closed its mapping (or is gone)."""
        self.tensors.clear()
        if self.mapping is not None:
            cuda_driver.release(self.mapping)
            self.mapping = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class OpenedArena:
    """A worker's mapping of the judge's arena."""

    tensors: dict[str, torch.Tensor]
    mapping: cuda_driver.Mapping | None = None

    @classmethod
    def open(cls, descriptor: dict[str, object], fd: int | None) -> OpenedArena:
        raw_layout = descriptor["layout"]
        assert isinstance(raw_layout, list)
        layout = [_parsed(raw) for raw in raw_layout]
        offsets, nbytes = _offsets(layout)
        assert fd is not None, "an arena comes with its file descriptor"
        if descriptor["device"] == "cuda":
            exported = descriptor["nbytes"]
            assert isinstance(exported, int) and exported >= nbytes
            try:
                mapping = cuda_driver.import_fd(fd, exported)
            finally:
                os.close(fd)
            return cls(_carve(cuda_driver.byte_tensor(mapping.pointer, exported), layout, offsets), mapping)
        memory = torch.frombuffer(mmap.mmap(fd, nbytes), dtype=torch.uint8)
        os.close(fd)
        return cls(_carve(memory, layout, offsets))

    def close(self) -> None:
        self.tensors.clear()
        if self.mapping is not None:
            cuda_driver.release(self.mapping)
            self.mapping = None
