"""What a confined step sees of the machine's GPUs and socket files, on a real GPU host.

For each GPU, a step command runs behind the evaluator's own sandbox (`Sandbox.wrap`, the exec
path) masked to that GPU, once with the step's GPU named (`AKA_GPU_UUID`, as the evaluator sets
it for a step masked to one GPU) and once without: it lists the NVIDIA nodes of its /dev, runs a
kernel, and tries a socket file bound outside. Exits non-zero unless the kernel ran in every row,
a named step saw only its own GPU node and no step reached the socket.

    PYTHONPATH=src python3 scripts/gpu_isolation_check.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aka.device import detect_devices  # noqa: E402
from aka.evaluation.confine import ENV_GPU_UUID, gpu_minor  # noqa: E402
from aka.evaluation.sandbox import detect_sandbox  # noqa: E402

PROBE = """
import json, os, socket, sys, torch
seen = {"nodes": sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())}
try:
    seen["kernel"] = float((torch.ones(1024, device="cuda") * 2).sum().item())
    seen["devices"] = torch.cuda.device_count()
except Exception as exc:
    seen["kernel"] = f"{type(exc).__name__}: {exc}"
try:
    socket.socket(socket.AF_UNIX).connect(sys.argv[1])
    seen["socket"] = "reached"
except OSError as exc:
    seen["socket"] = type(exc).__name__
print(json.dumps(seen))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sandbox = detect_sandbox()
    host_nodes = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    lines = [
        f"sandbox features: {', '.join(sandbox.features)}; host GPU nodes: {', '.join(host_nodes)}",
        "",
        "| GPU | uuid | driver minor | AKA_GPU_UUID | nodes inside | kernel | devices | socket |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = sandbox.confines
    with tempfile.TemporaryDirectory() as folder:
        service = socket.socket(socket.AF_UNIX)
        service.bind(str(Path(folder) / "host.sock"))
        service.listen()
        for device in detect_devices():
            if not device.is_gpu or device.uuid is None:
                lines.append("| (no GPU) |")
                ok = False
                continue
            for named in (True, False):
                env = {**os.environ, "CUDA_VISIBLE_DEVICES": device.uuid}
                env.pop(ENV_GPU_UUID, None)
                if named:
                    env[ENV_GPU_UUID] = device.uuid
                argv = sandbox.wrap([sys.executable, "-c", PROBE, str(Path(folder) / "host.sock")], [folder])
                done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
                try:
                    seen = json.loads(done.stdout.strip().splitlines()[-1])
                except (IndexError, ValueError):
                    seen = {"kernel": f"exit {done.returncode}: {done.stderr[-300:]!r}"}
                minor = gpu_minor(device.uuid)
                nodes = seen.get("nodes", [])
                ok &= seen.get("kernel") == 2048.0 and seen.get("socket") != "reached"
                if named and minor is not None:
                    ok &= nodes == [f"nvidia{minor}"]
                lines.append(
                    f"| {device.index} | {device.uuid} | {minor} | {'set' if named else 'unset'} | "
                    f"{' '.join(nodes)} | {seen.get('kernel')} | {seen.get('devices')} | {seen.get('socket')} |"
                )
        service.close()
    lines.append(f"\nverdict: {'PASS' if ok else 'FAIL'}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
