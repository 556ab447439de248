"""A step sees only what it needs outside the system's folders (`confine._narrow`,
`sandbox.step_view`): a second red team (session 48) read held-out cases through the judge's copy
in the evaluation folder and through git objects, and the evaluator's lock files can be taken with
`flock` wherever they are readable. Path masks cannot cover copies; a narrowed view does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aka.evaluation import confine
from aka.evaluation import sandbox as isolation
from aka.evaluation.sandbox import NARROWED, detect_sandbox

SANDBOX = detect_sandbox()
needs_narrowing = pytest.mark.skipif(
    NARROWED not in SANDBOX.features, reason="steps are not narrowed on this machine (no mount namespace)"
)


def test_the_folders_at_the_root_outside_the_systems_are_narrowed(tmp_path: Path) -> None:
    for name in ("usr", "etc", "opt", "home", "work", "tmp", "srv"):
        (tmp_path / name).mkdir()
    (tmp_path / "bin").symlink_to("usr/bin")  # a link leads elsewhere: left as it is
    (tmp_path / "stray-file").write_text("")
    found = confine.narrowed_folders(str(tmp_path))
    assert [Path(p).name for p in found if p.startswith(str(tmp_path))] == ["home", "srv", "tmp", "work"]


def test_each_shown_path_is_bound_at_its_name_and_its_real_one(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "repo" / ".venv" / "lib").mkdir(parents=True)
    (work / "repo" / "src").mkdir()
    (work / "eval").mkdir()
    home.mkdir()
    (home / "repo").symlink_to(work / "repo")  # a checkout reached through a link
    view = [
        str(home / "repo" / ".venv"),
        str(work / "repo" / ".venv" / "lib"),  # inside a shown path: comes with it
        str(work / "repo" / "src"),
        str(tmp_path / "missing"),  # gone: nothing to bind
        "relative/path",  # not absolute: ignored
    ]
    narrowed, shown = confine.shown_paths(view, [str(home), str(work)])
    assert narrowed == [str(home), str(work)]
    real_venv = str(work / "repo" / ".venv")
    assert shown == [
        (str(home / "repo" / ".venv"), real_venv),
        (real_venv, real_venv),
        (str(work / "repo" / "src"), str(work / "repo" / "src")),
    ]
    # a view path at or above a folder shows that folder whole: it is not narrowed
    narrowed, shown = confine.shown_paths([str(work)], [str(home), str(work)])
    assert narrowed == [str(home)] and shown == []


def test_the_view_is_what_a_fresh_interpreter_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the evaluator's script folder or working directory (a repository's root would show
    every task, held-out case and git object in it), nor what it put on its path later."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    monkeypatch.chdir(repo)
    monkeypatch.setattr(sys, "path", [str(repo), *sys.path, str(repo / "tools")])
    bins = tmp_path / "bins"
    bins.mkdir()
    monkeypatch.setenv("PATH", f"{bins}{os.pathsep}relative")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-such-cuda"))
    view = isolation.step_view()
    assert str(repo) not in view and str(repo / "tools") not in view
    assert str(isolation.SRC_ROOT) in view and os.path.normpath(sys.prefix) in view
    assert str(bins) in view and "relative" not in view
    assert str(tmp_path / "no-such-cuda") not in view, "what does not exist is left out"
    site_packages = [p for p in sys.path if p.endswith("site-packages")]
    assert site_packages and all(os.path.normpath(p) in view for p in site_packages)


def test_pth_files_and_editable_installs_are_followed(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "legacy.pth").write_text(f"# a comment\n{tmp_path / 'legacy-src'}\nimport os; os.getcwd()\n\nrelative\n")
    finder = "__editable___mypkg_0_1_finder.py"
    (site / finder).write_text(f"import sys\nMAPPING: dict[str, str] = {{'mypkg': '{tmp_path / 'mypkg-src'}'}}\n")
    assert isolation._installed_paths([str(site)]) == [
        str(tmp_path / "legacy-src"),
        str(site / "relative"),
        str(tmp_path / "mypkg-src"),
    ]


PROBE = """
import os, sys
beside, judge_copy, git = sys.argv[1:4]
for label, path in (("beside", beside), ("judge-copy", judge_copy), ("git", git)):
    print(label, os.path.exists(path))
print("cwd", os.getcwd())
try:
    print("up", sorted(os.listdir("..")))
except OSError as exc:
    print("up", type(exc).__name__)
import torch  # site-packages and the interpreter's own library are there
print("torch", torch.ones(2).sum().item())
"""


@needs_narrowing
def test_a_step_sees_nothing_beside_its_folders(tmp_path: Path) -> None:
    """An evaluation folder's other contents (the judge's pristine copy with its held-out cases),
    the repository's git objects and anything else under a narrowed folder are not there; the
    step's writable folder, Python, torch and aka are."""
    evaluation = tmp_path / "evaluation"
    work = evaluation / "eval"
    work.mkdir(parents=True)
    (evaluation / "pristine").mkdir()
    (evaluation / "pristine" / "heldout.py").write_text("CASES = ['secret']\n")
    (tmp_path / "beside.txt").write_text("another run's\n")
    git = isolation.SRC_ROOT.parent / ".git"
    argv = [sys.executable, "-c", PROBE, str(tmp_path / "beside.txt"), str(evaluation / "pristine" / "heldout.py")]
    done = subprocess.run(
        SANDBOX.wrap([*argv, str(git)], [work]), capture_output=True, text=True, timeout=120, check=False, cwd=work
    )
    seen = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert done.returncode == 0, done.stderr
    assert seen["beside"] == seen["judge-copy"] == "False"
    top = isolation.SRC_ROOT.parent.parts[1]
    if top not in confine.SYSTEM_FOLDERS and git.exists():  # a checkout under /usr or /opt stays whole
        assert seen["git"] == "False", "the repository's objects are outside the view"
    assert seen["cwd"] == str(work) and seen["up"] == "['eval']"
    assert seen["torch"] == "2.0"


def test_a_platform_folder_in_a_system_folder_is_its_applications_own() -> None:
    """Runs, caches or a checkout under /opt or /var (a container image's /opt/app) were shown
    whole with the system's folders: their application's folder is narrowed as well, never a
    folder that many programs share."""
    found = {
        path: confine.application_folder(path)
        for path in (
            "/opt/app/runs/run_1/eval",
            "/var/lib/aka/cache/x",
            "/usr/local/aka/tasks",
            "/var/lib",
            "/opt",
            "/tmp/run/eval",  # narrowed whole already
            "/dev/shm/x",
            "/proc/1/root",
        )
    }
    assert found == {
        "/opt/app/runs/run_1/eval": "/opt/app",
        "/var/lib/aka/cache/x": "/var/lib/aka",
        "/usr/local/aka/tasks": "/usr/local/aka",
        "/var/lib": None,
        "/opt": None,
        "/tmp/run/eval": None,
        "/dev/shm/x": None,
        "/proc/1/root": None,
    }


@needs_narrowing
def test_a_run_kept_in_a_system_folder_shows_a_step_nothing_beside_it() -> None:
    """The same step as above with its run under /opt and its suite, a git checkout, under
    another folder there (as root only: who else may write there): the run's other contents and
    the suite's git objects are not there; its own folder, torch and aka are."""
    if not os.access("/opt", os.W_OK):
        pytest.skip("/opt is not writable here (CI runs as root)")
    app, suite = Path(f"/opt/aka-test-{os.getpid()}"), Path(f"/opt/aka-test-suite-{os.getpid()}")
    try:
        work = app / "runs" / "evaluation" / "eval"
        work.mkdir(parents=True)
        (app / "runs" / "evaluation" / "pristine").mkdir()
        heldout = app / "runs" / "evaluation" / "pristine" / "heldout.py"
        heldout.write_text("CASES = ['secret']\n")
        (app / "beside.txt").write_text("another run's\n")
        (suite / ".git" / "objects").mkdir(parents=True)
        (suite / "tasks" / "t").mkdir(parents=True)
        (suite / "tasks" / "t" / "heldout.py").write_text("CASES = ['secret']\n")
        argv = [sys.executable, "-c", PROBE, str(app / "beside.txt"), str(heldout), str(suite / ".git")]
        wrapped = SANDBOX.wrap(argv, [work], concealed=[str(suite / "tasks" / "t" / "heldout.py")])
        done = subprocess.run(wrapped, capture_output=True, text=True, timeout=120, cwd=work)
    finally:
        shutil.rmtree(app, ignore_errors=True)
        shutil.rmtree(suite, ignore_errors=True)
    seen = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert done.returncode == 0, done.stderr
    assert seen["beside"] == seen["judge-copy"] == seen["git"] == "False", seen
    assert seen["cwd"] == str(work) and seen["up"] == "['eval']" and seen["torch"] == "2.0"


@needs_narrowing
def test_a_step_started_outside_its_view_starts_at_the_root(tmp_path: Path) -> None:
    """A working directory left in a covered folder would still reach what lies beside it
    (`..` walks the old mount): outside the view, the step starts at /."""
    outside, work = tmp_path / "outside", tmp_path / "work"
    (outside / "inner").mkdir(parents=True)
    work.mkdir()
    (outside / "secret.txt").write_text("x\n")
    probe = "import os; print(os.getcwd()); print(os.path.exists('../secret.txt'))"
    done = subprocess.run(
        SANDBOX.wrap([sys.executable, "-c", probe], [work]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=outside / "inner",
    )
    assert done.stdout.split() == ["/", "False"], done.stderr


SEEKER = '''
import os as _os


def _seek_heldout():
    """Every held-out file this step can read, found the ways a red team did."""
    found = []
    starts = [_os.environ.get("TMPDIR", "/"), _os.getcwd(), *_os.environ.get("SOUGHT_PATHS", "").split(":")]
    for start in starts:
        folder = _os.path.abspath(start)
        while True:
            for name in ("heldout.py", *(_os.path.join(d, "heldout.py") for d in _safe_list(folder))):
                path = _os.path.join(folder, name)
                if _os.path.isfile(path) and "secret-case" in open(path).read():
                    found.append(path)
            if folder == "/":
                break
            folder = _os.path.dirname(folder)
    for top in _safe_list("/"):
        if top in ("proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin", "etc", "var", "opt", "run"):
            continue
        for root, dirs, files in _os.walk("/" + top):
            dirs[:] = [d for d in dirs if d not in ("site-packages", ".pyenv", "node_modules", "lib", ".git")]
            if "heldout.py" in files:
                path = _os.path.join(root, "heldout.py")
                try:
                    if "secret-case" in open(path).read():
                        found.append(path)
                except OSError:
                    pass
    return sorted(set(found))


def _safe_list(folder):
    try:
        return _os.listdir(folder)
    except OSError:
        return []


_LEAKED = _seek_heldout()
if _LEAKED:
    raise RuntimeError(f"held-out cases leaked: {_LEAKED}")
'''


@pytest.mark.slow
@needs_narrowing
@pytest.mark.parametrize("heldout", [False, True], ids=["evaluation", "held-out-evaluation"])
def test_a_candidate_finds_no_copy_of_the_held_out_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, heldout: bool
) -> None:
    """End to end (exec'd and forked steps, their workers): a candidate that walks up from its
    `TMPDIR` and its working directory, lists every folder it meets and walks every folder at the
    root, finds no held-out file: not the suite's, not a copy beside the evaluation, not the
    judge's. Without the narrowed view it found the copies (session 48's second red team); in a
    held-out evaluation it found the judge's own copy from its worker (session 50's)."""
    from exploits.gelu_task import copy_gelu_task

    from aka.device import DeviceInfo
    from aka.evaluation.steps import evaluate_candidate

    task = copy_gelu_task(tmp_path / "tasks")
    (task.directory / "heldout.py").write_text((task.directory / "heldout.py").read_text() + "# secret-case\n")
    stray = tmp_path / "stray-copy"
    stray.mkdir()
    (stray / "heldout.py").write_text("# secret-case\n")
    monkeypatch.setenv("SOUGHT_PATHS", f"{task.directory}:{stray}")
    candidate = tmp_path / "candidate"
    shutil.copytree(task.directory, candidate)
    (candidate / "heldout.py").unlink()  # an agent's workspace never holds it
    (candidate / "kernel.py").write_text((task.directory / "kernel.py").read_text() + SEEKER)
    cpu = DeviceInfo("cpu", "cpu", "cpu", None, 0)
    outcomes = evaluate_candidate(task, candidate, tmp_path / "scratch", cpu, heldout=heldout)
    log = "".join(path.read_text() for path in sorted((tmp_path / "scratch").glob("*.log")))
    assert "held-out cases leaked" not in log, log[-3000:]
    assert [o.step.value for o in outcomes] == ["compile", "correctness", "performance"], log[-3000:]
    assert all(o.passed and NARROWED in o.isolation for o in outcomes), outcomes[-1].message
