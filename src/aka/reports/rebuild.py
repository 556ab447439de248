"""A run's reports made from its directory alone: after the run (`aka run`), again later
(`aka report RUN`), or under another scorer (`aka score RUN --scorer NAME`).

The results a run's reports count are its `task_result.yaml` files, the newest per trial (task,
arm, repeat): a task retried on resume keeps its old workspace. The header comes from the run's
manifest. Nothing here needs the config, the tasks or a device.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from aka.errors import AkaError
from aka.reports.tree import replace_tree
from aka.reports.writers import RunHeader, report_files
from aka.results.scoring import finite_score, resolve_scorer
from aka.results.task_result import RESULT_FILE_NAME, TaskResult, TaskStatus, read_task_result
from aka.run.layout import ARM_REPORTS_DIR, MANIFEST_NAME, REPORTS_DIR, result_workspaces

SCORES_DIR = "scores"  # reports/scores/<scorer>/: a re-scoring, beside the run's own reports


def write_run_reports(
    run_dir: Path,
    results: Sequence[TaskResult],
    header: RunHeader,
    arms: Sequence[tuple[str, str]] = (),
    target: Path | None = None,
) -> Path:
    """The reports over every result, and for a multi-arm run `arms/<label>/` per arm (label,
    agent), all replaced together in `target` (default: the run's `reports/`)."""
    target = target or run_dir / REPORTS_DIR
    files = report_files(list(results), header)
    for label, agent in arms:
        arm_files = report_files([r for r in results if r.arm == label], replace(header, agent=f"{label} ({agent})"))
        files.update({f"{ARM_REPORTS_DIR}/{label}/{name}": text for name, text in arm_files.items()})
    replace_tree(target, files)
    return target


def counted_results(run_dir: Path) -> list[TaskResult]:
    """The newest result of every trial, in the order the trials first ran."""
    return [result for _, result in counted_workspaces(run_dir)]


def counted_workspaces(run_dir: Path) -> list[tuple[Path, TaskResult]]:
    """`counted_results` with the workspace each result is in."""
    newest: dict[tuple[str | None, str, int | None], tuple[Path, TaskResult]] = {}
    for workspace in result_workspaces(run_dir):
        try:
            result = read_task_result(workspace / RESULT_FILE_NAME)
        except (OSError, ValueError) as exc:
            raise AkaError(
                f"{workspace / RESULT_FILE_NAME}: not a readable task result ({type(exc).__name__}); "
                "resume the run to re-run it"
            ) from None
        newest[(result.arm, result.task_name, result.repeat)] = workspace, result
    return list(newest.values())


def _manifest(run_dir: Path) -> dict[str, object]:
    path = run_dir / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AkaError(f"{run_dir}: not a run directory (no {MANIFEST_NAME}); pass a folder made by aka run") from None
    except (OSError, ValueError) as exc:
        raise AkaError(f"{path}: not a valid run manifest ({type(exc).__name__})") from None
    if not isinstance(manifest, dict):
        raise AkaError(f"{path}: not a valid run manifest (not an object)")
    return manifest


def _header(run_dir: Path, manifest: dict[str, object], scorer: str) -> RunHeader:
    device = manifest.get("device")
    name = device.get("name") if isinstance(device, dict) else None
    config = manifest.get("config")
    report_format = config.get("report_format") if isinstance(config, dict) else None
    return RunHeader(
        run_dir.name,
        str(manifest.get("agent", "")),
        str(manifest.get("target_gpu_model", "")),
        str(name or ""),
        str(manifest.get("created_at", "")),
        scorer,
        str(report_format or "aka"),
    )


def _arms(manifest: dict[str, object]) -> list[tuple[str, str]]:
    config = manifest.get("config")
    declared = config.get("arms") if isinstance(config, dict) else None
    arms = []
    for arm in declared if isinstance(declared, list) else []:
        agent = arm.get("agent") if isinstance(arm, dict) else None
        template = agent.get("template") if isinstance(agent, dict) else None
        arms.append((str(arm.get("label")), str(template or "")))
    return arms


def _scorer_name(manifest: dict[str, object]) -> str:
    config = manifest.get("config")
    scorer = config.get("scorer") if isinstance(config, dict) else None
    return str(scorer or "default")


def rereport(run_dir: Path) -> Path:
    """`aka report RUN`: the run's reports again, from its files."""
    run_dir = run_dir.resolve()
    manifest = _manifest(run_dir)
    results = counted_results(run_dir)
    if not results:
        raise AkaError(f"{run_dir}: the run has no {RESULT_FILE_NAME} yet; run or resume it first")
    return write_run_reports(run_dir, results, _header(run_dir, manifest, _scorer_name(manifest)), _arms(manifest))


def rescore(run_dir: Path, scorer: str) -> tuple[Path, list[TaskResult]]:
    """`aka score RUN --scorer NAME`: every counted result re-scored (its task_result.yaml left as
    it is), and reports of the new scores in `reports/scores/<scorer>/`."""
    run_dir = run_dir.resolve()
    manifest = _manifest(run_dir)
    function = resolve_scorer(scorer, "--scorer")
    rescored = [
        r.model_copy(
            update={
                "scorer": scorer,
                "score": finite_score(function, r) if r.status not in (TaskStatus.SKIP, TaskStatus.INFRA) else 0.0,
            }
        )
        for r in counted_results(run_dir)
    ]
    if not rescored:
        raise AkaError(f"{run_dir}: the run has no {RESULT_FILE_NAME} yet; run or resume it first")
    folder = run_dir / REPORTS_DIR / SCORES_DIR / re.sub(r"[^A-Za-z0-9_.-]+", "_", scorer)
    target = write_run_reports(run_dir, rescored, _header(run_dir, manifest, scorer), _arms(manifest), folder)
    return target, rescored
