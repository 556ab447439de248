"""`aka validate`: every selected task through the deterministic checks and its mutants, a report
per task and a summary, rewritten after each task so an interrupted validation keeps its rows.

Skeleton tasks (instruction2triton: no kernel given) have their untouched sources fail cleanly,
and their solution (`--solutions`, by default `solutions/examples` beside the tasks folder) is
what must pass and what the mutants are made from. CUDA and HIP sources have no Python entry
to wrap: their mutants run through a copy of the task whose harness wraps the loaded candidate
(`aka.validation.mutants.write_mutant_task`), on the device only.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import RootModel, ValidationError

from aka.config.families import family_named
from aka.config.task_config import BaselineSource
from aka.config.tasks import Task, load_task, select_tasks
from aka.dashboard.validation import REPORT_NAME
from aka.device import DeviceInfo
from aka.errors import AkaError
from aka.evaluation.step_spec import Step, step_commands
from aka.evaluation.steps import StepOutcome
from aka.evaluation.wire import HELDOUT_FILE
from aka.process import kill_descendants
from aka.results.task_result import FailureKind
from aka.run.repository import materialize
from aka.validation.checks import (
    Evaluation,
    Probe,
    ValidationStopped,
    aa_check,
    baseline_check,
    describe,
    evaluate,
    files_check,
    hang_check,
    heldout_check,
    reference_check,
    run_probe,
    schema_check,
    self_containment_check,
    stopping,
)
from aka.validation.mutants import (
    DESCRIPTIONS,
    MUTANT_NAMES,
    TensorShape,
    applicable,
    write_mutant,
    write_mutant_task,
)
from aka.validation.report import (
    Check,
    Evidence,
    MutantResult,
    MutantVerdict,
    MutationScore,
    Status,
    SummaryRow,
    TaskValidation,
    ValidationSummary,
    overall,
    read_report,
    write_report,
    write_summary,
)

log = logging.getLogger(__name__)
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")
Listener = Callable[[str], None]


EXCEPTIONS_FILE = "validation_exceptions.yaml"
LAYOUT_ONLY = frozenset({"wrong_strides"})  # right values, another layout: judged only on the output itself


class MutantExceptions(RootModel[dict[str, dict[str, str]]]):
    """`tasks/validation_exceptions.yaml`: task name -> mutant -> why its survival is acceptable.
    Kept beside the tasks, not in them: an agent's copy of a task never learns which wrong
    answers its check lets through."""

    def reason(self, task: str, mutant: str) -> str | None:
        return self.root.get(task, {}).get(mutant)


def load_exceptions(tasks_root: Path) -> MutantExceptions:
    path = tasks_root / EXCEPTIONS_FILE
    if not path.is_file():
        return MutantExceptions({})
    try:
        return MutantExceptions.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    except (yaml.YAMLError, ValidationError) as exc:
        raise AkaError(
            f"{path}: expected 'task name: {{mutant: reason}}' ({type(exc).__name__}); fix the file"
        ) from None


@dataclass(frozen=True)
class ValidationOptions:
    mutants: Sequence[str] = MUTANT_NAMES  # empty: no mutation testing
    solutions: Path | None = None
    exceptions: MutantExceptions = field(default_factory=lambda: MutantExceptions({}))
    mutants_at_once: int = 1  # a task's mutants evaluated that many at a time


def mutants_at_once_default(parallel: int) -> int:
    """One task at a time: its mutants two per four cores, at most four (each evaluation is a judge
    and a worker, mostly CPU work); tasks side by side already fill the cores, one mutant each."""
    return max(1, min(4, (os.cpu_count() or 1) // 4 * 2)) if parallel <= 1 else 1


def side_by_side(work: Callable[[_Item], _Result], items: Sequence[_Item], at_once: int, name: str) -> list[_Result]:
    """`work` on every item, `at_once` at a time, the results in the items' order. An exception in
    any (a bug, or SIGTERM's SystemExit in the waiting thread) stops the rest: nothing more starts
    (`stopping`), the steps in flight are killed (whose verdicts then count for nothing), and it is
    raised once every one has ended."""
    if at_once <= 1:
        return [work(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix=name)
    futures = [pool.submit(work, item) for item in items]
    try:
        return [future.result() for future in futures]
    except BaseException:
        stopping.set()
        for future in futures:
            future.cancel()
        while not all(f.done() for f in futures):
            kill_descendants(os.getpid())
            time.sleep(0.2)
        raise
    finally:
        pool.shutdown(wait=True)


def _shapes(probe: Probe) -> list[tuple[list[TensorShape], list[TensorShape]]]:
    cases = (probe.data or {}).get("cases", {}).get("shapes", [])
    return [
        (
            [TensorShape(tuple(o["shape"]), o["dtype"]) for o in c["outputs"]],
            [TensorShape(tuple(i["shape"]), i["dtype"]) for i in c["inputs"]],
        )
        for c in cases
    ]


def _not_applicable(name: str, probe: Probe) -> str | None:
    reasons = [applicable(name, outputs, inputs) for outputs, inputs in _shapes(probe)]
    return None if any(r is None for r in reasons) else (reasons[0] if reasons else "the probe saw no case")


def _verdict(outcomes: list[StepOutcome]) -> tuple[MutantVerdict, StepOutcome | None]:
    failed = next((o for o in outcomes if not o.passed), None)
    if failed is None:
        return MutantVerdict.SURVIVED, None
    if failed.skipped:
        return MutantVerdict.NOT_RUN, failed
    if failed.step is Step.CORRECTNESS and failed.failure is FailureKind.INCORRECT:
        return MutantVerdict.KILLED, failed
    return MutantVerdict.INVALID, failed


def run_mutants(
    task: Task,
    base_dir: Path,
    probe: Probe,
    scratch: Path,
    device: DeviceInfo,
    names: Sequence[str],
    tell: Listener,
    exceptions: MutantExceptions | None = None,
    through_harness: bool = False,
    at_once: int = 1,
) -> tuple[Check, MutationScore]:
    """Each mutant through compile and correctness. Python sources are mutated in their entry
    functions; sources with none to wrap (CUDA C++), or any task with `through_harness`, through a
    copy of the task whose harness wraps what `load_candidate` returns (`write_mutant_task`).
    `at_once`: mutants evaluated side by side, each from a folder of its own."""
    family = family_named(task.family)
    language = family.language if family is not None else ""
    python_sources = [rel for rel in task.config.source_file_path if rel.endswith(".py")]
    through_harness = through_harness or language in ("cuda", "hip") or not python_sources
    blocked = None
    if through_harness and language in ("cuda", "hip") and not device.is_gpu:
        blocked = f"needs a GPU: {language.upper()} sources run only on the device"
    elif probe.data is None:
        blocked = "the probe could not run the reference, so no output shapes or tolerances are known"
    tolerances = {k: (float(v[0]), float(v[1])) for k, v in (probe.data or {}).get("tolerances", {}).items()}
    correctness = next(iter(step_commands(task, Step.CORRECTNESS)), "")

    def judge(name: str) -> MutantResult:
        start = time.monotonic()
        reason = blocked or _not_applicable(name, probe)
        if reason is None and name in LAYOUT_ONLY and language == "python":
            reason = (
                "the wrapped function's output is an intermediate of the judged workload (e2e): its layout "
                "is not part of the contract"
            )
        if reason is not None:
            verdict = MutantVerdict.NOT_RUN if blocked else MutantVerdict.NOT_APPLICABLE
            return MutantResult(name=name, description=DESCRIPTIONS[name], verdict=verdict, message=reason)
        mutant_dir = scratch / f"mutant_{name}"
        if through_harness:
            copy = write_mutant_task(task.directory, mutant_dir / "task", correctness, name, tolerances)
            entries = ["load_candidate"] if copy else []
            judged, sources = (dataclasses.replace(task, directory=copy) if copy else task), base_dir
        else:
            entries = write_mutant(base_dir, task.config.source_file_path, mutant_dir / "sources", name, tolerances)
            judged, sources = task, mutant_dir / "sources"
        if not entries:
            return MutantResult(
                name=name,
                description=DESCRIPTIONS[name],
                verdict=MutantVerdict.NOT_RUN,
                message="the harness declares no KernelTask to wrap"
                if through_harness
                else "no public entry function in the editable Python sources",
            )
        evaluation = evaluate(judged, sources, mutant_dir, device, f"mutant {name}", through=2)
        verdict, failed = _verdict(evaluation.outcomes)
        message = f"wrapped {', '.join(entries)}; " + (describe(failed) if failed else "passed correctness")
        excuse = exceptions.reason(task.name, name) if exceptions else None
        if verdict is MutantVerdict.SURVIVED and excuse:
            verdict, message = MutantVerdict.EXCEPTED, f"{message}; recorded exception: {excuse}"
        tell(f"  mutant {name}: {verdict.value}")
        return MutantResult(
            name=name,
            description=DESCRIPTIONS[name],
            verdict=verdict,
            failure_kind=failed.failure.value if failed else None,
            message=message[:600],
            duration_s=round(time.monotonic() - start, 2),
        )

    return _mutation_check(side_by_side(judge, list(names), at_once, "aka-mutants"))


def _mutation_check(results: list[MutantResult]) -> tuple[Check, MutationScore]:
    def named(verdict: MutantVerdict) -> list[str]:
        return [r.name for r in results if r.verdict is verdict]

    killed, survived, invalid = named(MutantVerdict.KILLED), named(MutantVerdict.SURVIVED), named(MutantVerdict.INVALID)
    excepted = named(MutantVerdict.EXCEPTED)
    judged = len(killed) + len(survived) + len(invalid)
    score = MutationScore(
        killed=len(killed),
        survived=len(survived),
        invalid=len(invalid),
        not_applicable=len(named(MutantVerdict.NOT_APPLICABLE)),
        not_run=len(named(MutantVerdict.NOT_RUN)),
        excepted=len(excepted),
        score=round(len(killed) / judged, 4) if judged else None,
        mutants=results,
    )
    if survived:
        status, message = Status.FAIL, f"surviving mutant(s): {', '.join(survived)}"
    elif invalid:
        status, message = Status.WARN, f"mutant(s) rejected for another reason than correctness: {', '.join(invalid)}"
    elif excepted:
        status = Status.WARN
        message = f"survived with a recorded exception ({EXCEPTIONS_FILE}): {', '.join(excepted)}"
    elif not judged:
        status = Status.WARN
        message = next((r.message for r in results if r.verdict is MutantVerdict.NOT_RUN), "no mutant selected")
    else:
        status, message = Status.PASS, f"all {len(killed)} applicable mutant(s) killed"
    shown = score.score if score.score is not None else "n/a"
    evidence = [
        Evidence(
            command=f"mutant {r.name}: evaluate_candidate(through=correctness)",
            exit_code=0 if r.verdict is MutantVerdict.KILLED else 1,
            duration_s=r.duration_s,
            output_excerpt=f"{r.verdict.value}: {r.message}",
        )
        for r in results
        if r.verdict not in (MutantVerdict.NOT_APPLICABLE, MutantVerdict.NOT_RUN)
    ]
    return Check(name="mutation", status=status, message=f"score {shown}; {message}", evidence=evidence), score


def _solution_dir(task: Task, solutions: Path | None) -> Path | None:
    if solutions is None:
        return None
    folder = solutions / task.name
    return folder if all((folder / rel).is_file() for rel in task.config.source_file_path) else None


def _failed(task: Task, device: DeviceInfo, check: str, message: str, start: float) -> TaskValidation:
    """A task that cannot be validated further: its one failing check."""
    evidence = Evidence(command=f"aka.config.tasks.load_task({task.directory})", exit_code=1, output_excerpt=message)
    return TaskValidation(
        task_name=task.name,
        family=task.family,
        task_dir=str(task.directory),
        device=device.name,
        overall_status=Status.FAIL,
        checks=[Check(name=check, status=Status.FAIL, message=message, evidence=[evidence])],
        duration_s=round(time.monotonic() - start, 2),
    )


def self_timed(task: Task, sources: Path, root: Path) -> Task:
    """A copy of `task` under `root` whose baseline is `sources`' editable files (`baseline:
    source`): an evaluation of `sources` in it is an A/A reading, whatever the task's own
    baseline (the PyTorch reference; a skeleton's empty file) would have compared them with."""
    copy = root / task.name
    shutil.copytree(task.directory, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for relative in task.config.source_file_path:
        shutil.copyfile(sources / relative, copy / relative)
    config_path = copy / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["baseline"] = BaselineSource.SOURCE.value
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return load_task(root, copy)


def validate_task(task: Task, device: DeviceInfo, options: ValidationOptions, tell: Listener) -> TaskValidation:
    start = time.monotonic()
    family = family_named(task.family)
    skeleton = bool(family and family.skeleton)
    checks: list[Check] = []
    mutation: MutationScore | None = None
    if task.problem:
        return _failed(task, device, "schema", task.problem, start)
    with tempfile.TemporaryDirectory(prefix="aka-validate-") as tmp:
        scratch = Path(tmp)
        try:
            task = materialize(task, scratch / "repos")
        except AkaError as exc:
            return _failed(task, device, "repository", str(exc), start)
        checks.append(schema_check(task))
        solution = _solution_dir(task, options.solutions) if skeleton else None
        checks.append(files_check(task, scratch, skeleton, solution))
        checks.append(self_containment_check(task))
        heldout = HELDOUT_FILE in task.config.hidden_files and (task.directory / HELDOUT_FILE).is_file()
        tell("  probe: the reference twice on every case and seed")
        probe = run_probe(task, scratch, device, heldout)
        checks.append(reference_check(probe))
        # On a GPU the passing sources are timed against themselves (A/A): in the task itself where
        # its baseline is its own source (the original's folders time theirs), else in a copy that
        # makes them its baseline.
        timed_against_itself = task.original is not None or (
            task.config.baseline_source is BaselineSource.SOURCE and not skeleton
        )
        through = 3 if device.kind != "cpu" and timed_against_itself else 2
        tell("  the untouched sources through the evaluator")
        untouched = evaluate(task, task.directory, scratch / "baseline", device, "baseline", through)
        solved = evaluate(task, solution, scratch / "solution", device, "solution", through) if solution else None
        checks.append(baseline_check(untouched, solved, skeleton))
        passing = solved or (None if skeleton else untouched)
        held: Evaluation | None = None
        if heldout and passing is not None and passing.failed is None:
            held = evaluate(task, solution or task.directory, scratch / "heldout", device, "held-out", 2, heldout=True)
        if heldout:
            checks.append(heldout_check(probe, held, skeleton))
        a_a = passing  # where it failed, the A/A check says so from its outcomes
        if device.kind != "cpu" and not timed_against_itself and passing is not None and passing.failed is None:
            tell("  A/A: the passing sources timed against themselves")
            sources = solution or task.directory
            a_a = evaluate(self_timed(task, sources, scratch / "a-a"), sources, scratch / "a-a-eval", device, "A/A", 3)
        checks.append(hang_check(task, [e for e in (untouched, solved, held, a_a) if e is not None]))
        checks.append(aa_check(device, a_a if device.kind != "cpu" else None))
        if options.mutants:
            base = solution or (None if skeleton else task.directory)
            if base is None:
                checks.append(
                    Check(name="mutation", status=Status.WARN, message="skeleton without a solution: nothing to mutate")
                )
            else:
                check, mutation = run_mutants(
                    task,
                    base,
                    probe,
                    scratch,
                    device,
                    options.mutants,
                    tell,
                    options.exceptions,
                    at_once=options.mutants_at_once,
                )
                checks.append(check)
    return TaskValidation(
        task_name=task.name,
        family=task.family,
        task_dir=str(task.directory),
        device=device.name,
        overall_status=overall([c.status for c in checks]),
        checks=checks,
        mutation=mutation,
        duration_s=round(time.monotonic() - start, 2),
    )


def _row(report: TaskValidation, path: Path) -> SummaryRow:
    mutation = report.mutation
    return SummaryRow(
        task_name=report.task_name,
        family=report.family,
        overall_status=report.overall_status,
        failed_checks=[c.name for c in report.checks if c.status is Status.FAIL],
        warned_checks=[c.name for c in report.checks if c.status is Status.WARN],
        mutation_score=mutation.score if mutation else None,
        surviving_mutants=[m.name for m in mutation.mutants if m.verdict is MutantVerdict.SURVIVED] if mutation else [],
        report=str(path),
    )


def _earlier_report(output: Path, task: Task, device: DeviceInfo) -> TaskValidation | None:
    """This task's report from an earlier validation into `output` on the same device, if readable."""
    path = output / task.name / REPORT_NAME
    try:
        report = read_report(path)
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return report if report.device == device.name and report.task_name == task.name else None


def validate_tasks(
    tasks_root: Path,
    selectors: list[str],
    output: Path,
    device: DeviceInfo,
    options: ValidationOptions,
    tell: Listener,
    resume: bool = False,
    parallel: int = 1,
) -> ValidationSummary:
    """Every selected task validated into `output`; with `resume`, a task whose report an earlier
    validation on this device left there is kept, not validated again (a cut run goes on).
    `parallel`: tasks validated that many at a time (their steps take the device's lock, so a
    timed step still has the GPU alone; compile and correctness steps, mostly CPU work, overlap)."""
    tasks = select_tasks(tasks_root, selectors)
    if not options.exceptions.root:
        options = dataclasses.replace(options, exceptions=load_exceptions(tasks_root))
    if not tasks:
        raise AkaError(f"no task matches {' '.join(selectors)} under {tasks_root}")
    command = (
        shlex.join(["aka", "validate", *sys.argv[2:]])
        if sys.argv[1:2] == ["validate"]
        else f"aka validate {' '.join(selectors)}"
    )
    done: dict[int, SummaryRow] = {}
    summary = ValidationSummary(overall_status=Status.PASS, command=command, device=device.name, counts={}, tasks=[])
    written = threading.Lock()

    def one(index: int, task: Task) -> None:
        nonlocal summary
        say = tell if parallel <= 1 else (lambda line: tell(f"[{task.name}] {line.strip()}"))
        say(f"{task.name}")
        earlier = _earlier_report(output, task, device) if resume else None
        if earlier is not None:
            say("  kept: validated earlier on this device (--resume)")
        report = earlier or validate_task(task, device, options, say)
        if earlier is None and stopping.is_set():  # killed steps read as verdicts: --resume must redo it
            raise ValidationStopped(f"{task.name}: not finished, no report written")
        with written:  # the summary lists the finished tasks in the selectors' order
            path = write_report(output / task.name, report)
            done[index] = _row(report, path.relative_to(output))
            rows = [done[i] for i in sorted(done)]
            statuses = [r.overall_status for r in rows]
            summary = ValidationSummary(
                overall_status=overall(statuses),
                command=command,
                device=device.name,
                counts={s.value: statuses.count(s) for s in Status},
                tasks=rows,
            )
            write_summary(output, summary)
        say(f"  {report.overall_status.value} ({report.duration_s:.0f} s)")

    stopping.clear()
    side_by_side(lambda indexed: one(*indexed), list(enumerate(tasks)), parallel, "aka-validate")
    return summary


def output_default() -> Path:
    return Path.cwd() / f"validation_{time.strftime('%Y%m%d_%H%M%S')}"


__all__ = ["ValidationOptions", "validate_task", "validate_tasks", "output_default", "Evaluation"]
