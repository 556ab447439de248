"""Repository tasks end to end, on a local git repository this test makes itself.

The repository has two commits; the task pins the first, so the second (which breaks the kernel)
must never be seen. post_clone_install writes a file the harness requires. The replay agent
edits the kernel file inside the clone (and, in one run, a file outside the editable hints).
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from aka.config.tasks import select_tasks
from aka.errors import AkaError
from aka.results.task_result import FailureKind, TaskResult, TaskStatus
from aka.run.repository import materialize, pinned_commit
from aka.run.runner import run_experiment

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GOOD_OPS = "def scale(x):\n    return x * 2\n"
HARNESS = textwrap.dedent('''
    """Checks the repository's `ops.scale`; post_clone_install must have run."""
    from pathlib import Path

    import torch

    from aka.harness import Case, KernelTask, import_candidate, random_tensor, run_task


    def load(directory: Path):
        if not (Path.cwd() / "minik" / "GENERATED").is_file():
            raise RuntimeError("post_clone_install did not run")
        return import_candidate("ops", directory / "minik" / "minik").scale


    TASK = KernelTask(
        name="repository/local/minik",
        cases=[Case.make(n=n, dtype="float32") for n in (1000, 2001, 4099, 8191)],
        ci_cases=[Case.make(n=777, dtype="float32")],
        make_inputs=lambda case, gen, device: (random_tensor((case.int_param("n"),), torch.float32, gen, device),),
        reference=lambda x: x * 2,
        load_candidate=load,
    )

    if __name__ == "__main__":
        raise SystemExit(run_task(TASK))
''')


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose first commit is correct and whose second breaks `scale`."""
    repo = tmp_path / "upstream" / "minik"
    (repo / "minik").mkdir(parents=True)
    (repo / "minik" / "ops.py").write_text(GOOD_OPS)
    (repo / "README.md").write_text("minik\n")
    _git("init", "--quiet", cwd=repo)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".", cwd=repo)
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "--quiet", "-m", "good", cwd=repo)
    pinned = _git("rev-parse", "HEAD", cwd=repo)
    (repo / "minik" / "ops.py").write_text("def scale(x):\n    return x * 3\n")
    _git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "--quiet", "-am", "broken", cwd=repo)
    return repo, pinned


@pytest.fixture
def repo_task(tmp_path: Path, upstream: tuple[Path, str]) -> Path:
    repo, pinned = upstream
    task_dir = tmp_path / "tasks" / "repository" / "local" / "minik"
    task_dir.mkdir(parents=True)
    (task_dir / "harness.py").write_text(HARNESS)
    (task_dir / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "task_type": "repository",
                "repo_url": str(repo),
                "repo_revision": pinned,
                "repository_language": "python",
                "post_clone_install": ["python3 -c \"open('GENERATED', 'w').write('ok')\""],
                "source_file_path": ["minik/ops.py"],
                "compile_command": ["python3 harness.py compile"],
                "correctness_command": ["python3 harness.py correctness"],
                "performance_command": ["python3 harness.py performance"],
                "compile_timeout": 120,
                "correctness_timeout": 120,
                "performance_timeout": 120,
                "prompt": {"instructions": "Make minik/ops.py faster.", "cheatsheet": "It doubles x."},
            }
        )
    )
    return task_dir


def _run(tmp_path: Path, agent: dict[str, object]) -> tuple[Path, TaskResult]:
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "agent": agent,
                "tasks": ["all"],
                "target_gpu_model": "auto",
                "tasks_root": str(tmp_path / "tasks"),
                "log_directory": str(tmp_path / "logs"),
                "workspace_directory_prefix": str(tmp_path / "workspace"),
            }
        )
    )
    outcome = run_experiment(config, device=None)
    (result_path,) = outcome.run_dir.rglob("task_result.yaml")
    return result_path.parent, TaskResult.model_validate(yaml.safe_load(result_path.read_text()))


def test_materialize_clones_the_pinned_revision_and_installs(
    tmp_path: Path, repo_task: Path, upstream: tuple[Path, str]
) -> None:
    (task,) = select_tasks(tmp_path / "tasks", ["all"])
    ready = materialize(task, tmp_path / "cache")
    assert ready.config.source_file_path == ["minik/minik/ops.py"]
    assert (ready.directory / "minik" / "minik" / "ops.py").read_text() == GOOD_OPS
    assert (ready.directory / "minik" / "GENERATED").read_text() == "ok"
    assert (ready.directory / "harness.py").is_file()
    assert pinned_commit(ready) == upstream[1]
    again = materialize(task, tmp_path / "cache")
    assert again.directory == ready.directory  # cached: one clone per run and task identity


def test_noop_agent_passes_on_the_pinned_revision(tmp_path: Path, repo_task: Path) -> None:
    workspace, result = _run(tmp_path, {"template": "noop"})
    assert result.status is TaskStatus.PASS, result.failure_message
    assert (workspace / "work" / "minik" / "minik" / "ops.py").read_text() == GOOD_OPS
    assert not (workspace / "work" / "minik" / ".git").exists()
    # the original editable file, where a performance step run by hand finds the baseline
    assert (workspace / "work" / ".aka_baseline" / "minik" / "minik" / "ops.py").read_text() == GOOD_OPS


def test_agent_edits_inside_the_clone_are_evaluated(tmp_path: Path, repo_task: Path) -> None:
    solutions = tmp_path / "solutions" / "repository" / "local" / "minik" / "minik" / "minik"
    solutions.mkdir(parents=True)
    (solutions / "ops.py").write_text("def scale(x):\n    return x + x + 1\n")
    _, result = _run(tmp_path, {"template": "replay", "solutions_dir": str(tmp_path / "solutions")})
    assert result.pass_compilation and not result.pass_correctness
    assert result.failure_kind is FailureKind.INCORRECT


def test_a_missing_editable_path_is_a_clear_error(tmp_path: Path, repo_task: Path) -> None:
    config = yaml.safe_load((repo_task / "config.yaml").read_text())
    config["source_file_path"] = ["minik/nope.py"]
    (repo_task / "config.yaml").write_text(yaml.safe_dump(config))
    (task,) = select_tasks(tmp_path / "tasks", ["all"])
    with pytest.raises(AkaError, match="nope.py' is not in the repository"):
        materialize(task, tmp_path / "cache")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("repo_revision", "0" * 40, "field 'repo_revision' .* is not in the repository: git checkout failed"),
        ("repo_url", "/nonexistent/minik.git", "field 'repo_url' .*: git clone failed"),
        ("post_clone_install", ["python3 -c 'raise SystemExit(3)'"], "field 'post_clone_install': .* status 3"),
    ],
)
def test_a_broken_clone_or_install_is_a_clear_error(
    tmp_path: Path, repo_task: Path, field: str, value: object, expected: str
) -> None:
    config = yaml.safe_load((repo_task / "config.yaml").read_text())
    config[field] = value
    (repo_task / "config.yaml").write_text(yaml.safe_dump(config))
    (task,) = select_tasks(tmp_path / "tasks", ["all"])
    with pytest.raises(AkaError, match=expected):
        materialize(task, tmp_path / "cache")
    assert not any((tmp_path / "cache").glob("repository_local_minik-*")), "no half-made clone is left as ready"
