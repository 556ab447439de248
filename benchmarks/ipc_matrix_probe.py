"""Probe: under which conditions does a worker map the judge's shared GPU memory?

    python3 benchmarks/ipc_matrix_probe.py [--exporter-namespaced]

The exporter allocates with `aka.harness.cuda_driver.export` (a POSIX file descriptor handle)
and passes the descriptor to an importer process, which maps it and reads the first value.
Varied: the exporter undumpable or not, and the importer a plain child or started as aka's
workers are (fresh PID and mount namespaces, a /proc of its own, behind `aka.evaluation.confine`).
`--exporter-namespaced` re-runs this script as the exporter inside a PID namespace of its own,
as a step's judge runs (legacy CUDA IPC handles failed there with error 201).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from aka.evaluation.sandbox import confine_argv  # noqa: E402
from aka.harness import cuda_driver  # noqa: E402

IMPORTER = """
import os, sys
sys.path.insert(0, sys.argv[1])
import torch
from aka.harness import cuda_driver
torch.cuda.current_stream().synchronize()
try:
    mapping = cuda_driver.import_fd(int(sys.argv[2]), int(sys.argv[3]))
    print("OK", float(cuda_driver.byte_tensor(mapping.pointer, 4).view(torch.float32)[0]))
except Exception as exc:
    print("FAIL", exc)
"""


def main() -> int:
    if "--exporter-namespaced" in sys.argv:
        argv = ["unshare", "--pid", "--net", "--fork", "--kill-child", "--mount-proc", sys.executable, __file__]
        return subprocess.run(argv, check=False).returncode
    torch.cuda.current_stream().synchronize()
    mapping = cuda_driver.export(1 << 20)
    cuda_driver.byte_tensor(mapping.pointer, 4).view(torch.float32).fill_(42.0)
    torch.cuda.synchronize()
    os.set_inheritable(mapping.fd, True)
    src = str(Path(__file__).resolve().parents[1] / "src")
    libc = ctypes.CDLL(None)
    print(f"exporter pid {os.getpid()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        nested = ["unshare", "--pid", "--mount", "--fork", "--kill-child", "--mount-proc", *confine_argv([tmp], True)]
        for dumpable in (1, 0):
            libc.prctl(4, dumpable, 0, 0, 0)
            for label, prefix in (("plain child", []), ("nested + confine (workers)", nested)):
                done = subprocess.run(
                    [*prefix, sys.executable, "-c", IMPORTER, src, str(mapping.fd), str(mapping.nbytes)],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    pass_fds=(mapping.fd,),
                )
                print(
                    f"exporter dumpable={dumpable} | importer {label}: "
                    f"{(done.stdout.strip() or done.stderr.strip()[-300:])}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
