"""`KernelEvaluator`: score candidates for a tasks root on one device or several, sync or async,
with a frozen baseline per task and an on-disk result cache.

Each evaluation is the one `aka run` makes (`evaluate_candidate` from the pristine task with only
the declared sources, the run's frozen-baseline builds, `judge_outcomes` for the verdict and the
score), so a trainer gets the reward a run gives for the same candidate. Up to `max_concurrent`
evaluations run at once on each device: their steps share the device, and each performance step
has it alone (`aka.evaluation.device_lock`, across every process on the machine), so the GPU
times one candidate while others start, compile and are checked. With several devices (one of
each GPU, `detect_devices`), each evaluation goes to the least busy one, its steps masked to it.
Cache hits never wait.

The cache directory holds `baselines/` (as a run's), `repos/`, `results/` (aka.rl.cache),
`locks/` and `scratch/` (an evaluation's working folder, removed afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from aka.config.task_config import TASK_CONFIG_NAME
from aka.config.tasks import Task, gate_tasks, load_task, task_files, task_identity
from aka.device import DeviceInfo, detect_device
from aka.evaluation.baseline import BaselineRecord, baseline_builds, load_frozen_baseline, measure_baseline
from aka.evaluation.step_process import RunningTime
from aka.evaluation.step_spec import PASSED_THROUGH, check_step_settings
from aka.evaluation.steps import INFRA_ATTEMPTS, INFRA_RETRY_WAIT_S, evaluate_candidate
from aka.results.scoring import finite_score, resolve_scorer
from aka.results.task_result import AgentOutcome, FailureKind, TaskResult, TaskStatus
from aka.rl.cache import ResultCache, cache_key, candidate_sha256
from aka.rl.extract import CandidateError, CompletionError, extract_files, not_text
from aka.rl.result import Candidate, CandidateResult
from aka.run.layout import REPOSITORIES_DIR
from aka.run.prompt import FENCE, build_prompt
from aka.run.repository import materialize
from aka.run.runner import package_versions
from aka.run.task_pipeline import judge_outcomes
from aka.trees import remove_tree

logger = logging.getLogger(__name__)
API_AGENT = "rl"
LANGUAGES = {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".h": "cpp"}


def answer_format(editable: list[str]) -> str:
    """How to write the answer so that `extract_files` finds the files (appended to the prompt)."""
    first = editable[0]
    language = LANGUAGES.get(Path(first).suffix, "")
    return (
        "## Answer format\n\n"
        "Reply with the complete new content of each file you change, each in a fenced code block whose info "
        f"string names the file, for example:\n\n{FENCE}{language} {first}\n...\n{FENCE}\n\n"
        "Files you do not give keep their original content; the last block for a file counts."
    )


@dataclass(frozen=True)
class _LoadedTask:
    task: Task
    identity: str
    skip_reason: str | None
    stamp: tuple[tuple[str, int, int], ...] = ()  # its files when loaded (`_files_stamp`)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False)


def _files_stamp(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Each task file's path, size and modification time: cheap to read at every request, and
    changed by any edit (the task's identity, a hash of the contents, is read only when it is)."""
    stamps = []
    for path in task_files(directory):
        info = path.stat()
        stamps.append((path.relative_to(directory).as_posix(), info.st_size, info.st_mtime_ns))
    return tuple(stamps)


class KernelEvaluator:
    """Scores candidates of the tasks under `tasks_root` on `device` (detected when None).

    `scorer` is a registered scorer name or `module:function`, as in a run config; `model` only
    goes into the result's summary. Use it as a context manager, or call `close()`.
    """

    def __init__(
        self,
        tasks_root: Path | str,
        cache_dir: Path | str,
        device: DeviceInfo | None = None,
        scorer: str = "default",
        max_concurrent: int = 1,
        model: str | None = None,
        devices: Sequence[DeviceInfo] | None = None,
        log_dir: Path | str | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise CandidateError(f"max_concurrent must be at least 1, not {max_concurrent}")
        self.tasks_root = Path(tasks_root).expanduser().resolve()
        if not self.tasks_root.is_dir():
            raise CandidateError(f"tasks root {self.tasks_root} does not exist (pass a folder of tasks)")
        self.cache_dir = Path(cache_dir).expanduser().resolve()
        # each evaluation's log (the judge's lines: what it ran, its turns on the device) kept here
        self.log_dir = Path(log_dir).expanduser().resolve() if log_dir is not None else None
        check_step_settings()
        self.devices = list(devices) if devices else [device or detect_device()]
        models = {(d.name, d.arch) for d in self.devices}
        if len(models) > 1:
            raise CandidateError(
                f"devices of different models ({', '.join(sorted(n for n, _ in models))}): one "
                "evaluator scores on one model (results and baselines are kept per model)"
            )
        self.device = self.devices[0]
        self.scorer_name = scorer
        self.scorer = resolve_scorer(scorer, "KernelEvaluator")
        self.model = model
        self.max_concurrent = max_concurrent
        self.cache = ResultCache(self.cache_dir)
        self.platform = package_versions()
        self._busy = [0] * len(self.devices)
        self._slots = threading.Condition()
        self._executor = ThreadPoolExecutor(max_workers=max_concurrent * len(self.devices), thread_name_prefix="aka-rl")
        self._tasks: dict[Path, _LoadedTask] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> KernelEvaluator:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    # ---- tasks, prompts, completions -------------------------------------------------------

    def _loaded(self, task_id: str) -> _LoadedTask:
        """The task by its folder (every spelling of an id one entry: a red team's 1,024 spellings
        of one id each loaded it anew and stayed, 14 MB a request), loaded again when a file of it
        changed (an edited harness kept its old identity, so its old verdicts, until a restart)."""
        try:
            directory = (self.tasks_root / task_id.strip().strip("/")).resolve()
            known = self.tasks_root in directory.parents and (directory / TASK_CONFIG_NAME).is_file()
        except (OSError, ValueError):  # a NUL byte, a name too long for the file system
            known = False
        if not known:
            raise CandidateError(
                f"unknown task id '{task_id[:200]}' under {self.tasks_root} "
                "(use `aka tasks list --tasks-root ROOT` to see the task names)"
            )
        stamp = _files_stamp(directory)
        with self._lock:
            loaded = self._tasks.get(directory)
            if loaded is not None and loaded.stamp == stamp:
                return loaded
            task = load_task(self.tasks_root, directory)
            identity = task_identity(task)
            _, dropped = gate_tasks([task], self.device.arch)
            skip_reason = dropped[0][1] if dropped else None
            if skip_reason is None:
                task = materialize(task, self.cache_dir / REPOSITORIES_DIR)
            loaded = self._tasks[directory] = _LoadedTask(task, identity, skip_reason, stamp)
            return loaded

    def task(self, task_id: str) -> Task:
        """The task (a repository task cloned at its pinned revision); unknown ids are an error."""
        return self._loaded(task_id).task

    def editable_files(self, task_id: str) -> list[str]:
        return list(self.task(task_id).config.source_file_path)

    def prompt(self, task_id: str, with_baseline: bool = True) -> str:
        """The prompt `aka run` gives an agent, plus how to write the answer for `extract_files`.

        `with_baseline=False` leaves the baseline's timings out instead of measuring them."""
        task = self.task(task_id)
        if with_baseline:
            baseline = self.baseline(task_id)
        else:
            baseline = BaselineRecord(
                task_name=task.name,
                task_identity="",
                device=self.device.name,
                source=task.config.baseline_source,
                status=FailureKind.SKIPPED,
                message="not measured for this prompt",
            )
        answer = answer_format(list(task.config.source_file_path))
        return build_prompt(task, task.directory, baseline, self.device) + "\n" + answer + "\n"

    def extract(self, task_id: str, completion: str) -> dict[str, str]:
        """The candidate files of a model completion (aka.rl.extract); `CompletionError` if none."""
        return extract_files(completion, self.editable_files(task_id), task_id)

    # ---- the baseline ----------------------------------------------------------------------

    def _file_lock(self, name: str) -> FileLock:
        path = self.cache_dir / "locks" / f"{name}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(path)

    def baseline(self, task_id: str) -> BaselineRecord:
        """The task's frozen baseline on this device: measured once (across processes sharing the
        cache directory), re-measured only when the task's identity or the device changed."""
        loaded = self._loaded(task_id)
        task = loaded.task
        with loaded.lock, self._file_lock(f"baseline-{task.slug}"):
            frozen = load_frozen_baseline(self.cache_dir, task, loaded.identity, self.device)
            if frozen is not None:
                return frozen
            with self._device_slot() as device:
                work = Path(tempfile.mkdtemp(prefix=f"baseline-{task.slug}-", dir=self._scratch()))
                try:
                    return measure_baseline(self.cache_dir, task, loaded.identity, device, work)
                finally:
                    remove_tree(work)

    # ---- evaluation --------------------------------------------------------------------------

    def _scratch(self) -> Path:
        path = self.cache_dir / "scratch"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @contextlib.contextmanager
    def _device_slot(self) -> Iterator[DeviceInfo]:
        """The least busy device with a free slot (waits for one); the device itself is shared
        with other evaluations and processes through its `DeviceLock`, taken per step."""
        with self._slots:
            self._slots.wait_for(lambda: min(self._busy) < self.max_concurrent)
            index = self._busy.index(min(self._busy))
            self._busy[index] += 1
        try:
            yield self.devices[index]
        finally:
            with self._slots:
                self._busy[index] -= 1
                self._slots.notify_all()

    def _resolve(self, candidate: Candidate) -> tuple[_LoadedTask, dict[str, str], str]:
        """The candidate's complete editable files, its hash and its cache key; bad input raises."""
        loaded = self._loaded(candidate.task_id)
        editable = loaded.task.config.source_file_path
        unknown = [name for name in candidate.files if name not in editable]
        if unknown:
            raise CandidateError(
                f"{candidate.task_id}: '{unknown[0]}' is not an editable file of the task "
                f"(editable: {', '.join(editable)})"
            )
        bad = [name for name, text in candidate.files.items() if not isinstance(text, str)]
        if bad:
            raise CandidateError(f"{candidate.task_id}: the content of '{bad[0]}' must be source text (str)")
        for name, text in candidate.files.items():
            why = not_text(text)
            if why is not None:
                raise CandidateError(f"{candidate.task_id}: the content of '{name}' is not valid text ({why})")
        files = {
            rel: candidate.files[rel]
            if rel in candidate.files
            else (loaded.task.directory / rel).read_text(encoding="utf-8")
            for rel in editable
        }
        sources = candidate_sha256(files)
        key = cache_key(
            loaded.task.name,
            loaded.identity,
            sources,
            f"{self.device.name}|{self.device.arch}",
            self.platform,
            {"scorer": self.scorer_name, **{k: os.environ[k] for k in sorted(PASSED_THROUGH) if k in os.environ}},
        )
        return loaded, files, key

    def cached(self, task_id: str, files: Mapping[str, str]) -> CandidateResult | None:
        """The cached result of this candidate, or None (nothing is evaluated); bad input raises."""
        _, _, key = self._resolve(Candidate(task_id, dict(files)))
        return self.cache.get(key)

    def evaluate(
        self, task_id: str, files: Mapping[str, str], timeout_s: float | None = None, not_after: float | None = None
    ) -> CandidateResult:
        """Score one candidate: the task's editable files it changes, name -> source text.

        `timeout_s`: the most seconds its evaluation may run, not counting the time it waits for
        a slot or for the device's lock (other evaluations' timed steps); a step cut there is the
        candidate's `timeout`, and the result is not cached. `not_after` (`time.monotonic()`): a
        hard end, waits included (a request's deadline)."""
        return self._evaluate(Candidate(task_id, dict(files)), _checked_timeout(timeout_s), not_after)

    def evaluate_completion(self, task_id: str, completion: str, timeout_s: float | None = None) -> CandidateResult:
        """Score a model completion; one that yields no candidate files is scored as not
        compiling (the policy's fault), never evaluated."""
        try:
            files = self.extract(task_id, completion)
        except CompletionError as exc:
            return self._no_candidate(task_id, str(exc))
        return self.evaluate(task_id, files, timeout_s)

    def evaluate_batch(self, candidates: Sequence[Candidate]) -> list[CandidateResult]:
        """Score candidates (up to `max_concurrent` at once), results in their order; every one is
        checked before any is evaluated."""
        for candidate in candidates:
            self._resolve(candidate)
        return list(self._executor.map(self._evaluate, candidates))

    async def evaluate_async(
        self, task_id: str, files: Mapping[str, str], timeout_s: float | None = None, not_after: float | None = None
    ) -> CandidateResult:
        """`evaluate` in the evaluator's thread pool (`max_concurrent` threads per device); a cache
        hit returns without waiting for a slot."""
        limit = _checked_timeout(timeout_s)
        hit = await asyncio.to_thread(self.cached, task_id, files)  # it may load the task: not on the loop
        if hit is not None:
            return hit
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._evaluate, Candidate(task_id, dict(files)), limit, not_after
        )

    async def evaluate_completion_async(
        self, task_id: str, completion: str, timeout_s: float | None = None, not_after: float | None = None
    ) -> CandidateResult:
        try:  # in a thread: a crafted completion's extraction held the server's event loop 24 s
            files = await asyncio.to_thread(self.extract, task_id, completion)
        except CompletionError as exc:
            return self._no_candidate(task_id, str(exc))
        return await self.evaluate_async(task_id, files, timeout_s, not_after)

    async def evaluate_batch_async(self, candidates: Sequence[Candidate]) -> list[CandidateResult]:
        for candidate in candidates:
            self._resolve(candidate)
        return list(await asyncio.gather(*(self.evaluate_async(c.task_id, c.files) for c in candidates)))

    def _evaluate(
        self, candidate: Candidate, time_limit_s: float | None = None, not_after: float | None = None
    ) -> CandidateResult:
        loaded, files, key = self._resolve(candidate)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        sources = candidate_sha256(files)
        if loaded.skip_reason is not None:
            return self._result(
                loaded, sources, key, self._plain(loaded.task, FailureKind.SKIPPED, TaskStatus.SKIP, loaded.skip_reason)
            )
        try:
            baseline = self.baseline(candidate.task_id)
            if baseline.status is FailureKind.INFRA_ERROR:
                return self._result(
                    loaded,
                    sources,
                    key,
                    self._plain(
                        loaded.task, FailureKind.INFRA_ERROR, TaskStatus.INFRA, baseline.message or "baseline failed"
                    ),
                )
            with self._device_slot() as device:
                hit = self.cache.get(key)
                if hit is not None:
                    return hit
                limit = RunningTime(time_limit_s or float("inf"), not_after)  # from now: the slot's wait not counted
                result, cut = self._judged_again_after_infra_errors(loaded.task, baseline, files, device, limit)
                waited: float | None = round(limit.waited_s, 3)
        except Exception as exc:
            logger.error("infrastructure error on %s:\n%s", candidate.task_id, traceback.format_exc())
            result, cut, waited = (
                self._plain(loaded.task, FailureKind.INFRA_ERROR, TaskStatus.INFRA, f"{type(exc).__name__}: {exc}"),
                False,
                None,
            )
        return self._result(loaded, sources, key, result, cache=not cut, device_wait_seconds=waited)

    def _judged_again_after_infra_errors(
        self, task: Task, baseline: BaselineRecord, files: dict[str, str], device: DeviceInfo, limit: RunningTime
    ) -> tuple[TaskResult, bool]:
        """`_judged`, made again (up to `INFRA_ATTEMPTS` in all, within the time limit) while it ends
        in `infra_error`: a trainer drops such a reward, and beside an evaluation that fills the
        GPU's memory an honest candidate's step ends so (the harness's fault, not a verdict)."""
        for attempt in range(1, INFRA_ATTEMPTS + 1):
            result, cut = self._judged(task, baseline, files, device, limit)
            if result.failure_kind is not FailureKind.INFRA_ERROR or cut or attempt == INFRA_ATTEMPTS:
                break
            if limit.left() <= INFRA_RETRY_WAIT_S:
                break
            logger.warning(
                "infra_error on %s (attempt %d of %d), judged again: %s",
                task.name,
                attempt,
                INFRA_ATTEMPTS,
                result.failure_message,
            )
            time.sleep(INFRA_RETRY_WAIT_S)
        return result, cut

    def _judged(
        self,
        task: Task,
        baseline: BaselineRecord,
        files: dict[str, str],
        device: DeviceInfo,
        time_limit: RunningTime | None,
    ) -> tuple[TaskResult, bool]:
        """The verdict, and whether the time limit cut a step short (then not the final word)."""
        scratch = Path(tempfile.mkdtemp(prefix=f"{task.slug}-", dir=self._scratch()))
        try:
            candidate_dir = scratch / "candidate"
            for rel, text in files.items():
                (candidate_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                (candidate_dir / rel).write_text(text, encoding="utf-8")
            started = time.monotonic()
            outcomes = evaluate_candidate(
                task,
                candidate_dir,
                scratch,
                device,
                trusted_cache=baseline_builds(self.cache_dir, task),
                time_limit=time_limit,
            )
            seconds = round(time.monotonic() - started, 3)
            result = judge_outcomes(
                task,
                baseline,
                device,
                self.scorer,
                self.scorer_name,
                AgentOutcome(agent=API_AGENT),
                outcomes,
                [],
                self.model,
            )
            result.evaluation_seconds = seconds
            return result, any(o.deadline_cut for o in outcomes)
        finally:
            self._keep_log(task, scratch)
            remove_tree(scratch)

    def _keep_log(self, task: Task, scratch: Path) -> None:
        """The evaluation's log, as `LOG_DIR/<task slug>-<time>-<random>/evaluation.log` (the layout
        of a run's trials, which `benchmarks/device_holds.py` reads)."""
        log = scratch / "evaluation.log"
        if self.log_dir is None or not log.is_file():
            return
        kept = self.log_dir / f"{task.slug}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        kept.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, kept / "evaluation.log")

    def _plain(self, task: Task, kind: FailureKind, status: TaskStatus, message: str) -> TaskResult:
        return TaskResult(
            task_name=task.name,
            task_type=task.family,
            device=self.device.name,
            failure_kind=kind,
            failure_message=message,
            status=status,
            scorer=self.scorer_name,
            optimization_summary=f"Not evaluated: {message}",
        )

    def _result(
        self,
        loaded: _LoadedTask,
        sources: str,
        key: str,
        result: TaskResult,
        cache: bool = True,
        device_wait_seconds: float | None = None,
    ) -> CandidateResult:
        record = CandidateResult.from_task_result(loaded.task.name, sources, key, result)
        record.device_wait_seconds = device_wait_seconds
        if cache:
            try:
                self.cache.put(record)
            except Exception:  # noqa: BLE001 - the verdict stands uncached: a trainer still gets its reward
                logger.error("could not cache the result of %s:\n%s", loaded.task.name, traceback.format_exc())
        return record

    def _no_candidate(self, task_id: str, message: str) -> CandidateResult:
        task = self.task(task_id)
        result = self._plain(task, FailureKind.COMPILE_ERROR, TaskStatus.FAIL, message)
        result.compilation_error_message = message
        result.score = finite_score(self.scorer, result)
        return CandidateResult.from_task_result(task.name, "", "", result)


def _checked_timeout(timeout_s: float | None) -> float | None:
    """A caller's `timeout_s`, refused unless a positive number (None: no limit)."""
    if timeout_s is None:
        return None
    if not timeout_s > 0:
        raise CandidateError(f"timeout_s must be a positive number of seconds, not {timeout_s}")
    return timeout_s
