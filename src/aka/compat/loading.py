"""Which format a task folder is in, and loading the original's two formats.

- `schema_version: 2`: the original's schema v2 (`aka.compat.v2_config`).
- otherwise, a folder whose files speak our step report (a file names `AKA_RESULT_FD` or imports
  `aka.harness`) is ours, validated strictly by `aka.config.task_config`;
- otherwise it is the original's schema v1 (`aka.compat.v1_config`): its commands write result
  files, and unknown fields are warnings.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from aka.compat.spec import OriginalSpec, TaskFormat
from aka.compat.v1_config import load_v1
from aka.compat.v2_config import load_v2
from aka.config.task_config import TaskConfig
from aka.errors import ConfigError

logger = logging.getLogger(__name__)
STEP_REPORT_SIGNS = ("AKA_RESULT_FD", "aka.harness")
SCANNED_SUFFIXES = (".py", ".sh")
SKIPPED_PARTS = frozenset({"__pycache__", ".git", "build"})


def speaks_step_report(task_dir: Path) -> bool:
    """A file of the folder sends our step report (it names the result pipe, or uses aka.harness)."""
    for path in sorted(task_dir.rglob("*")):
        if path.suffix in SCANNED_SUFFIXES and path.is_file() and not SKIPPED_PARTS & set(path.parts):
            text = path.read_text(encoding="utf-8", errors="replace")
            if any(sign in text for sign in STEP_REPORT_SIGNS):
                return True
    return False


def task_format(task_dir: Path, raw: dict[str, Any]) -> TaskFormat:
    if "schema_version" in raw:
        if raw["schema_version"] != 2:
            raise ConfigError(
                f"{task_dir / 'config.yaml'}: field 'schema_version': {raw['schema_version']!r} is not "
                "supported; aka reads the original's schema 2 (or a config without schema_version)"
            )
        return TaskFormat.ORIGINAL_V2
    return TaskFormat.AKA if speaks_step_report(task_dir) else TaskFormat.ORIGINAL_V1


def load_original(task_dir: Path, raw: dict[str, Any], name: str) -> tuple[TaskConfig, OriginalSpec]:
    """An original-format task's config and spec; its warnings are logged once here."""
    if task_format(task_dir, raw) is TaskFormat.ORIGINAL_V2:
        config, spec = load_v2(task_dir, raw, name.split("/")[0])
    else:
        config, spec = load_v1(task_dir, raw)
    for warning in spec.warnings:
        logger.warning("%s", warning)
    return config, spec
