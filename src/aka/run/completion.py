"""Completion records: the evidence resume trusts instead of "a folder with this name exists".

A task counts as done only while its record still matches: the same task identity (config and
harness files), the same `task_result.yaml` bytes, and the same editable sources as evaluated.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from aka.config.tasks import Task
from aka.results.task_result import RESULT_FILE_NAME, TaskResult, write_task_result, write_text_atomic
from aka.run.layout import AGENT_WORK_DIR, task_workspaces
from aka.trees import agent_file_digest

COMPLETION_NAME = "completion.json"


class CompletionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_name: str
    task_identity: str
    result_sha256: str
    sources_sha256: dict[str, str | None]
    completed_at: str


def file_sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as file:  # in chunks: whatever stands in the workspace may be huge
        for chunk in iter(lambda: file.read(2**20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def source_hashes(workspace: Path, task: Task) -> dict[str, str | None]:
    """The agent's editable files as the judge reads them (an oversized or linked one is not read)."""
    return {rel: agent_file_digest(workspace / AGENT_WORK_DIR, rel) for rel in task.config.source_file_path}


def write_completion(workspace: Path, task: Task, identity: str, evaluated: dict[str, str | None]) -> None:
    """Called after `task_result.yaml` is on disk; `evaluated` are the source hashes judged."""
    result_hash = file_sha256(workspace / RESULT_FILE_NAME)
    assert result_hash is not None, "the result must be written before its completion record"
    record = CompletionRecord(
        task_name=task.name,
        task_identity=identity,
        result_sha256=result_hash,
        sources_sha256=evaluated,
        completed_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    write_text_atomic(workspace / COMPLETION_NAME, record.model_dump_json(indent=2))


def record_matches(workspace: Path, task: Task, identity: str) -> bool:
    path = workspace / COMPLETION_NAME
    if not path.is_file():
        return False
    try:
        record = CompletionRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, OSError):
        return False
    return (
        record.task_name == task.name
        and record.task_identity == identity
        and record.result_sha256 == file_sha256(workspace / RESULT_FILE_NAME)
        and record.sources_sha256 == source_hashes(workspace, task)
    )


def completed_workspace(run_dir: Path, task: Task, identity: str, label: str | None = None) -> Path | None:
    """The newest workspace of `task` (of its trial `label`) whose completion record still matches, if any."""
    for workspace in reversed(task_workspaces(run_dir, task, label)):
        if record_matches(workspace, task, identity):
            return workspace
    return None


def rewrite_result(workspace: Path, result: TaskResult) -> None:
    """Replace a completed workspace's result (re-scored after an accepted change of scorer) and
    its record's hash of it, so the workspace still counts as done."""
    path = workspace / COMPLETION_NAME
    record = CompletionRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    write_task_result(workspace, result)
    result_hash = file_sha256(workspace / RESULT_FILE_NAME)
    assert result_hash is not None
    write_text_atomic(path, record.model_copy(update={"result_sha256": result_hash}).model_dump_json(indent=2))
