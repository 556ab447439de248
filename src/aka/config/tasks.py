"""Finding tasks under a tasks root, resolving selectors, and a task's identity hash."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from aka.config.task_config import TASK_CONFIG_NAME, TaskConfig, load_task_config
from aka.errors import ConfigError

IGNORED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", "build", ".git"})


@dataclass(frozen=True)
class Task:
    """A task folder and its validated configuration."""

    name: str
    directory: Path
    config: TaskConfig

    @property
    def family(self) -> str:
        return self.config.task_type

    @property
    def slug(self) -> str:
        """The task name with `/` as `_`, as workspace folders use it."""
        return self.name.replace("/", "_")


def default_tasks_root() -> Path:
    """The repository's `tasks/` folder next to the source tree."""
    return Path(__file__).resolve().parents[3] / "tasks"


def task_files(task_dir: Path) -> list[Path]:
    """Every file of a task folder that defines it (caches excluded), sorted for stable hashing."""
    return sorted(
        p
        for p in task_dir.rglob("*")
        if p.is_file() and not (set(p.relative_to(task_dir).parts) & IGNORED_NAMES) and p.suffix != ".pyc"
    )


JUDGE_MODULES = ("harness", "evaluation", "process.py")  # under aka/: the code that reaches a verdict


@functools.cache
def judge_identity() -> str:
    """SHA-256 over the platform's version and the code that reaches a verdict (aka.harness, the
    evaluator and the step contract): a result or a frozen baseline judged by other code is not
    reused on resume (`task_identity` includes this)."""
    from aka import __version__

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(__version__.encode())
    for name in JUDGE_MODULES:
        target = package / name
        for path in sorted(target.rglob("*.py")) if target.is_dir() else [target]:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def task_identity(task: Task) -> str:
    """SHA-256 over every task file's path and content (config, harness and sources alike) and
    the judge's identity (`judge_identity`)."""
    digest = hashlib.sha256(judge_identity().encode())
    for path in task_files(task.directory):
        digest.update(path.relative_to(task.directory).as_posix().encode())
        digest.update(b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _all_task_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob(TASK_CONFIG_NAME) if not (set(p.parts) & IGNORED_NAMES))


def load_task(root: Path, task_dir: Path) -> Task:
    return Task(task_dir.relative_to(root).as_posix(), task_dir, load_task_config(task_dir))


def select_tasks(root: Path, selectors: list[str], source: str = "tasks") -> list[Task]:
    """Resolve `all`, a family, a subtree or one task; a selector matching nothing is an error."""
    if not root.is_dir():
        raise ConfigError(f"{source}: tasks root {root} does not exist (set tasks_root to a folder of tasks)")
    all_dirs = _all_task_dirs(root)
    chosen: dict[Path, None] = {}
    for selector in selectors:
        clean = selector.strip().strip("/")
        if clean == "all":
            matches = all_dirs
        else:
            base = (root / clean).resolve()
            matches = [d for d in all_dirs if d.resolve() == base or base in d.resolve().parents]
        if not matches:
            raise ConfigError(
                f"{source}: field 'tasks': selector '{selector}' matches no task under {root} "
                "(use `aka tasks list` to see the task names)"
            )
        chosen.update(dict.fromkeys(matches))
    return [load_task(root, d) for d in chosen]


def gate_tasks(tasks: list[Task], arch: str | None) -> tuple[list[Task], list[tuple[Task, str]]]:
    """Split tasks into runnable ones and (task, reason) pairs dropped by `platform_support`."""
    runnable: list[Task] = []
    dropped: list[tuple[Task, str]] = []
    for task in tasks:
        support = task.config.platform_support
        if support.status == "skip":
            dropped.append((task, support.reason or "platform_support.status is skip"))
        elif support.required_arch and support.required_arch != arch:
            dropped.append((task, f"requires {support.required_arch}, this device is {arch or 'cpu'}"))
        else:
            runnable.append(task)
    return runnable, dropped
