"""Finding tasks under a tasks root, resolving selectors, and a task's identity hash."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from aka.compat.loading import load_original, task_format
from aka.compat.platform import platform_skip_reason
from aka.compat.spec import OriginalSpec, TaskFormat
from aka.compat.triton_versions import installed_triton, mismatch, triton_need
from aka.compat.v1_config import placeholder_config
from aka.config.families import family_named
from aka.config.task_config import TASK_CONFIG_NAME, TaskConfig, read_task_yaml, validate_task_config
from aka.errors import ConfigError

IGNORED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", "build", ".git"})


@dataclass(frozen=True)
class Task:
    """A task folder and its validated configuration. `original`: what a folder in the original
    AgentKernelArena's format says beyond our config (aka.compat). `problem`: why a task found
    among many could not be loaded; it runs as that task's infrastructure failure."""

    name: str
    directory: Path
    config: TaskConfig
    original: OriginalSpec | None = None
    problem: str | None = None

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


# Under aka/: the code that reaches a verdict, a score or a reward. Until session 54 only the first
# four: a fix to the verdict rules in run/task_pipeline.py, results/ or rl/ left every cached
# reward and resumed result of the old rules in force (red team G).
JUDGE_MODULES = (
    "harness",
    "evaluation",
    "compat",
    "config",
    "results",
    "run",
    "rl",
    "heldout",
    "process.py",
    "device.py",
    "trees.py",
    "stillness.py",
)


@functools.cache
def judge_identity() -> str:
    """SHA-256 over the platform's version and the code that reaches a verdict, a score or a
    reward (`JUDGE_MODULES`): a result, a cached reward or a frozen baseline judged by other code
    is not reused (`task_identity` includes this). Read once a process: a long-lived evaluator
    (`aka serve`) keeps its code's identity until it restarts, as it keeps the code."""
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
    """A task in our format (strict), or in the original's v1 or v2 (aka.compat.loading)."""
    name = task_dir.relative_to(root).as_posix()
    raw = read_task_yaml(task_dir)
    if task_format(task_dir, raw) is TaskFormat.AKA:
        return Task(name, task_dir, validate_task_config(task_dir, raw))
    config, original = load_original(task_dir, raw, name)
    return Task(name, task_dir, config, original)


def load_or_problem(root: Path, task_dir: Path) -> Task:
    """`load_task`, or a task carrying its one-line problem, so one bad folder never stops the others."""
    try:
        return load_task(root, task_dir)
    except ConfigError as exc:
        name = task_dir.relative_to(root).as_posix()
        return Task(name, task_dir, placeholder_config(name.split("/")[0]), problem=str(exc))


def select_tasks(root: Path, selectors: list[str], source: str = "tasks") -> list[Task]:
    """Resolve `all`, a family, a subtree or one task; a selector matching nothing is an error.

    A task named by its own selector is loaded strictly (a bad config is an error, nothing runs);
    among the many tasks of `all`, a family or a subtree, one that cannot be loaded carries its
    problem (`Task.problem`) and becomes that task's infrastructure failure, so a broken folder
    never stops the others."""
    if not root.is_dir():
        raise ConfigError(f"{source}: tasks root {root} does not exist (set tasks_root to a folder of tasks)")
    all_dirs = _all_task_dirs(root)
    chosen: dict[Path, None] = {}
    named: set[Path] = set()
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
        if clean != "all" and len(matches) == 1 and matches[0].resolve() == base:
            named.add(matches[0])
        chosen.update(dict.fromkeys(matches))
    return [load_task(root, d) if d in named else load_or_problem(root, d) for d in chosen]


def skip_reason(task: Task, arch: str | None, installed: str | None) -> str | None:
    """Why `task` does not run on a device of architecture `arch` with Triton `installed`, or None."""
    if task.problem is not None:
        return None
    if task.original is not None:
        reason = task.original.skip_reason or platform_skip_reason(task.original.platform, arch)
    else:
        support = task.config.platform_support
        reason = None
        if support.status == "skip":
            reason = support.reason or "platform_support.status is skip"
        elif support.required_arch and support.required_arch != arch:
            reason = f"requires {support.required_arch}, this device is {arch or 'cpu'}"
    if reason is not None:
        return reason
    family = family_named(task.family)
    return mismatch(
        triton_need(task.directory, task.config.triton_versions, family.language if family else ""), installed
    )


def gate_tasks(tasks: list[Task], arch: str | None) -> tuple[list[Task], list[tuple[Task, str]]]:
    """Split tasks into runnable ones and (task, reason) pairs dropped here: `platform_support`
    (ours or the original's), a language this machine cannot run, or the Triton the task needs."""
    installed = installed_triton()
    runnable: list[Task] = []
    dropped: list[tuple[Task, str]] = []
    for task in tasks:
        reason = skip_reason(task, arch, installed)
        if reason is None:
            runnable.append(task)
        else:
            dropped.append((task, reason))
    return runnable, dropped
