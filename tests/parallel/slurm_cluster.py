"""A real single-node Slurm for the tests: munged, slurmctld and slurmd on 127.0.0.1, started as
background daemons in a temporary folder, with two "GPUs" declared as gres backed by character
devices made with mknod (so Slurm's per-task masking, CUDA_VISIBLE_DEVICES, is real).

No cgroups (there may be no systemd): proctrack/linuxproc, task/none. Accounting is off, so sacct
knows nothing; `scontrol`/`squeue` keep finished jobs for MinJobAge. Ports are picked free, so
two of these (two test workers) can run side by side.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo")
NODE = "akanode"
GPUS = 2
UP_TIMEOUT = 60.0


def missing_reason() -> str | None:
    """Why a cluster cannot be started here (None: it can), installing the packages when root
    and apt-get allow it (as `make install-test` does)."""
    if not all(shutil.which(tool) for tool in DAEMONS):
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            return f"Slurm is not installed and cannot be here (needs root and apt-get): {', '.join(PACKAGES)}"
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        done = subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, check=False)
            done = subprocess.run(
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
        if done.returncode != 0:
            return f"apt-get install {' '.join(PACKAGES)} failed: {done.stderr.strip().splitlines()[-1:]}"
    if os.geteuid() != 0:
        return "a test Slurm needs root (mknod for the GPU device nodes, slurmd running jobs as their user)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SlurmCluster:
    root: Path
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def gpu_files(self) -> list[Path]:
        return [self.root / "dev" / f"nvidia{i}" for i in range(GPUS)]

    def write_config(self) -> None:
        for folder in ("state", "spool", "log", "dev", "munge"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        for index, device in enumerate(self.gpu_files()):
            os.mknod(device, 0o666 | 0o020000, os.makedev(195, index))  # S_IFCHR, like /dev/nvidiaN
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=akatest",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={r / 'munge' / 'munge.socket'}",
                    "CredType=cred/munge",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "MpiDefault=none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "GresTypes=gpu",
                    "ReturnToService=2",
                    "InactiveLimit=0",
                    "KillWait=5",
                    "MinJobAge=600",
                    "SchedulerParameters=sched_interval=1",
                    f"NodeName={NODE} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:{GPUS} State=UNKNOWN",
                    f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        (r / "gres.conf").write_text(f"NodeName={NODE} Name=gpu File={r / 'dev'}/nvidia[0-{GPUS - 1}]\n")

    def start(self) -> None:
        self.write_config()
        m = self.root / "munge"
        self._daemon(
            [
                "munged",
                "-F",
                "-f",
                f"--socket={m / 'munge.socket'}",
                f"--key-file={m / 'munge.key'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--seed-file={m / 'munged.seed'}",
                f"--log-file={m / 'munged.log'}",
            ],
            "munged",
        )
        self._wait(lambda: (m / "munge.socket").exists(), "munged's socket")
        self._daemon(["slurmctld", "-D", "-f", str(self.conf)], "slurmctld")
        self._daemon(["slurmd", "-D", "-N", NODE, "-f", str(self.conf)], "slurmd")
        self._wait(self._node_idle, "the node to be idle in sinfo")

    def _daemon(self, argv: list[str], name: str) -> None:
        out = (self.root / "log" / f"{name}.out").open("ab")
        self.daemons.append(
            subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        )

    def _node_idle(self) -> bool:
        done = subprocess.run(
            ["sinfo", "-h", "-n", NODE, "-o", "%T"], capture_output=True, text=True, env=self.env, check=False
        )
        return done.stdout.strip() == "idle"

    def _wait(self, ready, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + UP_TIMEOUT
        while time.monotonic() < deadline:
            if ready():
                return
            if any(d.poll() is not None for d in self.daemons):
                break
            time.sleep(0.25)
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted((self.root / "log").glob("*")))
        raise RuntimeError(f"test Slurm: no {what} within {UP_TIMEOUT:.0f} s\n{logs}")

    @contextmanager
    def environment(self) -> Iterator[None]:
        """SLURM_CONF set in this process (for calling aka.parallel.slurm directly)."""
        before = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(self.conf)
        try:
            yield
        finally:
            if before is None:
                del os.environ["SLURM_CONF"]
            else:
                os.environ["SLURM_CONF"] = before

    def scontrol(self, *args: str) -> str:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, env=self.env, check=True).stdout

    def stop(self) -> None:
        """Every job cancelled, then the daemons (slurmd last: it reaps the steps) and munged."""
        subprocess.run(["scancel", "--full", "-p", "debug"], env=self.env, capture_output=True, check=False)
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline
            and subprocess.run(
                ["squeue", "-h"], capture_output=True, text=True, env=self.env, check=False
            ).stdout.strip()
        ):
            time.sleep(0.5)
        for daemon in reversed(self.daemons):
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
        self.daemons.clear()
