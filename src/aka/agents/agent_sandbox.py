"""Where an agent CLI's processes live.

By default (`sandbox: none`) an agent CLI sees the machine's files as its user does, behind a guard
(`guard_prefix`, bubblewrap): the whole file system read-only but its workspace and home (which
holds its TMPDIR), a read-only /dev of its own with only the GPUs' device files of the host and a
sized /dev/shm, the cluster's credentials hidden, the machine's bound Unix sockets masked (a
Docker socket would give it the host), no capability left, and a PID namespace of its own, and a
network namespace of its own whose only way out is the platform's egress gate
(`AgentNetwork`, `aka.agents.egress`: the model endpoints and public addresses, never this machine
or its private network; a red team's agent reached the run's Ray cluster and rewrote its own
result from a root actor outside the guard). What it may write is then exactly
what the judge frees and never runs. Before, an agent could edit the judge, the pristine task it is
judged from, its frozen baselines and other tasks' results; and with the capabilities dropped but
every file writable, a red team's agent (uid 0) replaced /usr/bin/unshare, which the judge ran with
full privileges for the next step: 25x for an untouched kernel. When the CLI (its namespace's first
process) ends or is killed, the kernel kills everything left in it: a process that left the CLI's
group and environment (`env -i setsid ...`) outlived the step before and throttled the evaluation
after it (16x unearned); nothing inside can see or signal the judge.
Without bubblewrap only the PID namespace stays (`pid_namespace_prefix`), with a warning (the
network is then the host's).

`sandbox: bwrap` also hides other runs, sibling experiments, the task suite and the solutions.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aka.agents import egress_relay
from aka.agents.egress import PROXY_PORT, Destination, gates_folder
from aka.agents.registry import AgentContext
from aka.evaluation.confine import bound_sockets, device_nodes
from aka.evaluation.device_lock import lock_dir
from aka.evaluation.sandbox import command_succeeds, cuda_works_behind

logger = logging.getLogger(__name__)

_PID_NAMESPACE_FLAGS = ["--pid", "--fork", "--mount-proc", "--kill-child"]

REPO_ROOT = Path(__file__).resolve().parents[3]


class SandboxUnavailableError(Exception):
    """The sandbox was asked for but cannot be set up on this machine."""


@functools.cache
def pid_namespace_prefix() -> tuple[str, ...]:
    """`unshare` in front of an agent CLI: its own PID namespace (and /proc showing only it), as the
    user it is (never mapped to root: CLIs refuse some modes as root). Probed once per process;
    empty (with a warning) where the machine allows none or AKA_NO_SANDBOX=1."""
    unshare = shutil.which("unshare")
    if unshare is None or os.environ.get("AKA_NO_SANDBOX") == "1":
        return ()
    as_self = ["--user", f"--map-user={os.getuid()}", f"--map-group={os.getgid()}"]
    for extra in ([], as_self):
        prefix = [unshare, *extra, *_PID_NAMESPACE_FLAGS]
        if command_succeeds([*prefix, "true"]) and cuda_works_behind(prefix):
            return tuple(prefix)
    logger.warning(
        "agent CLIs run without a PID namespace (unshare cannot make one here): a process that "
        "leaves their process group and environment can outlive the agent's step"
    )
    return ()


_GUARD_TAIL = ["--proc", "/proc", "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


@dataclass(frozen=True)
class AgentNetwork:
    """An agent's own network namespace: only loopback, where the relay (`aka.agents.egress_relay`,
    which then execs the CLI) listens and hands every connection to the gate's Unix socket.
    `loopback_endpoints` are model endpoints on the host's loopback: the relay serves each on its
    own port inside, for CLIs that never use a proxy for loopback."""

    gate_socket: Path
    loopback_endpoints: tuple[Destination, ...] = ()

    @property
    def proxy_port(self) -> int:
        taken = {endpoint.port for endpoint in self.loopback_endpoints}
        return next(port for port in range(PROXY_PORT, 65536) if port not in taken)

    @property
    def other_gates(self) -> Path | None:
        """The folder of every agent's gate (`egress.gates_folder`) where this gate is in it: hidden
        whole, so other agents' gates need no mask each (they come and go while this one starts)."""
        parent = self.gate_socket.parent.parent
        return parent if parent == gates_folder() else None

    def bwrap_args(self) -> list[str]:
        """A network namespace of its own, the gate's folder visible (also under a hidden one) and
        no other agent's gate."""
        folder = str(self.gate_socket.parent)
        hide = ["--tmpfs", str(self.other_gates)] if self.other_gates else []
        return ["--unshare-net", *hide, "--ro-bind", folder, folder]

    def relay_argv(self) -> list[str]:
        """The relay, up to its `--` (the CLI's argv follows)."""
        forwards = [arg for endpoint in self.loopback_endpoints for arg in ("--forward", str(endpoint))]
        return [
            sys.executable,
            "-I",
            "-S",
            str(Path(egress_relay.__file__).resolve()),
            "--gate",
            str(self.gate_socket),
            "--proxy-port",
            str(self.proxy_port),
            *forwards,
            "--",
        ]

    def environment(self) -> dict[str, str]:
        """The proxy variables every CLI and tool honours (loopback goes direct, to the relay)."""
        proxy = f"http://127.0.0.1:{self.proxy_port}"
        direct = ",".join(_LOOPBACK_NAMES)
        return {**dict.fromkeys(_PROXY_VARIABLES, proxy), "NO_PROXY": direct, "no_proxy": direct}


AGENT_SHM_BYTES = 2**30
"""The agent's /dev/shm: memory it may hold past its files (its /dev is otherwise read-only)."""


def _read_only_machine(gpu_uuid: str | None = None) -> list[str]:
    """The host's file system read-only and a /dev of bubblewrap's own (the host's gives a root
    without capabilities its raw disks) with the host's NVIDIA device files bound in (of the GPUs'
    own nodes only `gpu_uuid`'s where given and the driver names it: `confine.device_nodes`),
    read-only but a sized /dev/shm (a root could fill the /dev tmpfs with half the machine's memory)."""
    devices = []
    for name in device_nodes(gpu_uuid):
        if name.startswith("nvidia"):
            devices += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    shm = ["--size", str(AGENT_SHM_BYTES), "--tmpfs", "/dev/shm"]
    hidden = [arg for path in _cluster_credentials() for arg in ("--tmpfs", str(path))]
    hidden += ["--tmpfs", str(lock_dir())]  # an agent holding a GPU's lock would stall others' timed steps
    return ["--ro-bind", "/", "/", "--dev", "/dev", *devices, "--remount-ro", "/dev", *shm, *hidden]


def _masked_sockets(network: AgentNetwork | None) -> list[str]:
    """/dev/null over each Unix socket bound on the machine (a Docker or container runtime's would
    give the agent the host; a read-only mount does not stop `connect`, and a socket file reaches
    its service from any network namespace), except the egress gates (their folder is hidden whole
    and the agent's own bound back). After every other mount, so a socket in a folder bound back
    (the workspace) is covered too. A socket gone before bubblewrap starts fails that start (it
    cannot make a target on a read-only root): `cli_runner` then starts it again with a new list."""
    gates = [network.other_gates or network.gate_socket.parent] if network else []
    unmasked = [os.path.realpath(folder) for folder in gates]
    argv = []
    for path in dict.fromkeys(os.path.realpath(bound) for bound in bound_sockets()):  # bubblewrap
        # follows no link in a target (/var/run -> /run): a socket bound through one failed its start
        if any(path.startswith(folder + "/") for folder in unmasked):
            continue
        if path.startswith("/dev/"):  # its /dev is bubblewrap's own (no host socket), and read-only by then
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(path).st_mode):  # bubblewrap would fail creating a missing target
                argv += ["--ro-bind", "/dev/null", path]
    return argv


def _cluster_credentials() -> list[Path]:
    """Where the machine keeps what lets a process use its cluster services (Ray's session and
    token, Slurm's munge socket): hidden from agents. Partial: the network is shared (see
    docs/evaluation.md, Known gaps), so a service that asks for no credential stays reachable."""
    places = [Path("/tmp/ray"), Path.home() / ".ray", Path("/run/munge"), Path("/var/run/munge")]
    return [path for path in places if path.is_dir() and not path.is_symlink()]


@functools.cache
def _guarding_bwrap() -> str | None:
    """bubblewrap, where it runs here as the guard and CUDA works behind it."""
    binary = shutil.which("bwrap")
    if binary is None or os.environ.get("AKA_NO_SANDBOX") == "1":
        return None
    prefix = [binary, *_read_only_machine(), *_GUARD_TAIL]
    if command_succeeds([*prefix, "true"]) and cuda_works_behind(prefix):
        return binary
    return None


def guard_prefix(
    workspace: Path, home: Path, network: AgentNetwork | None = None, gpu_uuid: str | None = None
) -> tuple[str, ...]:
    """The default wrapper of an agent CLI (see the module docstring): only `workspace` and
    `home` writable, `network` (else the host's), and of the GPUs only `gpu_uuid`'s where given.
    Only a PID namespace (`pid_namespace_prefix`) where bubblewrap is missing or does not work here."""
    binary = _guarding_bwrap()
    if binary is None:
        _warn_unguarded()
        return pid_namespace_prefix()
    writable = ["--bind", str(workspace), str(workspace), "--bind", str(home), str(home)]
    own_network = network.bwrap_args() if network else []
    relay = network.relay_argv() if network else []
    masked = _masked_sockets(network)
    tail = (*_GUARD_TAIL, "--chdir", str(workspace), *relay)
    return (binary, *_read_only_machine(gpu_uuid), *writable, *masked, *own_network, *tail)


def guarded() -> bool:
    """Whether `guard_prefix` gives bubblewrap here (not only a PID namespace)."""
    return _guarding_bwrap() is not None


@functools.cache
def network_namespace_works() -> bool:
    """Whether bubblewrap gives an agent a network namespace of its own here (probed once; a
    warning where not: the agent then shares the machine's network)."""
    binary = shutil.which("bwrap")
    if binary is not None and os.environ.get("AKA_NO_SANDBOX") != "1":
        if command_succeeds([binary, *_read_only_machine(), "--unshare-net", *_GUARD_TAIL, "true"]):
            return True
    logger.warning(
        "agent CLIs share the machine's network (its services, a cluster's included, are reachable "
        "from them): bubblewrap is missing or cannot make a network namespace here"
    )
    return False


@functools.cache
def _warn_unguarded() -> None:
    logger.warning(
        "agent CLIs can write anything their user can (the platform's code, the task suite, the "
        "runs, programs the judge runs) and reach the machine's network services: bubblewrap is "
        "missing or does not work here "
        "(apt-get install bubblewrap)"
    )


def hidden_from_agent(context: AgentContext) -> list[Path]:
    """What a sandboxed agent must not see: every run of this experiment (its own workspace is
    mounted back), every other experiment next to it (any folder holding `run_*` folders: those
    of other agents and configs too, not only those named like its own), the whole task suite
    and the repository's solutions."""
    run_dir = context.log_path.parent.parent
    experiment = run_dir.parent
    suite = context.task.directory
    for _ in context.task.name.split("/"):
        suite = suite.parent
    hidden = [experiment, *_experiments_in(experiment.parent), suite, REPO_ROOT / "solutions"]
    return [p for p in dict.fromkeys(h.resolve() for h in hidden) if p.is_dir()]


def _experiments_in(folder: Path) -> list[Path]:
    """The folders in `folder` that hold runs (a `run_*` folder), its own experiment's siblings."""
    found = []
    for entry in folder.iterdir():
        try:
            if entry.is_dir() and any(run.is_dir() for run in entry.glob("run_*")):
                found.append(entry)
        except OSError:
            continue
    return found


def bwrap_prefix(
    workspace: Path,
    home: Path,
    hidden: Iterable[Path],
    network: AgentNetwork | None = None,
    gpu_uuid: str | None = None,
) -> tuple[str, ...]:
    """bubblewrap: the file system read-only, the hidden folders replaced by empty ones, only the
    workspace and the agent's home (which holds its TMPDIR) writable, its own PID namespace, and
    `network` (else the host's)."""
    binary = shutil.which("bwrap")
    if binary is None:
        raise SandboxUnavailableError(
            "agent option sandbox=bwrap, but bubblewrap is not installed (apt-get install bubblewrap)"
        )
    argv = [binary, *_read_only_machine(gpu_uuid), "--proc", "/proc"]
    for path in hidden:
        argv += ["--tmpfs", str(path)]
    argv += network.bwrap_args() if network else []
    argv += [
        "--bind",
        str(workspace),
        str(workspace),
        "--bind",
        str(home),
        str(home),
        *_masked_sockets(network),
        "--unshare-pid",
        "--die-with-parent",
        "--cap-drop",  # run as root, bubblewrap keeps them: a root inside could unmount what hides
        "ALL",
        "--chdir",
        str(workspace),
        *(network.relay_argv() if network else []),
    ]
    return tuple(argv)
