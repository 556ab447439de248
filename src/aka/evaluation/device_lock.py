"""Who may use a device now, across every aka process on this machine.

Timing is only honest on a device that nothing else uses: another process's kernels time-slice
with the timed calls. But most of an evaluation does not time anything (starting Python,
compiling, checking outputs), so several evaluations may share a device as long as a timed step
has it alone. Steps that use the device without timing hold it *shared* (any number at once);
a timed step holds it *exclusive*. Writers are preferred: a timed step that waits lets no new
shared holder in (a turnstile), so checks cannot starve the timing.

One pair of `flock` files per physical GPU (its UUID) in a machine-wide folder (`AKA_DEVICE_LOCK_DIR`, default
`<tmp>/aka-device-locks`, sticky and world-writable so that several users' runs coordinate). A
lock held by a process that dies is released by the kernel. On the CPU steps do not wait for
each other (`device_turn`): its timings are a smoke test, and on a machine of two cores the waits
would cost more than they keep out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aka.device import DeviceInfo

ENV_LOCK_DIR = "AKA_DEVICE_LOCK_DIR"


def lock_dir() -> Path:
    configured = os.environ.get(ENV_LOCK_DIR)
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / "aka-device-locks"
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            path.chmod(0o1777)
    return path


def device_key(device: DeviceInfo) -> str:
    """The physical device: its UUID where known (masks renumber devices), else its name."""
    raw = device.uuid or device.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


@dataclass(frozen=True)
class DeviceLock:
    """The device's lock; `hold(exclusive)` waits for it and returns the seconds waited."""

    key: str
    directory: Path

    @classmethod
    def for_device(cls, device: DeviceInfo) -> DeviceLock:
        return cls(device_key(device), lock_dir())

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[float]:
        """Through the turnstile, then the lock (exclusive or shared); the turnstile is kept only
        while waiting, so a waiting exclusive holder stops new shared holders at the turnstile."""
        started = time.monotonic()
        with contextlib.ExitStack() as held:
            with _flock(self.directory / f"{self.key}.turnstile", fcntl.LOCK_EX):
                held.enter_context(
                    _flock(self.directory / f"{self.key}.lock", fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                )
            yield time.monotonic() - started


@contextlib.contextmanager
def device_turn(device: DeviceInfo, exclusive: bool) -> Iterator[float]:
    """A step's turn on `device`: its `DeviceLock` on a GPU (the seconds waited), none on the CPU."""
    if not device.is_gpu:
        yield 0.0
        return
    with DeviceLock.for_device(device).hold(exclusive) as waited:
        yield waited
