"""The few CUDA driver calls the judge and its workers share memory and order work with.

Why the driver, not torch's allocator: a CUDA IPC handle opens a whole allocation, and torch's
caching allocator packs many tensors into one; a worker given a torch tensor's handle could reach
the judge's other tensors in that allocation (its expected outputs). So every buffer the judge
shares is an allocation of its own (`cuMemAlloc`), holding nothing but what is shared.

Why stream flags: the judge's stream writes a flag that releases a worker's call and waits for the
flag the worker's stream writes when its output is complete, so the judge's own events around
that wait cover everything the worker's GPU did with the inputs (no host round trip inside).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import torch

IPC_HANDLE_BYTES = 64
_LAZY_ENABLE_PEER_ACCESS = 1
_WAIT_GEQ = 0x0
_RESET_PERSISTING_L2 = "cuCtxResetPersistingL2Cache"


class CudaDriverError(RuntimeError):
    """A driver call failed (the message names it and its error code)."""


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


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
    if code != 0:
        raise CudaDriverError(f"{name} failed with CUDA error {code}")


def _current_context() -> None:
    """torch's primary context, current on this thread (the driver calls below need one)."""
    torch.cuda.current_stream().synchronize()


def alloc(nbytes: int) -> int:
    _current_context()
    pointer = ctypes.c_uint64()
    _check("cuMemAlloc", _function("cuMemAlloc", ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)(
        ctypes.byref(pointer), max(nbytes, 1)))
    return pointer.value


def free(pointer: int) -> None:
    _check("cuMemFree", _function("cuMemFree", ctypes.c_uint64)(pointer))


def ipc_handle(pointer: int) -> bytes:
    handle = _IpcHandle()
    _check("cuIpcGetMemHandle", _function("cuIpcGetMemHandle", ctypes.POINTER(_IpcHandle), ctypes.c_uint64)(
        ctypes.byref(handle), pointer))
    return bytes(handle.reserved)


def ipc_open(handle: bytes) -> int:
    if len(handle) != IPC_HANDLE_BYTES:
        raise CudaDriverError("an IPC handle has 64 bytes")
    _current_context()
    pointer = ctypes.c_uint64()
    raw = _IpcHandle()
    raw.reserved = handle
    _check("cuIpcOpenMemHandle", _function("cuIpcOpenMemHandle", ctypes.POINTER(ctypes.c_uint64), _IpcHandle,
                                           ctypes.c_uint)(ctypes.byref(pointer), raw, _LAZY_ENABLE_PEER_ACCESS))
    return pointer.value


def ipc_close(pointer: int) -> None:
    _check("cuIpcCloseMemHandle", _function("cuIpcCloseMemHandle", ctypes.c_uint64)(pointer))


def wait_flag(stream: torch.cuda.Stream, pointer: int, value: int) -> None:
    """`stream` waits until the 32-bit flag at `pointer` is at least `value`."""
    _check("cuStreamWaitValue32", _function("cuStreamWaitValue32", ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                                            ctypes.c_uint)(stream.cuda_stream, pointer, value, _WAIT_GEQ))


def write_flag(stream: torch.cuda.Stream, pointer: int, value: int) -> None:
    """`stream` writes `value` to the 32-bit flag at `pointer` once its earlier work is done."""
    _check("cuStreamWriteValue32", _function("cuStreamWriteValue32", ctypes.c_void_p, ctypes.c_uint64,
                                             ctypes.c_uint32, ctypes.c_uint)(stream.cuda_stream, pointer, value, 0))


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
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 3, "strides": None}


def byte_tensor(pointer: int, nbytes: int) -> torch.Tensor:
    """A uint8 tensor viewing `nbytes` of device memory at `pointer` (owned elsewhere)."""
    return torch.as_tensor(_DeviceMemory(pointer, nbytes), device="cuda")
