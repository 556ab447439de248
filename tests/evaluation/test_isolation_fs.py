"""The read-only file system of step commands (aka.evaluation.confine behind the unshare sandbox): candidate
code may write only its evaluation directory, its build caches and its private TMPDIR, never the
pristine task, the platform, site-packages or the run's frozen baseline builds."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from exploits.filesystem import writes_outside
from exploits.gelu_task import copy_gelu_task

from aka.config.tasks import Task
from aka.device import DeviceInfo
from aka.evaluation import confine
from aka.evaluation import sandbox as isolation
from aka.evaluation.confine import (
    DEV_LINKS,
    DEVICE_NODES,
    KEPT_CAPABILITIES,
    MS_NODEV,
    MS_NOSUID,
    parse_args,
    parse_mountinfo,
)
from aka.evaluation.sandbox import (
    CONFINE_SCRIPT,
    NARROWED,
    PRIVATE_DEV,
    READ_ONLY_FILESYSTEM,
    Sandbox,
    detect_sandbox,
)
from aka.evaluation.step_spec import SRC_ROOT
from aka.evaluation.steps import StepOutcome, evaluate_candidate

CPU = DeviceInfo("cpu", "cpu", "cpu", None, 0)
SANDBOX = detect_sandbox()
needs_confinement = pytest.mark.skipif(
    not SANDBOX.confines, reason="no read-only-filesystem sandbox here (unshare or mount not allowed)"
)
needs_private_dev = pytest.mark.skipif(PRIVATE_DEV not in SANDBOX.features, reason="no private /dev here")


def _confined(
    writable: list[Path], script: str, *args: str, cwd: Path, host_dev: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sh -c script args...` as `python -m aka.evaluation.confine` runs it inside the evaluator's namespaces."""
    env = {**os.environ, "PYTHONPATH": str(SRC_ROOT)}
    confine = [
        sys.executable,
        "-m",
        "aka.evaluation.confine",
        *(["--host-dev"] if host_dev else []),
        *(a for p in writable for a in ("--writable", str(p))),
        "--",
    ]
    return subprocess.run(
        [*SANDBOX.prefix, *confine, "sh", "-c", script, "sh", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_mountinfo_points_are_unescaped_and_keep_their_locked_flags() -> None:
    info = (
        b"27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        b"66 65 0:25 / /mnt/with\\040space\\134x ro,nosuid,nodev,relatime - tmpfs none ro,size=4k\n"
    )
    assert parse_mountinfo(info) == [("/", 0), ("/mnt/with space\\x", MS_NOSUID | MS_NODEV)]


def test_arguments_are_writable_paths_then_the_command() -> None:
    assert parse_args(["--writable", "/a", "--writable", "/b c", "--", "sh", "-c", "--"]) == (
        ["/a", "/b c"],
        False,
        ["sh", "-c", "--"],
        False,
        None,
        (),
        None,
    )
    assert parse_args(["--", "true"]) == ([], False, ["true"], False, None, (), None)
    host_dev = parse_args(["--host-dev", "--writable", "/a", "--", "true"])
    assert host_dev == (["/a"], True, ["true"], False, None, (), None)
    keep_admin = parse_args(["--keep-admin", "--writable", "/a", "--", "true"])
    assert keep_admin == (["/a"], False, ["true"], True, None, (), None)
    masked = parse_args(["--mask-file", "/tmp/masks", "--writable", "/a", "--", "true"])
    assert masked == (["/a"], False, ["true"], False, "/tmp/masks", (), None)
    viewed = parse_args(["--view-file", "/tmp/view", "--", "true"])
    assert viewed == ([], False, ["true"], False, None, (), "/tmp/view")
    assert parse_args(["--view-file", "/v1", "--view-file", "/v2", "--", "true"]) is None
    hidden = parse_args(["--hide", "/l1", "--writable", "/a", "--hide", "/l2", "--", "true"])
    assert hidden == (["/a"], False, ["true"], False, None, ("/l1", "/l2"), None)
    assert parse_args(["--mask-file", "/m1", "--mask-file", "/m2", "--", "true"]) is None
    for bad in (
        ["true"],
        ["--writable", "/a", "--"],
        ["--writable", "--", "true"],
        ["--other", "/a", "--", "true"],
        ["--writable", "--host-dev", "--", "true"],
    ):
        assert parse_args(bad) is None, bad


def test_wrap_adds_confinement_only_where_it_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "bound_sockets", lambda: [])  # other tests' services share the table
    monkeypatch.setenv("AKA_DEVICE_LOCK_DIR", "/locks")
    plain = Sandbox(("unshare", "--pid"), ("pid-namespace", "no-network"))
    assert plain.wrap(["true"], ["/w"]) == ["unshare", "--pid", "true"]
    confine = [sys.executable, "-I", "-S", str(CONFINE_SCRIPT)]
    private = Sandbox(("unshare", "--pid"), ("pid-namespace", "no-network", READ_ONLY_FILESYSTEM, PRIVATE_DEV))
    assert private.wrap(["true"], ["/w"]) == [
        "unshare",
        "--pid",
        *confine,
        "--writable",
        "/w",
        "--hide",
        "/locks",
        "--",
        "true",
    ]
    host_dev = Sandbox(("unshare", "--pid"), ("pid-namespace", "no-network", READ_ONLY_FILESYSTEM))
    assert host_dev.wrap(["true"], ["/w"]) == [
        "unshare",
        "--pid",
        *confine,
        "--host-dev",
        "--writable",
        "/w",
        "--hide",
        "/locks",
        "--",
        "true",
    ]


def test_the_machines_bound_sockets_come_from_its_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Socket files only (not abstract names, nor relative ones, which name nothing from here),
    once each and in order, never the accelerator's own (CUDA's MPS pipes, its persistence daemon)."""
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/srv/mps")
    table = tmp_path / "unix"
    table.write_text(
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "0000: 00000002 00000000 00010000 0001 01 1001 /run/docker.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 1002 @/tmp/.X11-unix/X0\n"
        "0000: 00000003 00000000 00000000 0001 03 1003\n"
        "0000: 00000002 00000000 00010000 0001 01 1004 /tmp/with space/s.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 1005 /run/docker.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 1006 relative.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 1007 /tmp/nvidia-mps/control\n"
        "0000: 00000002 00000000 00010000 0001 01 1008 /srv/mps/control\n"
        "0000: 00000002 00000000 00000000 0002 01 1009 /run/systemd/notify\n"
    )
    assert confine.bound_sockets(str(table)) == ["/run/docker.sock", "/tmp/with space/s.sock", "/run/systemd/notify"]
    assert confine.bound_sockets(str(tmp_path / "absent")) == []


def test_a_step_masked_to_one_gpu_keeps_only_that_gpus_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As NVIDIA's container toolkit passes one GPU: the control and memory nodes stay, of the
    GPUs' own nodes only the step's (by its UUID's minor in the driver's table); every GPU's
    where the driver's table does not name it (a MIG instance) or no GPU is named."""
    from aka.evaluation import step_spec
    from aka.evaluation.step_spec import Step, Target, step_environment

    dev, gpus = tmp_path / "dev", tmp_path / "gpus"
    dev.mkdir()
    for name in ("null", "zero", "nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia2", "nvidia10", "sda"):
        (dev / name).touch()
    (dev / "nvidia-caps").mkdir()
    for bus, minor, uuid in (("0000:18:00.0", 0, "GPU-aaa"), ("0000:2a:00.0", 10, "GPU-bbb")):
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n"
        )
    every = ["null", "zero", "nvidia-caps", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia10", "nvidia2", "nvidiactl"]
    monkeypatch.setattr(step_spec, "gpu_minor", lambda uuid: confine.gpu_minor(uuid, str(gpus)))  # the fake table
    assert confine.device_nodes(None, str(dev), str(gpus)) == every
    assert confine.device_nodes("GPU-bbb", str(dev), str(gpus)) == [
        "null",
        "zero",
        "nvidia-caps",
        "nvidia-uvm",
        "nvidia10",
        "nvidiactl",
    ]
    assert confine.device_nodes("MIG-ccc", str(dev), str(gpus)) == every
    assert confine.gpu_minor("GPU-aaa", str(gpus)) == 0 and confine.gpu_minor("GPU-aaa", str(tmp_path / "no")) is None
    renamed = tmp_path / "renamed"  # a container that names its one GPU's node nvidia0, whatever its minor
    renamed.mkdir()
    try:
        os.mknod(renamed / "nvidia0", 0o600 | stat.S_IFCHR, os.makedev(195, 10))
        os.mknod(renamed / "nvidia10", 0o600 | stat.S_IFCHR, os.makedev(195, 0))
    except PermissionError:
        pass  # no mknod here: the names stand in for the device numbers above
    else:
        assert confine.device_nodes("GPU-bbb", str(renamed), str(gpus)) == ["nvidia0"], "by device number"

    task = copy_gelu_task(tmp_path / "tasks")
    one = DeviceInfo("cuda", "h200", "NVIDIA H200", "sm_90", 4, uuid="GPU-bbb", index=2)
    default = DeviceInfo("cuda", "h200", "NVIDIA H200", "sm_90", 4, uuid="GPU-aaa")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv(confine.ENV_GPU_UUID, "GPU-forged")  # the machine's AKA_ variables do not reach a step
    environment = lambda device: step_environment(task, device, Step.CORRECTNESS, Target.CANDIDATE, tmp_path)  # noqa: E731
    assert environment(one)[confine.ENV_GPU_UUID] == "GPU-bbb"
    assert confine.ENV_GPU_UUID not in environment(default), "every GPU visible: every GPU's node"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a parallel worker's slot
    assert environment(default)[confine.ENV_GPU_UUID] == "GPU-aaa"
    # by UUID: with one GPU's node CUDA numbers that GPU 0, and index 3 would name none
    assert environment(default)["CUDA_VISIBLE_DEVICES"] == "GPU-aaa"
    unnamed = DeviceInfo("cuda", "h200", "NVIDIA H200", "sm_90", 4, uuid="GPU-zzz")  # no driver table entry
    assert confine.ENV_GPU_UUID not in environment(unnamed) and environment(unnamed)["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert confine.ENV_GPU_UUID not in environment(default)


@needs_confinement
def test_a_step_cannot_reach_the_machines_socket_files(tmp_path: Path) -> None:
    """A socket file reaches its service from any network namespace, and a read-only mount does
    not stop `connect`: the step sees /dev/null there instead (one in its writable folder too)."""
    import socket

    probe = (
        "import socket, sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        socket.socket(socket.AF_UNIX).connect(path); print(path, 'reached')\n"
        "    except OSError as exc:\n"
        "        print(path, type(exc).__name__)\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    paths = [tmp_path / "daemon.sock", work / "in_work.sock"]
    servers = []
    for path in paths:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        servers.append(server)
    try:
        argv = [sys.executable, "-c", probe, *map(str, paths)]
        outside = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        wrapped = SANDBOX.wrap(argv, [work])
        listed = Path(wrapped[wrapped.index("--mask-file") + 1]).read_text().splitlines()
        assert set(map(str, paths)) <= set(listed), "in a file, off the command line (every `ps` shows that)"
        assert all(str(paths[0]) not in arg for arg in wrapped[: wrapped.index("--")])
        inside = subprocess.run(wrapped, capture_output=True, text=True, timeout=60, check=False, cwd=work)
    finally:
        for server in servers:
            server.close()
    assert outside.stdout.split() == [str(paths[0]), "reached", str(paths[1]), "reached"]
    narrowed = NARROWED in SANDBOX.features  # outside its view and writable folders, nothing is there
    assert inside.stdout.split() == [
        str(paths[0]),
        "FileNotFoundError" if narrowed else "ConnectionRefusedError",
        str(paths[1]),
        "ConnectionRefusedError",
    ], inside.stderr


def test_the_held_out_files_of_a_tasks_suite_are_listed(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    for name in ("triton2triton/basic/gelu", "triton2triton/llm/softmax", "cuda2cuda/basic/add"):
        (suite / name).mkdir(parents=True)
        (suite / name / "harness.py").write_text("")
    (suite / "triton2triton/basic/gelu/heldout.py").write_text("CASES = []\n")
    (suite / "cuda2cuda/basic/add/heldout.py").write_text("CASES = []\n")
    listed = isolation.heldout_files(suite / "triton2triton/basic/gelu", "triton2triton/basic/gelu")
    assert listed == [str(suite / "cuda2cuda/basic/add/heldout.py"), str(suite / "triton2triton/basic/gelu/heldout.py")]
    # a task copied where its folder is not laid out by its name (a check's scratch copy): its own
    # file only, never a walk up from there (which reached / and every folder under it)
    copy = tmp_path / "scratch" / "gelu"
    copy.mkdir(parents=True)
    (copy / "heldout.py").write_text("CASES = []\n")
    assert isolation.heldout_files(copy, "triton2triton/basic/gelu") == [str(copy / "heldout.py")]
    assert isolation.heldout_files(copy, "triton2triton/basic/other") == [str(copy / "heldout.py")]
    (copy / "heldout.py").unlink()
    assert isolation.heldout_files(copy, "triton2triton/basic/gelu") == []


@needs_confinement
def test_a_step_reads_the_suites_held_out_cases_empty(tmp_path: Path) -> None:
    """A red team's candidate read its task's pristine held-out cases and returned them in its own
    failure message, where an agent or a trainer's policy reads it. The suite's held-out files are
    /dev/null in a step; the evaluation folder's own copy (the judge's) stays as it is."""
    heldout = tmp_path / "suite" / "heldout.py"
    heldout.parent.mkdir()
    heldout.write_text("CASES = ['secret']\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "heldout.py").write_text("CASES = ['the judge reads this']\n")
    probe = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        print(repr(open(path).read()))\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    argv = [sys.executable, "-c", probe, str(heldout), str(work / "heldout.py")]
    judges = repr("CASES = ['the judge reads this']\n")
    inside = subprocess.run(
        SANDBOX.wrap(argv, [work], concealed=[str(heldout)]), capture_output=True, text=True, timeout=60, check=False
    )
    seen = "FileNotFoundError" if NARROWED in SANDBOX.features else "''"  # narrowed: outside its view too
    assert inside.stdout.splitlines() == [seen, judges], inside.stderr
    masked = [*SANDBOX.prefix, *isolation.confine_argv([work], masked=[str(heldout)]), *argv]  # not narrowed
    alone = subprocess.run(masked, capture_output=True, text=True, timeout=60, check=False)
    assert alone.stdout.splitlines() == ["''", judges], alone.stderr
    assert heldout.read_text() == "CASES = ['secret']\n"


@needs_confinement
def test_a_step_cannot_take_the_machines_device_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock file can be locked through a read-only descriptor: a red team's candidate held a
    GPU's (`flock`) and every timed step on that GPU waited. A step sees the lock folder empty;
    a folder to hide that holds a writable path stays visible, with a warning."""
    from aka.evaluation.device_lock import ENV_LOCK_DIR

    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "GPU-x.lock").write_text("")
    monkeypatch.setenv(ENV_LOCK_DIR, str(locks))
    probe = (
        "import fcntl, os, sys\n"
        "print(sorted(os.listdir(sys.argv[1])) if os.path.isdir(sys.argv[1]) else 'absent')\n"
        "try:\n"
        "    fcntl.flock(os.open(os.path.join(sys.argv[1], 'GPU-x.lock'), os.O_RDONLY), fcntl.LOCK_EX)\n"
        "    print('locked')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-c", probe, str(locks)]
    wrapped = SANDBOX.wrap(argv, [work])
    assert wrapped[wrapped.index("--hide") + 1] == str(locks)
    inside = subprocess.run(wrapped, capture_output=True, text=True, timeout=60, check=False, cwd=work)
    seen = "absent" if NARROWED in SANDBOX.features else "[]"  # narrowed: outside the step's view as well
    assert inside.stdout.split("\n")[:2] == [seen, "FileNotFoundError"], inside.stderr
    assert (locks / "GPU-x.lock").exists(), "hidden from the step only"
    alone = [*SANDBOX.prefix, *isolation.confine_argv([work], hidden=[str(locks)]), *argv]  # hidden, not narrowed
    hidden = subprocess.run(alone, capture_output=True, text=True, timeout=60, check=False, cwd=work)
    assert hidden.stdout.split("\n")[:2] == ["[]", "FileNotFoundError"], hidden.stderr
    holding = [*SANDBOX.prefix, *isolation.confine_argv([work], hidden=[str(tmp_path)]), *argv]
    kept = subprocess.run(holding, capture_output=True, text=True, timeout=60, check=False, cwd=work)
    assert kept.stdout.split("\n")[:2] == ["['GPU-x.lock']", "locked"], kept.stderr
    assert f"{tmp_path} stays visible: it holds a writable path" in kept.stderr


def test_a_refused_read_only_bind_of_a_kernel_tunable_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Like any mount but /, it does not stop the step: the rest of the confinement still holds."""
    from aka.evaluation import confine

    def refuse(source: str | None, target: str, flags: int, *rest: object) -> None:
        if target == "/proc/sys":
            raise confine.ConfineError("mount /proc/sys: Operation not permitted (errno 1)")

    monkeypatch.setattr(confine, "_mount", refuse)
    monkeypatch.setattr(confine.os.path, "exists", lambda path: True)
    assert confine._read_only_kernel_tunables() == [
        "aka.evaluation.confine: warning: /proc/sys stays as it was: mount /proc/sys: Operation not permitted (errno 1)"
    ]


@pytest.mark.parametrize(
    "nvidia, outside, behind, narrows, expected",
    [
        (False, False, False, True, [READ_ONLY_FILESYSTEM, PRIVATE_DEV, NARROWED]),  # no NVIDIA device
        (True, True, True, True, [READ_ONLY_FILESYSTEM, PRIVATE_DEV, NARROWED]),
        (True, False, False, True, [READ_ONLY_FILESYSTEM, PRIVATE_DEV, NARROWED]),  # CUDA is broken anyway
        (True, True, False, True, [READ_ONLY_FILESYSTEM, NARROWED]),  # CUDA needs the host's /dev here: keep it
        (True, True, True, False, [READ_ONLY_FILESYSTEM, PRIVATE_DEV]),  # a narrowed step does not run here
    ],
)
def test_the_private_dev_is_used_only_where_cuda_still_works(
    monkeypatch: pytest.MonkeyPatch, nvidia: bool, outside: bool, behind: bool, narrows: bool, expected: list[str]
) -> None:
    monkeypatch.setattr(isolation.glob, "glob", lambda pattern: ["/dev/nvidiactl"] if nvidia else [])

    def runs(argv: list[str]) -> bool:
        if argv[-1] == "true":  # every confinement mounts; only the CUDA probe differs
            return True
        if "import aka" in argv[-1]:  # the narrowed view's probe: Python and aka run behind it
            return narrows
        assert argv[-1] == isolation.CUDA_INIT_PROBE
        return (behind or "--host-dev" in argv) if "--" in argv else outside

    monkeypatch.setattr(isolation, "command_succeeds", runs)
    assert isolation._confinement(["unshare", "--pid"]) == expected


def test_without_a_private_dev_the_host_dev_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where the tmpfs cannot be mounted still gets the read-only file system."""
    monkeypatch.setattr(isolation, "command_succeeds", lambda argv: "--host-dev" in argv)
    assert isolation._confinement(["unshare", "--pid"]) == [READ_ONLY_FILESYSTEM, NARROWED]
    monkeypatch.setattr(isolation, "command_succeeds", lambda argv: False)
    assert isolation._confinement(["unshare", "--pid"]) == []


@needs_confinement
def test_confined_command_writes_only_its_writable_paths(tmp_path: Path) -> None:
    writable, beside = tmp_path / "writable", tmp_path / "beside"
    writable.mkdir()
    beside.mkdir()
    script = (
        'echo ok > "$1/file" && echo ok > relative && '
        'if echo no > "$2/file"; then echo WROTE-BESIDE; fi; '
        "if echo no > /dev/shm/aka-confine-probe-$$; then rm /dev/shm/aka-confine-probe-$$; echo SHM-OK; fi"
    )
    done = _confined([writable], script, str(writable), str(beside), cwd=writable)
    assert done.returncode == 0, done.stderr
    assert (writable / "file").read_text() == "ok\n" and (writable / "relative").is_file()
    assert not (beside / "file").exists() and "WROTE-BESIDE" not in done.stdout
    assert "Read-only file system" in done.stderr
    assert "SHM-OK" in done.stdout  # CUDA and torch need /dev/shm
    assert "warning" not in done.stderr, done.stderr


@needs_confinement
def test_confined_command_cannot_remount_or_unmount(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, call in [('remount', lambda: libc.mount(None, b'/', None, 32 | 4096, None)),\n"
        "                   ('umount', lambda: libc.umount2(sys.argv[1].encode(), 2)),\n"
        "                   ('unshare', lambda: libc.unshare(0x20000))]:\n"
        "    print(name, 'ALLOWED' if call() == 0 else os.strerror(ctypes.get_errno()))\n"
        "open(os.path.join(sys.argv[2], 'file'), 'w')\n"
    )
    beside = tmp_path / "beside"
    beside.mkdir()
    done = _confined(
        [tmp_path / "nothing-here"], f'"{sys.executable}" -I "$1" / "$2"', str(probe), str(beside), cwd=tmp_path
    )
    assert "ALLOWED" not in done.stdout and done.stdout.count("Operation not permitted") == 3, done.stdout
    assert "Read-only file system" in done.stderr and not (beside / "file").exists()


DEV_PROBE = r"""
import os, stat, sys
for path in sorted(os.path.join(top, name) for top, dirs, files in os.walk("/dev") for name in dirs + files):
    mode = os.lstat(path).st_mode
    kind = "block" if stat.S_ISBLK(mode) else "char" if stat.S_ISCHR(mode) else "link" if stat.S_ISLNK(mode) else ""
    print("node", path, kind)
targets = [("tunable", "/proc/sys/vm/overcommit_memory"), ("sys", "/sys/aka-planted")]
if sys.argv[1:] != ["--host-dev"]:  # the host's /dev is writable there: plant nothing in it
    targets += [("dev", "/dev/aka-planted"), ("shm", "/dev/shm/aka-probe")]
for label, path in targets:
    try:
        with open(path, "a"):
            pass
        print("write", label, "WROTE")
    except OSError as exc:
        print("write", label, exc.strerror)
status = dict(line.split(":\t") for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
print("caps", int(status["CapBnd"], 16), int(status["CapEff"], 16), int(status["CapPrm"], 16), status["NoNewPrivs"])
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    if fields[4] == "/sys" or fields[4].startswith("/sys/"):
        print("sysmount", fields[4], fields[5].split(",")[0])
"""


def _dev_probe(tmp_path: Path, host_dev: bool = False) -> tuple[list[str], dict[str, str], list[int], list[str]]:
    """(/dev entries as `path kind`, write results, [bounding, effective, permitted, no_new_privs], /sys mounts)."""
    probe = tmp_path / "dev_probe.py"
    probe.write_text(DEV_PROBE)
    done = _confined(
        [tmp_path / "nothing-here"],
        f'"{sys.executable}" -I "$@"',
        str(probe),
        *(["--host-dev"] if host_dev else []),
        cwd=tmp_path,
        host_dev=host_dev,
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split(" ", 1) for line in done.stdout.splitlines()]
    nodes = [rest for head, rest in lines if head == "node"]
    writes = dict(rest.split(" ", 1) for head, rest in lines if head == "write")  # type: ignore[misc]
    caps = [int(v) for head, rest in lines if head == "caps" for v in rest.split()]
    return nodes, writes, caps, [rest for head, rest in lines if head == "sysmount"]


@needs_private_dev
def test_confined_command_gets_a_private_dev_without_disks(tmp_path: Path) -> None:
    nodes, writes, _, _ = _dev_probe(tmp_path)
    allowed = {f"/dev/{n}" for n in DEVICE_NODES} | {f"/dev/{name}" for name, _ in DEV_LINKS} | {"/dev/shm"}
    unexpected = [
        n
        for n in nodes
        if n.split()[0] not in allowed and not n.startswith(("/dev/nvidia", "/dev/dri", "/dev/kfd", "/dev/shm/"))
    ]
    assert not unexpected and not any(n.endswith(" block") for n in nodes), nodes
    assert "/dev/null char" in nodes and "/dev/urandom char" in nodes
    assert writes["dev"] == "Read-only file system" and not Path("/dev/aka-planted").exists()
    assert writes["shm"] == "WROTE" and not Path("/dev/shm/aka-probe").exists()  # its own /dev/shm


@needs_confinement
def test_confined_command_cannot_write_kernel_tunables_or_gain_capabilities(tmp_path: Path) -> None:
    _, writes, caps, sys_mounts = _dev_probe(tmp_path)
    assert writes["tunable"] == "Read-only file system" and writes["sys"] != "WROTE", writes
    assert sys_mounts and all(m.endswith(" ro") for m in sys_mounts), sys_mounts
    allowed = sum(1 << c for c in KEPT_CAPABILITIES)
    bounding, effective, permitted, no_new_privs = caps
    assert bounding & ~allowed == 0 and effective & ~allowed == 0 and permitted & ~allowed == 0, caps
    assert no_new_privs == 1


@needs_confinement
def test_host_dev_fallback_keeps_the_hosts_dev(tmp_path: Path) -> None:
    nodes, writes, _, _ = _dev_probe(tmp_path, host_dev=True)
    host = sorted(str(p) for p in Path("/dev").iterdir())
    assert set(host) <= {n.split()[0] for n in nodes}
    assert writes["tunable"] == "Read-only file system"  # the rest of the confinement still holds


@needs_confinement
@pytest.mark.skipif(shutil.which("mount") is None, reason="needs mount(8)")
def test_a_mount_point_with_a_space_becomes_read_only(tmp_path: Path) -> None:
    spaced, writable = tmp_path / "with space", tmp_path / "writable"
    spaced.mkdir()
    writable.mkdir()
    confine = f'"{sys.executable}" -m aka.evaluation.confine --writable "$2" --'
    script = f'mount -t tmpfs none "$1" && exec {confine} sh -c \'if touch "$1/file"; then echo WROTE; fi\' sh "$1"'
    done = subprocess.run(
        [*SANDBOX.prefix, "sh", "-c", script, "sh", str(spaced), str(writable)],
        env={**os.environ, "PYTHONPATH": str(SRC_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "WROTE" not in done.stdout, done.stdout + done.stderr
    assert "Read-only file system" in done.stderr


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_confine_fails_closed_without_privileges(tmp_path: Path) -> None:
    """Not root of its namespace (an unmapped user): it must refuse to run the command at all."""
    env = {**os.environ, "PYTHONPATH": str(SRC_ROOT)}
    marker = tmp_path / "ran"
    argv = [
        "unshare",
        "--user",
        sys.executable,
        "-m",
        "aka.evaluation.confine",
        "--",
        "sh",
        "-c",
        f"echo ran > {marker}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    if "unshare failed" in done.stderr or "unshare:" in done.stderr:
        pytest.skip(f"no user namespaces here: {done.stderr.strip()}")
    assert done.returncode == 126 and not marker.exists()
    lines = done.stderr.strip().splitlines()
    prefix = "aka.evaluation.confine: cannot confine the file system:"
    assert len(lines) == 1 and lines[0].startswith(prefix), done.stderr


def _evaluate(task: Task, tmp_path: Path, source: str, **kwargs: object) -> tuple[list[StepOutcome], str]:
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "kernel.py").write_text(source)
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", CPU, **kwargs)  # type: ignore[arg-type]
    return outcomes, (tmp_path / "scratch" / "evaluation.log").read_text()


def _fingerprint(path: Path) -> tuple[bytes, int] | None:
    return (path.read_bytes(), path.stat().st_mtime_ns) if path.exists() else None


@pytest.mark.slow
@needs_confinement
def test_candidate_cannot_poison_later_evaluations(tmp_path: Path) -> None:
    task = copy_gelu_task(tmp_path / "tasks")
    trusted = tmp_path / "baselines" / "gelu.builds"
    trusted.mkdir(parents=True)
    aka_dir = SRC_ROOT / "aka"
    torch_spec = importlib.util.find_spec("torch")
    assert torch_spec is not None and torch_spec.submodule_search_locations
    torch_cuda = Path(list(torch_spec.submodule_search_locations)[0]) / "cuda" / "__init__.py"
    targets = {
        "pristine-harness": (task.directory / "harness.py", "w", "# planted by a candidate\n"),
        "aka-package": (aka_dir / "__init__.py", "a", ""),
        "aka-new-module": (aka_dir / "_planted_by_candidate.py", "w", "PLANTED = True\n"),
        "site-packages-torch": (torch_cuda, "a", ""),
        "baseline-builds": (trusted / "planted.so", "w", "not a library\n"),
        "beside-the-evaluation": (tmp_path / "planted.txt", "w", "x\n"),
    }
    # The kernel's interfaces, opened for writing without writing a byte ("a", ""): a sysctl and,
    # behind the private /dev, a new node on the host's /dev and the host's first disk.
    disk = next((p for p in sorted(Path("/dev").iterdir()) if p.is_block_device()), None)
    kernel = {"kernel-tunable": (Path("/proc/sys/vm/overcommit_memory"), "a", "")}
    if PRIVATE_DEV in SANDBOX.features:
        kernel["host-dev"] = (Path(f"/dev/aka-planted-{os.getpid()}"), "w", "x\n")
        kernel |= {"raw-disk": (disk, "a", "")} if disk else {}
    before = {label: _fingerprint(path) for label, (path, _, _) in targets.items()}
    attempts = {**targets, **kernel}
    source = writes_outside([(label, str(path), mode, text) for label, (path, mode, text) in attempts.items()])
    try:
        outcomes, log = _evaluate(task, tmp_path, source, trusted_cache=trusted)
    finally:
        (aka_dir / "_planted_by_candidate.py").unlink(missing_ok=True)
    assert {label: _fingerprint(path) for label, (path, _, _) in targets.items()} == before
    assert not Path(f"/dev/aka-planted-{os.getpid()}").exists()
    assert [o.step.value for o in outcomes] == ["compile", "correctness", "performance"]
    assert all(o.passed and READ_ONLY_FILESYSTEM in o.isolation for o in outcomes), outcomes[-1].message
    results = dict(re.findall(r"aka-fs-probe (\w+ [\w-]+): (\w+)", log))
    for step in ("compile", "correctness", "performance"):
        for label in attempts:
            # read-only, or (narrowed) not there at all: the pristine task is outside the step's view
            assert results.get(f"{step} {label}") in ("EROFS", "ENOENT"), (step, label, results)
        if NARROWED in SANDBOX.features:
            assert results[f"{step} pristine-harness"] == results[f"{step} baseline-builds"] == "ENOENT", results
    assert "WROTE" not in log


TMPDIR_PROBE = """
import tempfile as _tempfile
_tmp = os.environ["TMPDIR"]
assert _tempfile.gettempdir() == _tmp == os.environ["TMP"] == os.environ["TEMP"], _tmp
with _tempfile.NamedTemporaryFile() as _scratch:
    _scratch.write(b"scratch")
    _scratch.flush()
os.makedirs(os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "probe"))
open(os.path.join(os.environ["TRITON_CACHE_DIR"], "probe"), "w").close()
print("aka-tmp-probe", _tmp, flush=True)
"""


@pytest.mark.slow
@needs_confinement
def test_step_writes_its_private_tmpdir_only(tmp_path: Path) -> None:
    task = copy_gelu_task(tmp_path / "tasks")
    source = writes_outside([("system-tmp", f"/tmp/aka-planted-{os.getpid()}", "w", "x\n")]) + TMPDIR_PROBE
    outcomes, log = _evaluate(task, tmp_path, source, through=1)
    assert outcomes[0].passed, outcomes[0].message
    assert "aka-fs-probe compile system-tmp: EROFS" in log
    tmpdir = Path(next(line.split()[1] for line in log.splitlines() if line.startswith("aka-tmp-probe")))
    step_tmp = tmpdir.parents[1]  # <scratch>/tmp-compile-*/aka-workers-*/worker-candidate-tmp: the worker's own
    assert step_tmp.parent == tmp_path / "scratch" and step_tmp.name.startswith("tmp-compile-")
    assert tmpdir.name == "worker-candidate-tmp" and tmpdir.parent.name.startswith("aka-workers-")
    leftovers = [p.name for p in (tmp_path / "scratch").iterdir() if p.name.startswith(("tmp-", "triton-"))]
    assert leftovers == [], "private step directories are removed after the step"


SHM_PROBE = """
_shm = os.statvfs("/dev/shm")
_name = f"/dev/shm/aka-shm-probe-{os.getpid()}"
try:
    for _part in range(2):  # 300 MiB in two files (each under a worker's largest file): past its /dev/shm
        with open(f"{_name}-{_part}", "wb") as _f:
            for _ in range(150):
                _f.write(b"\\xab" * 2**20)
    _result = "WROTE"
except OSError as _exc:
    _result = _errno.errorcode.get(_exc.errno, str(_exc.errno))
print("aka-shm-probe", _shm.f_blocks * _shm.f_frsize, _name, _result, flush=True)
"""


@needs_confinement
def test_a_workers_dev_shm_is_its_own_capped_and_gone_with_it(tmp_path: Path) -> None:
    """A red team's note: workers shared the step's /dev/shm, an unsized tmpfs that outlives them,
    so memory held there escaped both the disk quota and what ending the worker gives back."""
    task = copy_gelu_task(tmp_path / "tasks")
    source = writes_outside([]) + SHM_PROBE
    outcomes, log = _evaluate(task, tmp_path, source, through=1)
    probes = [line.split() for line in log.splitlines() if line.startswith("aka-shm-probe")]
    assert probes, log[-3000:]
    for _, size, name, result in probes:
        assert int(size) <= confine.WORKER_SHM_BYTES and result == "ENOSPC", (size, result)
        assert not Path(f"{name}-0").exists()  # not in this (the judge's caller's) /dev/shm


SYSV_PROBE = """
import ctypes as _ctypes
_libc = _ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = _ctypes.c_void_p
_segment = _libc.shmget(0, 8 * 2**20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600: 8 MiB, never removed
_address = _libc.shmat(_segment, None, 0)
_ctypes.memset(_address, 0xAB, 8 * 2**20)  # resident
print("aka-sysv-probe", _segment, flush=True)
"""


def _sysv_segments() -> set[str]:
    """The machine's (this IPC namespace's) System V shared memory segments, by id."""
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {row.split()[1] for row in rows}


@needs_confinement
def test_system_v_memory_a_worker_made_is_gone_with_it(tmp_path: Path) -> None:
    """A red team's workers each left an 8-64 MiB System V segment in the machine's IPC namespace:
    memory no process held, that outlived the evaluation and that no later one could get back."""
    before = _sysv_segments()
    task = copy_gelu_task(tmp_path / "tasks")
    outcomes, log = _evaluate(task, tmp_path, writes_outside([]) + SYSV_PROBE, through=1)
    assert any(line.startswith("aka-sysv-probe") for line in log.splitlines()), log[-3000:]
    left = _sysv_segments() - before
    for segment in left:  # not left on the machine, even when the test fails
        subprocess.run(["ipcrm", "-m", segment], check=False)
    assert left == set(), "a segment outlived the worker"
