"""Isolation of candidate code: its own PID, network and mount namespaces, a read-only file
system, and resource limits.

Candidate kernels run inside the task's step processes. In a new PID namespace they cannot see,
signal or stall the evaluator (their parent is invisible to them); in a new network namespace
they have no network. Both come from `unshare`, as root or through an unprivileged user
namespace; where neither works the steps run without them and results say so
(`isolation: []`). Inside, `aka.evaluation.confine` makes every mount read-only except the paths a step
must write (`Sandbox.wrap`; feature `read-only-filesystem`), so candidate code cannot change the
pristine task, the platform, site-packages or a run's frozen baseline builds, and gives the step
a private /dev without disks (feature `private-dev`; where CUDA initializes outside the sandbox
but not behind a private /dev, steps keep the host's /dev and results lack it). Outside the
system's folders a step sees only what it needs (`step_view`: its Python, aka's sources, its
search paths, its writable folders; feature `narrowed-filesystem`): other tasks and runs, held-out
cases wherever they are copied, git objects, caches and lock files are not there. Resource limits
bound CPU time, core dumps and, on the CPU only, memory (CUDA reserves far more virtual memory
than it uses, so an address-space limit would break it).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import hashlib
import logging
import os
import re
import resource
import shutil
import site
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aka.evaluation.confine import ACCELERATOR_SOCKET_FOLDERS, bound_sockets, inside
from aka.evaluation.disk_quota import STEP_FILE_BYTES
from aka.evaluation.pids_limit import PIDS_FEATURE, groups_folder, join_group
from aka.evaluation.wire import HELDOUT_FILE

_UNSHARE_FLAGS = ["--pid", "--net", "--ipc", "--fork", "--mount-proc", "--kill-child"]
CPU_MEMORY_LIMIT_BYTES = 16 * 1024**3
READ_ONLY_FILESYSTEM = "read-only-filesystem"
PRIVATE_DEV = "private-dev"
NARROWED = "narrowed-filesystem"
ENV_STEP_VIEW = "AKA_STEP_VIEW"  # more folders steps see (os.pathsep between): data a task reads, say
SRC_ROOT = Path(__file__).resolve().parents[2]  # aka's sources (an editable install's too)
PTH_SKIPPED = ("#", "import ", "import\t")  # a `.pth` line that names no folder (`site`)
# Variables that name folders (or lists of them) a step's tools read: its programs, libraries, compilers.
VIEW_VARIABLES: tuple[str, ...] = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH")
VIEW_VARIABLES += ("HIP_PATH", "CUDA_MPS_PIPE_DIRECTORY", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH")
CONFINE_SCRIPT = Path(__file__).resolve().with_name("confine.py")
MAX_CONCEALED = 4096  # held-out files concealed from a step, at most (each a bind mount)
# cuInit, then a context on the first visible device (which opens its /dev/nvidiaN): 0 when CUDA works.
CUDA_INIT_PROBE = (
    "import ctypes, sys; cuda = ctypes.CDLL('libcuda.so.1'); d, c = ctypes.c_int(), ctypes.c_void_p(); "
    "sys.exit(cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(d), 0) "
    "or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(c), d))"
)
log = logging.getLogger(__name__)


@functools.cache
def _masks_folder() -> Path:
    """This process's folder of mask lists (only its user may write it; removed at exit)."""
    folder = Path(tempfile.mkdtemp(prefix="aka-masks-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def mask_file(masked: Sequence[str]) -> str:
    """A file listing `masked`, one a line, named by its content (written once, atomically): the
    list `confine` masks, kept off the command line (every `ps` shows it, and a machine's sockets
    can be thousands)."""
    text = "".join(f"{path}\n" for path in masked).encode()
    path = _masks_folder() / hashlib.sha256(text).hexdigest()[:32]
    if not path.exists():
        part = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}")
        part.write_bytes(text)
        part.chmod(0o644)
        os.replace(part, path)
    return str(path)


def hidden_from_steps() -> tuple[str, ...]:
    """Folders a step sees empty: the machine's device locks (`device_lock.lock_dir`). A lock file
    can be locked through a read-only descriptor, and a red team's candidate that held a GPU's
    (`flock`) stalled every timed step on it, past any step's timeout."""
    from aka.evaluation.device_lock import lock_dir

    return (str(lock_dir()),)


def step_view(environ: Mapping[str, str] | None = None) -> list[str]:
    """What a step reads outside the system's folders (`confine.SYSTEM_FOLDERS`) and its writable
    ones: what a fresh interpreter of this Python puts on its import path (its prefixes, site
    folders and the folders their `.pth` files and editable installs name; not this process's
    script folder or working directory, nor what it inserted later: a repository's root would
    show every task, held-out case and git object in it), aka's sources, the folders
    `VIEW_VARIABLES` and `$AKA_STEP_VIEW` name and the accelerator's own socket folders. A red
    team read held-out cases from the judge's copy and from git objects, and an evaluator's lock
    files can be taken wherever they are readable (`flock` through a read-only descriptor)."""
    environ = os.environ if environ is None else environ
    prefixes = list(dict.fromkeys((sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)))
    sites = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    paths = [str(SRC_ROOT), *prefixes, *sites, str(Path(sys.executable).parent), *_installed_paths(sites)]
    paths += [p for p in sys.path if any(inside(p, prefix) for prefix in prefixes)]
    paths += [p for name in (*VIEW_VARIABLES, ENV_STEP_VIEW) for p in environ.get(name, "").split(os.pathsep)]
    paths += ACCELERATOR_SOCKET_FOLDERS  # CUDA may connect to MPS there, as it opens /dev/nvidia*
    return list(dict.fromkeys(os.path.normpath(p) for p in paths if os.path.isabs(p) and os.path.exists(p)))


def _installed_paths(sites: Sequence[str]) -> list[str]:
    """The folders the `.pth` files of `sites` add to the import path, and those editable installs
    map their packages to (setuptools' `__editable___*_finder.py`, not on the path)."""
    found = []
    for folder in sites:
        for pth in glob.glob(os.path.join(glob.escape(folder), "*.pth")):
            with contextlib.suppress(OSError):
                lines = [line.rstrip() for line in Path(pth).read_text(errors="replace").splitlines()]
                found += [os.path.join(folder, line) for line in lines if line and not line.startswith(PTH_SKIPPED)]
        for finder in glob.glob(os.path.join(glob.escape(folder), "__editable___*_finder.py")):
            with contextlib.suppress(OSError):
                mapping = Path(finder).read_text(errors="replace").partition("MAPPING")[2].partition("\n")[0]
                found += re.findall(r"""['"](/[^'"]+)['"]""", mapping)
    return found


def heldout_files(task_directory: Path, task_name: str) -> list[str]:
    """The held-out case files of the suite a task belongs to (its folder, up by its name's parts),
    which a step sees empty (`concealed`): a candidate read them and returned them in its own
    failure message, where an agent or a trainer's policy reads it (red team, session 48). The
    step's own copy (the judge's, for a held-out evaluation) is in its writable evaluation folder."""
    parts = task_name.split("/")
    suite = task_directory
    for _ in parts:
        suite = suite.parent
    if (suite / task_name).resolve() != task_directory.resolve():  # a copy not laid out by name: its own
        own = task_directory / HELDOUT_FILE
        return [str(own)] if own.is_file() else []
    # the suite's tasks are folders as deep as their names: no walk of anything else (glob.glob
    # passes over what vanishes or cannot be read)
    pattern = os.path.join(glob.escape(str(suite)), *["*"] * len(parts), HELDOUT_FILE)
    return sorted(glob.glob(pattern))[:MAX_CONCEALED]


def confine_argv(
    writable: Sequence[str | Path],
    host_dev: bool = False,
    keep_admin: bool = False,
    masked: Sequence[str] = (),
    hidden: Sequence[str] = (),
    view: Sequence[str] | None = None,
) -> list[str]:
    """`aka.evaluation.confine` in isolated mode (no working directory, `PYTHON*` variables or site on its
    path: it runs with every capability until it execs), up to its `--`."""
    paths = [arg for path in writable for arg in ("--writable", str(path))]
    paths += ["--mask-file", mask_file(masked)] if masked else []
    paths += ["--view-file", mask_file(view)] if view is not None else []
    paths += [arg for path in hidden for arg in ("--hide", str(path))]
    flags = [*(["--host-dev"] if host_dev else []), *(["--keep-admin"] if keep_admin else [])]
    return [sys.executable, "-I", "-S", str(CONFINE_SCRIPT), *flags, *paths, "--"]


@dataclass(frozen=True)
class Sandbox:
    """The argv prefix that puts a command in fresh namespaces, and what it provides."""

    prefix: tuple[str, ...]
    features: tuple[str, ...]

    @property
    def confines(self) -> bool:
        """Commands it wraps see a read-only file system outside their writable paths."""
        return READ_ONLY_FILESYSTEM in self.features

    def wrap(
        self,
        argv: Sequence[str],
        writable: Sequence[str | Path] = (),
        keep_admin: bool = False,
        concealed: Sequence[str] = (),
    ) -> list[str]:
        """`argv` inside the namespaces and, where this machine allows it, behind `aka.evaluation.confine`
        with only the existing paths of `writable` writable and the machine's bound Unix sockets
        masked (listed now, from outside the step's network namespace). An empty `argv` gives the
        prefix. `keep_admin`: an aka.harness judge, which starts its workers in namespaces of their own."""
        if not self.confines:
            return [*self.prefix, *argv]
        masked, hidden, view = self.out_of_reach(concealed)
        confine = confine_argv(writable, PRIVATE_DEV not in self.features, keep_admin, masked, hidden, view)
        return [*self.prefix, *confine, *argv]

    def out_of_reach(self, concealed: Sequence[str] = ()) -> tuple[list[str], list[str], list[str] | None]:
        """What `confine` keeps from a step here, listed now: the files it masks (the machine's
        bound Unix sockets, read outside the step's network namespace, and `concealed`), the
        folders it hides and, where this machine narrows, the step's view. The exec'd and the
        forked (`warm_parent.step_sandbox`) steps both take it from here."""
        view = step_view() if NARROWED in self.features else None
        return [*bound_sockets(), *concealed], list(hidden_from_steps()), view


def command_succeeds(argv: list[str]) -> bool:
    """Whether `argv` exits 0 within a minute (a probe of what this machine allows)."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def cuda_works_behind(prefix: list[str]) -> bool:
    """CUDA initializes behind `prefix` wherever it initializes outside (no NVIDIA device: nothing to lose)."""
    if not glob.glob("/dev/nvidia*"):
        return True
    probe = [sys.executable, "-I", "-S", "-c", CUDA_INIT_PROBE]
    return not command_succeeds(probe) or command_succeeds([*prefix, *probe])


def _confinement(prefix: list[str]) -> list[str]:
    """The file-system features `aka.evaluation.confine` gives behind `prefix` on this machine: a
    private /dev where CUDA still works behind it, and a narrowed view where Python and aka run
    behind it (each checked, never assumed)."""
    imports_aka = f"import sys; sys.path.insert(0, {str(SRC_ROOT)!r}); import aka"
    with tempfile.TemporaryDirectory(prefix="aka-confine-probe-") as probe:
        mounts = False
        for host_dev in (False, True):
            confined = [*prefix, *confine_argv([probe], host_dev)]
            runs = command_succeeds([*confined, "true"])
            mounts = mounts or runs
            if not runs or not (host_dev or cuda_works_behind(confined)):
                continue
            if host_dev:
                why = "CUDA does not initialize behind a private one" if mounts else "a private one cannot be mounted"
                log.warning("the step sandbox keeps the host's /dev: %s", why)
            features = [READ_ONLY_FILESYSTEM, *([] if host_dev else [PRIVATE_DEV])]
            narrowed = [*prefix, *confine_argv([probe], host_dev, view=step_view())]
            if command_succeeds([*narrowed, sys.executable, "-c", imports_aka]) and cuda_works_behind(narrowed):
                return [*features, NARROWED]
            log.warning("steps see the whole file system: Python did not run in a narrowed view here")
            return features
    return []


@functools.cache
def detect_sandbox() -> Sandbox:
    """Namespaces (and the read-only file system inside them) this machine allows, probed once
    per process; disabled by AKA_NO_SANDBOX=1."""
    unshare = shutil.which("unshare")
    if unshare is None or os.environ.get("AKA_NO_SANDBOX") == "1":
        return Sandbox((), ())
    for extra in ([], ["--user", "--map-root-user"]):
        prefix = [unshare, *extra, *_UNSHARE_FLAGS]
        if command_succeeds([*prefix, "true"]):
            pids = [PIDS_FEATURE] if groups_folder() is not None else []
            return Sandbox(tuple(prefix), ("pid-namespace", "no-network", *_confinement(prefix), *pids))
    return Sandbox((), ())


@dataclass(frozen=True)
class ResourceLimits:
    """Applied in the child just before exec (`preexec_fn`)."""

    cpu_seconds: int
    memory_bytes: int | None
    file_bytes: int | None = None
    pids_group: str | None = None  # a pids cgroup the step's first process joins (`aka.evaluation.pids_limit`)

    def apply(self) -> None:
        if self.pids_group is not None:
            join_group(self.pids_group)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_seconds, self.cpu_seconds + 5))
        if self.file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_bytes, self.file_bytes))
        if self.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))


def step_limits(timeout_seconds: float, on_gpu: bool, pids_group: Path | None = None) -> ResourceLimits:
    """CPU time: the wall budget times the cores (threads count too); memory only on the CPU; each
    file it writes, its log included, at most `STEP_FILE_BYTES`; its tasks at most those of
    `pids_group`."""
    cores = max(os.cpu_count() or 1, 2)
    return ResourceLimits(
        int(timeout_seconds * cores) + 10,
        None if on_gpu else CPU_MEMORY_LIMIT_BYTES,
        STEP_FILE_BYTES,
        str(pids_group) if pids_group is not None else None,
    )
