"""`aka export`: one row per episode (a task workspace with a `task_result.yaml`) of one or more
runs, as JSON lines or Parquet, read from the run directories' files only.

A task tried more than once in a run (a resumed infrastructure error) has a row per try; `latest`
marks the one the run's reports count. `arm` and `repeat` name the trial of a multi-arm or
repeated run (null in a plain one); `model` is the run config's `agent.model` override for the
row's arm (null when the agent's own default was used).
"""

from __future__ import annotations

import hashlib
import json
import os
import types
import typing
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from aka.errors import AkaError
from aka.results.task_result import RESULT_FILE_NAME, read_task_result, temp_file_beside, write_text_atomic
from aka.run.layout import MANIFEST_NAME, result_workspaces

EXPORT_SCHEMA_VERSION = 1
PROMPT_FILE = "prompt.md"


class ExportFormat(str, Enum):
    JSONL = "jsonl"
    PARQUET = "parquet"


class EpisodeRow(BaseModel):
    """One exported episode. Field names are the export's stable columns."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = EXPORT_SCHEMA_VERSION
    run: str
    run_dir: str
    workspace: str
    task: str
    task_type: str
    task_identity: str | None
    arm: str | None = None
    repeat: int | None = None
    agent: str | None
    model: str | None
    scorer: str
    device: str
    prompt_sha256: str | None
    transcript: str | None
    status: str
    failure_kind: str
    failure_message: str | None
    compiled: bool
    correct: bool
    score: float
    speedup: float | None
    speedup_ci_low: float | None
    speedup_ci_high: float | None
    base_ms: float | None
    optimized_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    turns: int | None
    agent_limit: str | None = None
    tool_calls: int | None
    agent_wall_seconds: float | None
    evaluation_seconds: float | None
    latest: bool


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST_NAME
    if not path.is_file():
        raise AkaError(f"{run_dir}: not a run directory (no {MANIFEST_NAME}); pass run_<timestamp> folders")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AkaError(f"{path}: unreadable run manifest: {exc}") from exc
    if not isinstance(data, dict):
        raise AkaError(f"{path}: the run manifest is not a JSON object")
    return data


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def run_rows(run_dir: Path) -> list[EpisodeRow]:
    """Every episode of one run, in the order they ran."""
    run_dir = run_dir.resolve()
    manifest = _manifest(run_dir)
    config = _mapping(manifest.get("config"))
    agent_section = _mapping(config.get("agent"))
    arm_models = {
        _mapping(arm).get("label"): _mapping(_mapping(arm).get("agent")).get("model")
        for arm in config.get("arms") or []
        if isinstance(arm, dict)
    }
    identities = _mapping(manifest.get("tasks"))
    rows: list[EpisodeRow] = []
    for workspace in result_workspaces(run_dir):
        try:
            result = read_task_result(workspace / RESULT_FILE_NAME)
        except (OSError, ValueError, ValidationError) as exc:
            raise AkaError(
                f"{workspace / RESULT_FILE_NAME}: not a valid task result: {str(exc).splitlines()[0]}"
            ) from exc
        agent = result.agent
        rows.append(
            EpisodeRow(
                run=run_dir.name,
                run_dir=str(run_dir),
                workspace=workspace.name,
                task=result.task_name,
                task_type=result.task_type,
                task_identity=identities.get(result.task_name),
                agent=agent.agent if agent else manifest.get("agent"),
                model=arm_models.get(result.arm, agent_section.get("model"))
                if result.arm
                else agent_section.get("model"),
                arm=result.arm,
                repeat=result.repeat,
                scorer=result.scorer,
                device=result.device,
                prompt_sha256=_sha256(workspace / PROMPT_FILE),
                transcript=agent.transcript if agent else None,
                status=result.status.value,
                failure_kind=result.failure_kind.value,
                failure_message=result.failure_message,
                compiled=result.pass_compilation,
                correct=result.pass_correctness,
                score=result.score,
                speedup=result.speedup_ratio,
                speedup_ci_low=result.speedup_ci_low,
                speedup_ci_high=result.speedup_ci_high,
                base_ms=result.base_execution_time,
                optimized_ms=result.best_optimized_execution_time,
                input_tokens=agent.input_tokens if agent else None,
                output_tokens=agent.output_tokens if agent else None,
                cost_usd=agent.cost_usd if agent else None,
                turns=agent.turns if agent else None,
                agent_limit=agent.limit if agent else None,
                tool_calls=agent.tool_calls if agent else None,
                agent_wall_seconds=agent.wall_seconds if agent else None,
                evaluation_seconds=result.evaluation_seconds,
                latest=False,
            )
        )
    last = {(row.task, row.arm, row.repeat): index for index, row in enumerate(rows)}
    return [
        row.model_copy(update={"latest": last[(row.task, row.arm, row.repeat)] == index})
        for index, row in enumerate(rows)
    ]


def export_rows(run_dirs: Iterable[Path]) -> list[EpisodeRow]:
    return [row for run_dir in run_dirs for row in run_rows(run_dir)]


def to_jsonl(rows: list[EpisodeRow]) -> str:
    return "".join(row.model_dump_json() + "\n" for row in rows)


def _arrow_type(annotation: Any) -> Any:
    import pyarrow as pa

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = (
        args[0]
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else annotation
    )
    return {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}[base]


def write_parquet(rows: list[EpisodeRow], path: Path) -> None:
    """Parquet with a fixed schema (columns that are all null keep their type), written atomically."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise AkaError("--format parquet needs pyarrow: pip install 'agentkernelarena[export]'") from None
    schema = pa.schema([(name, _arrow_type(field.annotation)) for name, field in EpisodeRow.model_fields.items()])
    table = pa.Table.from_pylist([row.model_dump() for row in rows], schema=schema)
    fd, tmp = temp_file_beside(path)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_runs(run_dirs: list[Path], fmt: ExportFormat, output: Path | None) -> str | None:
    """Write the rows to `output`; JSON lines without an output are returned for stdout."""
    if fmt is ExportFormat.PARQUET and output is None:
        raise AkaError("--format parquet needs --output FILE")
    rows = export_rows(run_dirs)
    if fmt is ExportFormat.PARQUET:
        assert output is not None
        write_parquet(rows, output)
        return None
    text = to_jsonl(rows)
    if output is None:
        return text
    write_text_atomic(output, text)
    return None
