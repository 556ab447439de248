"""Memory the judge owns and lends to a worker: inputs it writes, outputs the worker copies into.

An `Arena` is one allocation holding only shared tensors (on a GPU memory of its own from
`cuMemCreate`, so what the worker maps reaches nothing else of the judge; on the CPU memfds),
passed to the worker as file descriptors and carved into named tensors at aligned offsets. The
judge keeps everything it judges by (expected outputs, the pristine inputs, snapshots of the
outputs) in its own memory, outside every arena.

A memfd is a file: the step's per-file limit (`RLIMIT_FSIZE`, 1 GiB) bounds each one, so a larger
CPU arena is several memfds mapped back to back into one reserved range (`_host_memory`): before,
`ftruncate` failed past the limit and the judge's own failure was charged to the candidate as a
crash (KernelBench level 1's 6 GiB inputs on the CPU).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import resource
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from aka.harness import cuda_driver
from aka.harness.cases import dtype_name, parse_dtype
from aka.harness.link import MAX_FDS

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


_PAGE = mmap.PAGESIZE
_MAP_FIXED = 0x10  # Linux's values (the mmap module exposes neither)
_MAP_NORESERVE = 0x4000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def chunk_sizes(nbytes: int, limit: int) -> list[int]:
    """Memfd sizes for `nbytes`: each at most `limit` (whole pages), the last what is left."""
    step = max(limit // _PAGE * _PAGE, _PAGE)
    return [min(step, nbytes - start) for start in range(0, nbytes, step)] or [nbytes]


def _file_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return 1 << 62 if soft == resource.RLIM_INFINITY else soft


def _check_mmap(address: int | None, what: str) -> int:
    if address is None or address == ctypes.c_void_p(-1).value:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return address


def _host_memory(fds: Sequence[int], sizes: Sequence[int]) -> torch.Tensor:
    """One byte tensor over `fds` mapped back to back (shared); unmapped once nothing uses it."""
    if len(fds) == 1:
        return torch.frombuffer(mmap.mmap(fds[0], sizes[0]), dtype=torch.uint8)
    total = sum(sizes)
    base = _check_mmap(
        _libc.mmap(None, total, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0), "reserving"
    )
    offset = 0
    try:
        for fd, size in zip(fds, sizes, strict=True):
            flags = mmap.MAP_SHARED | _MAP_FIXED
            where = _libc.mmap(base + offset, size, mmap.PROT_READ | mmap.PROT_WRITE, flags, fd, 0)
            if _check_mmap(where, "mapping an arena's part") != base + offset:
                raise OSError(f"an arena's part was mapped at {where:#x}, not {base + offset:#x}")
            offset += size
    except OSError:
        _libc.munmap(base, total)
        raise

    class _Span(ctypes.c_uint8 * total):  # type: ignore[misc]
        pass

    span = _Span.from_address(base)
    weakref.finalize(span, _libc.munmap, base, total)  # torch's tensor holds `span` while it lives
    return torch.frombuffer(span, dtype=torch.uint8)


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
    fds: list[int] = field(default_factory=list)
    mapping: cuda_driver.Mapping | None = None
    chunks: list[int] = field(default_factory=list)  # on the CPU: each memfd's size, in order

    @classmethod
    def allocate(cls, device: torch.device, layout: Layout) -> Arena:
        offsets, nbytes = _offsets(layout)
        if device.type == "cuda":
            mapping = cuda_driver.export(nbytes)
            memory = cuda_driver.byte_tensor(mapping.pointer, mapping.nbytes)
            return cls(device, layout, mapping.nbytes, _carve(memory, layout, offsets), [mapping.fd], mapping)
        sizes = chunk_sizes(nbytes, _file_limit())
        if len(sizes) > MAX_FDS:
            limit = f"{len(sizes)} files of the step's size limit; at most {MAX_FDS}"
            raise OSError(errno.EFBIG, f"{nbytes} bytes need {limit}")
        fds: list[int] = []
        try:
            for size in sizes:
                fds.append(os.memfd_create("aka-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING))
                os.ftruncate(fds[-1], size)
                # sealed at its size: a worker that shrank it would make the judge's reads a SIGBUS
                fcntl.fcntl(fds[-1], fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            memory = _host_memory(fds, sizes)
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return cls(device, layout, nbytes, _carve(memory, layout, offsets), fds, chunks=sizes)

    def descriptor(self) -> dict[str, object]:
        """What the worker opens it from (its file descriptors travel beside it)."""
        return {
            "device": self.device.type,
            "nbytes": self.nbytes,
            "chunks": self.chunks,
            "layout": [_described(slot) for slot in self.layout],
        }

    def close(self) -> None:
        """Only once the worker has closed its mapping (or is gone)."""
        self.tensors.clear()
        if self.mapping is not None:
            cuda_driver.release(self.mapping)
            self.mapping = None
        for fd in self.fds:
            os.close(fd)
        self.fds = []


@dataclass
class OpenedArena:
    """A worker's mapping of the judge's arena."""

    tensors: dict[str, torch.Tensor]
    mapping: cuda_driver.Mapping | None = None

    @classmethod
    def open(cls, descriptor: dict[str, object], fds: Sequence[int]) -> OpenedArena:
        raw_layout = descriptor["layout"]
        assert isinstance(raw_layout, list)
        layout = [_parsed(raw) for raw in raw_layout]
        offsets, nbytes = _offsets(layout)
        assert fds, "an arena comes with its file descriptors"
        try:
            if descriptor["device"] == "cuda":
                exported = descriptor["nbytes"]
                assert isinstance(exported, int) and exported >= nbytes
                mapping = cuda_driver.import_fd(fds[0], exported)
                return cls(_carve(cuda_driver.byte_tensor(mapping.pointer, exported), layout, offsets), mapping)
            raw_chunks = descriptor.get("chunks") or [nbytes]
            assert isinstance(raw_chunks, list) and len(raw_chunks) == len(fds)
            sizes = [int(size) for size in raw_chunks]
            assert sum(sizes) == nbytes, "an arena's parts add up to its layout"
            return cls(_carve(_host_memory(fds, sizes), layout, offsets))
        finally:
            for fd in fds:
                os.close(fd)

    def close(self) -> None:
        self.tensors.clear()
        if self.mapping is not None:
            cuda_driver.release(self.mapping)
            self.mapping = None
