"""Reading run directories into arms of attempts for `aka compare`.

An attempt is one `task_result.yaml`: one task, one arm, one repeat. A multi-arm run's results
carry their arm and repeat; a single-arm run (the seed's A/B: the same config run twice with
different `--run-suffix`) is one arm named after its run directory. When a task was attempted more
than once for the same arm and repeat (a resumed run keeps the old workspace), the newest counts.
Skipped attempts (the task could not run on this machine) are left out; infrastructure errors
are left out too (they are not the agent's), and counted so the comparison can warn about them.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from aka.errors import AkaError
from aka.reports.rebuild import counted_results
from aka.reports.writers import counted_score, trusted_speedup
from aka.results.task_result import RESULT_FILE_NAME, TaskResult, TaskStatus
from aka.run.layout import MANIFEST_NAME


class CompareError(AkaError):
    """The runs given to `aka compare` cannot be compared as asked."""


@dataclass(frozen=True)
class Attempt:
    """One task's outcome for one arm and repeat, reduced to what the comparison needs."""

    task: str
    family: str
    repeat: int
    correct: bool
    speedup: float | None
    score: float
    log_halfwidth: float | None
    result: TaskResult

    def log_speedup(self, failed_speedup: float) -> float:
        """log of the speedup; an incorrect attempt counts as `failed_speedup` (the declared convention)."""
        return math.log(self.speedup) if self.correct and self.speedup else math.log(failed_speedup)


@dataclass
class ArmData:
    """All attempts of one arm, and where they came from."""

    label: str
    run_dir: Path
    attempts: list[Attempt] = field(default_factory=list)
    infra_errors: int = 0
    skipped: int = 0

    @property
    def tasks(self) -> set[str]:
        return {a.task for a in self.attempts}

    def by_task(self) -> dict[str, list[Attempt]]:
        grouped: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in self.attempts:
            grouped[attempt.task].append(attempt)
        return dict(grouped)


def _log_halfwidth(result: TaskResult) -> float | None:
    """Half the width, in log space, of the speedup's timing interval recorded in the result."""
    low, high = result.speedup_ci_low, result.speedup_ci_high
    if not result.pass_correctness or not low or not high or low <= 0 or high < low:
        return None
    return (math.log(high) - math.log(low)) / 2.0


def _attempt(result: TaskResult) -> Attempt:
    speedup = trusted_speedup(result)
    return Attempt(
        task=result.task_name,
        family=result.task_type,
        repeat=result.repeat or 1,
        correct=result.pass_correctness,
        speedup=speedup,
        score=counted_score(result),
        log_halfwidth=_log_halfwidth(result),
        result=result,
    )


def read_run(run_dir: Path) -> dict[str | None, ArmData]:
    """The arms of one run directory, keyed by the results' arm (None: a single-arm run)."""
    if not run_dir.is_dir():
        raise CompareError(f"{run_dir}: no such run directory (pass a folder made by aka run)")
    if not (run_dir / MANIFEST_NAME).is_file():
        raise CompareError(f"{run_dir}: not a run directory (no {MANIFEST_NAME}); pass a folder made by aka run")
    arms: dict[str | None, ArmData] = {}
    for result in counted_results(run_dir):  # the newest result of each trial, as the run's reports count
        data = arms.setdefault(result.arm, ArmData(label=result.arm or run_dir.name, run_dir=run_dir))
        if result.status is TaskStatus.INFRA:
            data.infra_errors += 1
        elif result.status is TaskStatus.SKIP:
            data.skipped += 1
        else:
            data.attempts.append(_attempt(result))
    if not arms:
        raise CompareError(f"{run_dir}: the run has no {RESULT_FILE_NAME} yet; run or resume it first")
    declared = _declared_arms(run_dir)
    order = sorted(arms, key=lambda arm: (declared.index(arm) if arm in declared else len(declared), str(arm)))
    return {arm: arms[arm] for arm in order}


def _declared_arms(run_dir: Path) -> list[str]:
    """The arms in the config's order (the first is the control), from the run manifest."""
    try:
        manifest = json.loads((run_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(
            f"{run_dir / MANIFEST_NAME}: unreadable ({type(exc).__name__}); is this a run directory made by aka run?"
        ) from exc
    arms = manifest.get("arms", []) if isinstance(manifest, dict) else []
    return [str(arm) for arm in arms]


def _pick(arms: list[ArmData], label: str) -> ArmData:
    """An arm by its full label, or by its own label when that names one arm of the runs given."""
    exact = [arm for arm in arms if arm.label == label]
    short = [arm for arm in arms if arm.label.split(":")[-1] == label]
    if exact or len(short) == 1:
        return (exact or short)[0]
    known = ", ".join(arm.label for arm in arms)
    if short:
        raise CompareError(
            f"--arms: '{label}' names several arms ({', '.join(a.label for a in short)}); use the full label"
        )
    raise CompareError(f"--arms: unknown arm '{label}' (the runs have: {known})")


def load_arms(run_dirs: list[Path], pick: list[str] | None = None) -> list[ArmData]:
    """Arms from one or more runs, in order (the first is the control), optionally picked by label.

    A single-arm run is labelled by its directory name (its parent's name too when two runs share
    one); arms of a multi-arm run keep their labels, prefixed by the run's name when several runs
    are given."""
    found: list[ArmData] = []
    names = [d.resolve().name for d in run_dirs]
    for run_dir in run_dirs:
        resolved = run_dir.resolve()
        run_label = resolved.name if names.count(resolved.name) == 1 else f"{resolved.parent.name}/{resolved.name}"
        for arm, data in read_run(resolved).items():
            if arm is None:
                data.label = run_label
            elif len(run_dirs) > 1:
                data.label = f"{run_label}:{arm}"
            found.append(data)
    if pick:
        twice = next((label for label in pick if pick.count(label) > 1), None)
        if twice is not None:
            raise CompareError(f"--arms: '{twice}' is given twice; name each arm once, the control first")
        found = [_pick(found, label) for label in pick]
    if len(found) < 2:
        raise CompareError(
            "aka compare needs two arms: pass a multi-arm run, or two or more run directories "
            f"(found only {', '.join(a.label for a in found) or 'none'})"
        )
    return found
