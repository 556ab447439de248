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

import torch

from aka.harness import cuda_driver
from aka.harness.cases import dtype_name, parse_dtype

ALIGN = 512
Layout = Sequence[tuple[str, tuple[int, ...], torch.dtype]]


def _offsets(layout: Layout) -> tuple[dict[str, int], int]:
    offsets: dict[str, int] = {}
    end = 0
    for name, shape, dtype in layout:
        offsets[name] = end
        nbytes = max(1, _numel(shape)) * _itemsize(dtype)
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
    for name, shape, dtype in layout:
        nbytes = _numel(shape) * _itemsize(dtype)
        start = offsets[name]
        tensors[name] = memory[start:start + nbytes].view(dtype).view(shape)
    return tensors


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
        return {"device": self.device.type, "nbytes": self.nbytes,
                "layout": [(name, list(shape), dtype_name(dtype)) for name, shape, dtype in self.layout]}

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
        layout = [(str(name), tuple(int(size) for size in shape), parse_dtype(str(dtype)))
                  for name, shape, dtype in raw_layout]
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
