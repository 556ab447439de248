"""Repository tasks: an upstream git repository at a pinned revision, merged with the task folder.

`materialize` clones `repo_url` at `repo_revision` into `repo_subdir` of a copy of the task folder
(the task's own harness and config stay outside the clone, where the agent's edits never reach),
runs `post_clone_install` there once, and returns the task with that directory as its pristine
source. From then on a repository task is handled like any other: the agent gets a copy, and the
evaluation rebuilds from the pristine directory with only the editable files taken from the agent.
Editable files are the `source_file_path` hints (relative to the repository root), or every file
git tracks when there are none. The result is cached per run and task identity, so resume and
several workers reuse one clone (made in a temporary folder and renamed into place).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlparse

from aka.config.task_config import REPOSITORY_FAMILY, TaskConfig
from aka.config.tasks import IGNORED_NAMES, Task, task_identity
from aka.errors import AkaError
from aka.process import run_command

MARKER = ".aka_repository"
GIT_TIMEOUT_SECONDS = 600


def repo_subdir(config: TaskConfig) -> str:
    """`repo_subdir`, else the repository's name from its URL (`.../kernels.git` -> `kernels`)."""
    if config.repo_subdir:
        return config.repo_subdir
    assert config.repo_url is not None
    name = Path(urlparse(config.repo_url).path.rstrip("/")).name or "repository"
    return name.removesuffix(".git").removesuffix(".bundle") or "repository"


def _resolve_url(url: str, task_dir: Path) -> str:
    """A relative path (e.g. a bundled `repo.bundle`) is relative to the task folder."""
    if "://" in url or url.startswith(("git@", "/")) or ":" in url.split("/")[0]:
        return url
    return str((task_dir / url).resolve())


def _git(args: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except FileNotFoundError as exc:
        raise AkaError("repository tasks need git on PATH (apt-get install git)") from exc
    except subprocess.TimeoutExpired as exc:
        raise AkaError(f"git {' '.join(args[:2])} took over {GIT_TIMEOUT_SECONDS} s") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AkaError(f"git {args[0]} failed: {last}")
    return done.stdout.strip()


def _clone(task: Task, dest: Path, log: Path) -> str:
    """Clone at the pinned revision, run post_clone_install; returns the commit checked out."""
    config = task.config
    assert config.repo_url is not None
    clone = dest / repo_subdir(config)
    where = task.directory / "config.yaml"
    try:
        _git(["clone", "--quiet", _resolve_url(config.repo_url, task.directory), str(clone)])
    except AkaError as exc:
        raise AkaError(f"{where}: field 'repo_url' ({config.repo_url}): {exc}") from None
    if config.repo_revision:
        try:
            _git(["checkout", "--quiet", "--detach", config.repo_revision], cwd=clone)
        except AkaError as exc:
            raise AkaError(
                f"{where}: field 'repo_revision' ({config.repo_revision}) is not in the repository: {exc}"
            ) from None
    commit = _git(["rev-parse", "HEAD"], cwd=clone)
    for command in config.post_clone_install:
        ran = run_command(command, clone, dict(os.environ), config.compile_timeout, log)
        if not ran.ok:
            raise AkaError(f"{where}: field 'post_clone_install': {ran.describe()} (log: {log})")
    return commit


def _editable(config: TaskConfig, root: Path) -> list[str]:
    subdir = repo_subdir(config)
    if config.source_file_path:
        missing = [p for p in config.source_file_path if not (root / subdir / p).is_file()]
        if missing:
            where = config.repo_revision or "HEAD"
            raise AkaError(
                f"source_file_path '{missing[0]}' is not in the repository at {where}"
                f" (paths are relative to the repository root)"
            )
        return [f"{subdir}/{p}" for p in config.source_file_path]
    tracked = _git(["ls-files"], cwd=root / subdir).splitlines()
    return [f"{subdir}/{p}" for p in tracked if not set(Path(p).parts) & IGNORED_NAMES]


def materialize(task: Task, cache_root: Path) -> Task:
    """The task with its repository cloned into a pristine directory (other families unchanged)."""
    if task.family != REPOSITORY_FAMILY:
        return task
    key = hashlib.sha256(f"{task_identity(task)}\0{task.config.repo_url}\0{task.config.repo_revision}".encode())
    target = cache_root / f"{task.slug}-{key.hexdigest()[:12]}"
    if not (target / MARKER).is_file():
        cache_root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{task.slug}-", dir=cache_root))
        try:
            shutil.copytree(
                task.directory, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*IGNORED_NAMES, "*.pyc")
            )
            commit = _clone(task, staging, cache_root / f"{task.slug}.install.log")
            (staging / MARKER).write_text(commit + "\n")
            try:
                staging.rename(target)
            except OSError:
                if not (target / MARKER).is_file():  # not another worker's finished copy
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    subdir = repo_subdir(task.config)
    tunables = [t.model_copy(update={"file": f"{subdir}/{t.file}"}) if t.file else t for t in task.config.tunables]
    config = task.config.model_copy(update={"source_file_path": _editable(task.config, target), "tunables": tunables})
    return dataclasses.replace(task, directory=target, config=config)


def pinned_commit(task: Task) -> str | None:
    """The commit a materialized repository task was cloned at."""
    marker = task.directory / MARKER
    return marker.read_text().strip() if marker.is_file() else None
