"""The on-disk result cache: one JSON file per (task identity, candidate sources, device,
platform versions), written atomically so concurrent trainers never read half a record."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from pydantic import ValidationError

from aka.results.task_result import FailureKind, write_text_atomic
from aka.rl.result import RL_RESULT_SCHEMA_VERSION, CandidateResult

logger = logging.getLogger(__name__)
RESULTS_DIR = "results"
UNCACHED = frozenset({FailureKind.INFRA_ERROR})


def candidate_sha256(files: dict[str, str]) -> str:
    """A hash of the complete set of editable files as evaluated (name and content of each)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(hashlib.sha256(files[name].encode()).digest())
    return digest.hexdigest()


def cache_key(
    task_name: str,
    task_identity: str,
    sources: str,
    device: str,
    platform: dict[str, str],
    settings: dict[str, str] | None = None,
) -> str:
    """The key: what decides a verdict (the task's files, the candidate's, the device, the versions
    of aka, torch, triton, pydantic and Python), what decides the record's numbers (`settings`: the
    scorer, the evaluator's settings from the environment), and the task's name, which the record
    carries. Without the scorer a second scorer on the same cache was served the first's score."""
    material = json.dumps(
        {
            "name": task_name,
            "task": task_identity,
            "sources": sources,
            "device": device,
            "platform": platform,
            "settings": settings or {},
            "schema": RL_RESULT_SCHEMA_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()


class ResultCache:
    """`<directory>/results/<key[:2]>/<key>.json`. An infrastructure error is never stored (it is
    not the candidate's verdict; the next call evaluates again); an unreadable record is a miss."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, key: str) -> Path:
        return self.directory / RESULTS_DIR / key[:2] / f"{key}.json"

    def get(self, key: str) -> CandidateResult | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            result = CandidateResult.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as exc:
            logger.warning("ignoring unreadable cache record %s: %s", path, exc)
            return None
        return result.model_copy(update={"cached": True}) if result.cache_key == key else None

    def put(self, result: CandidateResult) -> bool:
        if result.failure_kind in UNCACHED:
            return False
        write_text_atomic(self.path(result.cache_key), result.model_copy(update={"cached": False}).model_dump_json())
        return True
