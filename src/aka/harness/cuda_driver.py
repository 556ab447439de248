"""The few CUDA driver calls the judge and its workers share memory and order work with.

Why the driver, not torch's allocator: sharing a torch tensor shares its whole allocation, and
torch's caching allocator packs many tensors into one; a worker given it could reach the judge's
other tensors there (its expected outputs). So every buffer the judge shares is memory of its own
(`cuMemCreate`), holding nothing but what is shared, exported as a file descriptor: legacy CUDA IPC
handles fail where the exporter runs in a PID namespace of its own (error 201 on the H200,
benchmarks/ipc_matrix_probe.py), and a descriptor passed over the link involves no PID at all.
The memory is reference-counted by the driver: it stays valid for a worker that still maps it
after the judge let go, and is never handed to anything else meanwhile.

Why stream flags: the judge's stream writes a flag that releases a worker's call and waits for the
flag the worker's stream writes when its output is complete, so the judge's own events around
that wait cover everything the worker's GPU did with the inputs (no host round trip inside).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_WAIT_GEQ = 0x0
_RESET_PERSISTING_L2 = "cuCtxResetPersistingL2Cache"


class CudaDriverError(RuntimeError):
    """A driver call failed (the message names it and its error code)."""


class CudaOutOfMemoryError(CudaDriverError):
    """A driver allocation failed for want of device memory (whoever filled it: the judge decides
    whom to blame, as for torch's own out-of-memory errors)."""


_OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY


@functools.cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


@functools.cache
def _function(name: str, *argtypes: Any) -> Callable[..., int]:
    for symbol in (f"{name}_v2", name):
        function = getattr(_libcuda(), symbol, None)
        if function is not None:
            function.argtypes = list(argtypes)
            function.restype = ctypes.c_int
            return function  # type: ignore[no-any-return]
    raise CudaDriverError(f"libcuda has no {name}")


def _check(name: str, code: int) -> None:
    if code == _OUT_OF_MEMORY:
        raise CudaOutOfMemoryError(f"{name} failed: out of memory (CUDA error {code})")
    if code != 0:
        raise CudaDriverError(f"{name} failed with CUDA error {code}")


def _current_context() -> None:
    """torch's context (the device's primary one) current on this thread, as the driver calls
    below need it: a library that loaded its own CUDA runtime may have left another current."""
    torch.cuda.current_stream().synchronize()
    device, primary, current = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    _check(
        "cuDeviceGet",
        _function("cuDeviceGet", ctypes.POINTER(ctypes.c_int), ctypes.c_int)(
            ctypes.byref(device), torch.cuda.current_device()
        ),
    )
    _check(
        "cuDevicePrimaryCtxRetain",
        _function("cuDevicePrimaryCtxRetain", ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)(
            ctypes.byref(primary), device
        ),
    )
    _check("cuCtxGetCurrent", _function("cuCtxGetCurrent", ctypes.POINTER(ctypes.c_void_p))(ctypes.byref(current)))
    if current.value != primary.value:
        _check("cuCtxSetCurrent", _function("cuCtxSetCurrent", ctypes.c_void_p)(primary))
    _check("cuDevicePrimaryCtxRelease", _function("cuDevicePrimaryCtxRelease", ctypes.c_int)(device))


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_PINNED, _POSIX_FD, _ON_DEVICE, _READ_WRITE = 1, 1, 1, 3


def _device() -> int:
    device = ctypes.c_int()
    _check(
        "cuDeviceGet",
        _function("cuDeviceGet", ctypes.POINTER(ctypes.c_int), ctypes.c_int)(
            ctypes.byref(device), torch.cuda.current_device()
        ),
    )
    return device.value


@dataclass(frozen=True)
class Mapping:
    """Physical device memory mapped at `pointer` here; `fd` (exporter only) shares it."""

    pointer: int
    nbytes: int
    handle: int
    fd: int = -1


def _map(handle: int, nbytes: int) -> int:
    pointer = ctypes.c_uint64()
    _check(
        "cuMemAddressReserve",
        _function(
            "cuMemAddressReserve",
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_size_t,
            ctypes.c_size_t,
            ctypes.c_uint64,
            ctypes.c_uint64,
        )(ctypes.byref(pointer), nbytes, 0, 0, 0),
    )
    _check(
        "cuMemMap",
        _function("cuMemMap", ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint64)(
            pointer.value, nbytes, 0, handle, 0
        ),
    )
    access = _AccessDesc(_Location(_ON_DEVICE, _device()), _READ_WRITE)
    _check(
        "cuMemSetAccess",
        _function("cuMemSetAccess", ctypes.c_uint64, ctypes.c_size_t, ctypes.POINTER(_AccessDesc), ctypes.c_size_t)(
            pointer.value, nbytes, ctypes.byref(access), 1
        ),
    )
    return pointer.value


def export(nbytes: int) -> Mapping:
    """New device memory of its own (at least `nbytes`), mapped here, with a file descriptor a
    worker imports it by (passed over the link: no PID or namespace is involved)."""
    _current_context()
    prop = _AllocationProp(_PINNED, _POSIX_FD, _Location(_ON_DEVICE, _device()), None, _AllocFlags())
    granularity = ctypes.c_size_t()
    _check(
        "cuMemGetAllocationGranularity",
        _function(
            "cuMemGetAllocationGranularity",
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(_AllocationProp),
            ctypes.c_int,
        )(ctypes.byref(granularity), ctypes.byref(prop), 0),
    )
    size = (max(nbytes, 1) + granularity.value - 1) // granularity.value * granularity.value
    handle = ctypes.c_uint64()
    _check(
        "cuMemCreate",
        _function(
            "cuMemCreate",
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_size_t,
            ctypes.POINTER(_AllocationProp),
            ctypes.c_uint64,
        )(ctypes.byref(handle), size, ctypes.byref(prop), 0),
    )
    fd = ctypes.c_int(-1)
    _check(
        "cuMemExportToShareableHandle",
        _function("cuMemExportToShareableHandle", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64)(
            ctypes.addressof(fd), handle.value, _POSIX_FD, 0
        ),
    )
    return Mapping(_map(handle.value, size), size, handle.value, fd.value)


def import_fd(fd: int, nbytes: int) -> Mapping:
    """Map the memory behind an exporter's file descriptor (`nbytes` as exported)."""
    _current_context()
    handle = ctypes.c_uint64()
    importer = _function(
        "cuMemImportFromShareableHandle", ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_int
    )
    _check("cuMemImportFromShareableHandle", importer(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD))
    return Mapping(_map(handle.value, nbytes), nbytes, handle.value)


def release(mapping: Mapping) -> None:
    """Unmap and drop this process's reference; the memory itself goes once no process holds it."""
    torch.cuda.synchronize()
    _check("cuMemUnmap", _function("cuMemUnmap", ctypes.c_uint64, ctypes.c_size_t)(mapping.pointer, mapping.nbytes))
    _check(
        "cuMemAddressFree",
        _function("cuMemAddressFree", ctypes.c_uint64, ctypes.c_size_t)(mapping.pointer, mapping.nbytes),
    )
    _check("cuMemRelease", _function("cuMemRelease", ctypes.c_uint64)(mapping.handle))


def wait_flag(stream: torch.cuda.Stream, pointer: int, value: int) -> None:
    """`stream` waits until the 32-bit flag at `pointer` is at least `value`."""
    _check(
        "cuStreamWaitValue32",
        _function("cuStreamWaitValue32", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint)(
            stream.cuda_stream, pointer, value, _WAIT_GEQ
        ),
    )


def write_flag(stream: torch.cuda.Stream, pointer: int, value: int) -> None:
    """`stream` writes `value` to the 32-bit flag at `pointer` once its earlier work is done."""
    _check(
        "cuStreamWriteValue32",
        _function("cuStreamWriteValue32", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint)(
            stream.cuda_stream, pointer, value, 0
        ),
    )


PERSISTING_L2_LIMIT = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE


def set_persisting_l2_limit(nbytes: int) -> None:
    _current_context()
    _check("cuCtxSetLimit", _function("cuCtxSetLimit", ctypes.c_int, ctypes.c_size_t)(PERSISTING_L2_LIMIT, nbytes))


def persisting_l2_limit() -> int:
    value = ctypes.c_size_t()
    _check(
        "cuCtxGetLimit",
        _function("cuCtxGetLimit", ctypes.POINTER(ctypes.c_size_t), ctypes.c_int)(
            ctypes.byref(value), PERSISTING_L2_LIMIT
        ),
    )
    return value.value


def reset_persisting_l2() -> None:
    """Persisting L2 lines back to normal, so the L2 flush evicts them too (a candidate that set
    an access-policy window must not keep its inputs in the L2 across the flush)."""
    try:
        function = _function(_RESET_PERSISTING_L2)
    except CudaDriverError:
        return
    _check(_RESET_PERSISTING_L2, function())


class _DeviceMemory:
    """`__cuda_array_interface__` over raw device memory, so torch can view it without a copy."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
            "strides": None,
        }


def byte_tensor(pointer: int, nbytes: int) -> torch.Tensor:
    """A uint8 tensor viewing `nbytes` of device memory at `pointer` (owned elsewhere)."""
    return torch.as_tensor(_DeviceMemory(pointer, nbytes), device="cuda")
