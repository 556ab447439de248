"""`aka serve`: rewards over HTTP for trainers in other processes (FastAPI + uvicorn).

Candidates are queued onto one `KernelEvaluator`: one slot group per GPU, several evaluations
in flight on each (their performance steps take the GPU alone, `aka.evaluation.device_lock`), a
cache hit answered at once. The queue is bounded: a full queue answers 429 with `Retry-After`,
so a trainer backs off instead of piling up work. Each job has a deadline (`request_timeout`,
counted from its submission, and `eval_timeout`, the seconds its evaluation may run, its waits
for the device not counted): the evaluation's steps are killed there and nothing is cached, so
one hung candidate holds a GPU no longer than that, and an honest one is not judged `timeout`
for the time it waited behind others. A job cut by its request deadline ends `timeout` with no
verdict on the candidate.

It runs code sent over the network, so it binds to 127.0.0.1 unless told otherwise, refuses to
bind elsewhere without a bearer token, checks the token on every endpoint but `/healthz`, and
limits request sizes. Every candidate is evaluated in a scratch folder of its own, from the
pristine task, so no request's candidate sees another's files.

Endpoints: `POST /v1/submit`, `POST /v1/batch`, `GET /v1/jobs/{id}` (status, and the result
once done), `GET /v1/jobs/{id}/result?wait=S`, OpenRLHF's `POST /get_reward`, `GET /healthz`,
`GET /metrics` (Prometheus text).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from aka.errors import AkaError
from aka.results.task_result import FailureKind
from aka.rl.presets import check_preset, floor, reward
from aka.rl.result import CandidateResult

MAX_REQUEST_BYTES = 4 * 2**20
DEADLINE_GRACE_S = 30.0  # past a job's deadline its steps are killed; this covers their teardown
LOOPBACK = ("127.0.0.1", "localhost", "::1")
JobState = Literal["queued", "running", "done", "failed", "timeout"]


class Submission(BaseModel):
    """A candidate: its task and either its files or a model completion to extract them from."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    files: dict[str, str] | None = None
    completion: str | None = None
    preset: str = "score"

    @model_validator(mode="after")
    def _one_form(self) -> Submission:
        if (self.files is None) == (self.completion is None):
            raise ValueError("give exactly one of 'files' and 'completion'")
        try:  # else accepted, evaluated, then every view of the job failed
            check_preset(self.preset)
        except AkaError as exc:
            raise ValueError(str(exc)) from None
        return self


class Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidates: list[Submission] = Field(min_length=1, max_length=1024)


class RewardRequest(BaseModel):
    """OpenRLHF's remote reward request: full sequences, their prompts, and labels (task ids)."""

    query: list[str]
    prompts: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)


@dataclass
class Job:
    id: str
    submission: Submission
    state: JobState = "queued"
    submitted: float = field(default_factory=time.monotonic)
    result: CandidateResult | None = None
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def finish(self) -> None:
        """Done: its files or completion (up to the request limit each) are not kept with it."""
        self.submission = self.submission.model_copy(update={"files": {}, "completion": None})
        self.done.set()

    def view(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "task_id": self.submission.task_id, "state": self.state}
        if self.error is not None:
            body["error"] = self.error
        if self.result is not None:
            chosen = reward(self.result, self.submission.preset)
            body["reward"] = {"value": chosen.value, "preset": chosen.preset, "applicable": chosen.applicable}
            body["result"] = self.result.model_dump(mode="json", exclude={"task_result"})
        return body


@dataclass
class Counters:
    submitted: int = 0
    rejected: int = 0
    done: int = 0
    failed: int = 0
    timed_out: int = 0
    seconds: float = 0.0
    device_wait: float = 0.0  # of `seconds`, waiting for other evaluations' turns on the device


Receive = Callable[[], Awaitable[dict[str, Any]]]


class BodyLimit:
    """Refuses a request whose body is over `limit` bytes (`413`): one that declares a longer
    length before it is read, any other as it arrives (a chunked body declares none, and a red
    team sent 3 x 128 MiB that way past the declared-length check, session 50). ASGI middleware
    around the app: the body is counted before anything reads it whole."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await JSONResponse({"detail": f"request over {self.limit} bytes"}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # FastAPI passes an HTTPException from reading the body on
                    raise HTTPException(413, f"request over {self.limit} bytes")
            return message

        await self.app(scope, counted, send)


def make_app(
    evaluator: Any,
    token: str | None = None,
    max_queue: int = 256,
    workers: int = 1,
    request_timeout: float = 1800.0,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    keep_jobs: int = 100_000,
    eval_timeout: float | None = None,
    preset: str = "score",
) -> FastAPI:
    """The reward server's app around `evaluator` (a `KernelEvaluator`). A job's evaluation is
    cut at its request deadline (from submission) or once it has run `eval_timeout` seconds
    (waits for the device not counted), whichever comes first. `preset`: what `/get_reward`
    answers with (OpenRLHF's request names none)."""
    queue: asyncio.Queue[Job] = asyncio.Queue(maxsize=max_queue)
    jobs: dict[str, Job] = {}
    counters = Counters()
    running = 0

    async def work() -> None:
        nonlocal running
        while True:
            job = await queue.get()
            job.state, started = "running", time.monotonic()
            running += 1
            try:
                sub = job.submission
                ends = job.submitted + request_timeout
                left = ends - started
                if left <= 0:
                    raise asyncio.TimeoutError
                call = (
                    evaluator.evaluate_async(sub.task_id, sub.files, eval_timeout, ends)
                    if sub.files is not None
                    else evaluator.evaluate_completion_async(sub.task_id, sub.completion or "", eval_timeout, ends)
                )
                result = await asyncio.wait_for(asyncio.shield(call), timeout=left + DEADLINE_GRACE_S)
                if result.failure_kind is FailureKind.TIMEOUT and time.monotonic() >= ends:
                    raise asyncio.TimeoutError  # the request's deadline cut it: no verdict on the candidate
                job.result = result
                if not result.cached:
                    counters.device_wait += result.device_wait_seconds or 0.0
                job.state = "done"
                counters.done += 1
            except asyncio.TimeoutError:
                job.state, job.error = "timeout", f"no result within {request_timeout:.0f} s"
                counters.timed_out += 1
            except AkaError as exc:  # the candidate's input (an unknown task, a file it may not edit)
                job.state, job.error = "failed", str(exc)
                counters.failed += 1
            except Exception as exc:  # noqa: BLE001 - one job's fault must not stop the server
                job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"
                counters.failed += 1
            finally:
                running -= 1
                counters.seconds += time.monotonic() - started
                job.finish()
                queue.task_done()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        tasks = [asyncio.create_task(work()) for _ in range(workers)]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()

    app = FastAPI(title="aka reward server", lifespan=lifespan)
    app.add_middleware(BodyLimit, limit=max_request_bytes)

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if token is not None and request.url.path != "/healthz":
            given = request.headers.get("authorization", "")
            if not secrets.compare_digest(given.encode("utf-8", "replace"), f"Bearer {token}".encode()):
                return JSONResponse({"detail": "missing or wrong bearer token"}, status_code=401)
        return await call_next(request)

    async def enqueue(submissions: list[Submission]) -> list[Job]:
        # cache look-ups read task files and may load a task: in a thread, never on the event loop
        # (a red team's batch of 1,024 spellings of one task id held every client 3.7 s)
        hits = await asyncio.to_thread(lambda: [cached(sub) for sub in submissions])
        waiting = sum(hit is None for hit in hits)
        if queue.maxsize and waiting and queue.qsize() + waiting > queue.maxsize:
            counters.rejected += len(submissions)
            raise HTTPException(
                429, f"the queue is full ({queue.qsize()} waiting); retry later", headers={"Retry-After": "5"}
            )
        while len(jobs) + len(submissions) > keep_jobs:  # forget the oldest finished jobs
            oldest = next((k for k, j in jobs.items() if j.done.is_set()), None)
            if oldest is None:
                break
            del jobs[oldest]
        made = []
        for sub, hit in zip(submissions, hits, strict=True):
            job = Job(secrets.token_hex(8), sub)
            jobs[job.id] = job
            if hit is None:
                queue.put_nowait(job)
            else:
                job.state, job.result = "done", hit
                counters.done += 1
                job.finish()
            made.append(job)
        counters.submitted += len(made)
        return made

    def cached(sub: Submission) -> CandidateResult | None:
        """A cache hit for a submission of files, found without queueing; anything else (a
        completion, bad input) goes through the queue."""
        if sub.files is None:
            return None
        try:
            return evaluator.cached(sub.task_id, sub.files)  # type: ignore[no-any-return]
        except AkaError:
            return None

    def job_named(job_id: str) -> Job:
        job = jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job

    @app.post("/v1/submit", status_code=202)
    async def submit(sub: Submission) -> dict[str, Any]:
        return (await enqueue([sub]))[0].view()

    @app.post("/v1/batch", status_code=202)
    async def batch(body: Batch) -> dict[str, Any]:
        return {"jobs": [job.view() for job in await enqueue(body.candidates)]}

    @app.get("/v1/jobs/{job_id}")
    async def status(job_id: str) -> dict[str, Any]:
        return job_named(job_id).view()

    @app.get("/v1/jobs/{job_id}/result")
    async def result(job_id: str, wait: float = 0.0) -> JSONResponse:
        job = job_named(job_id)
        if not job.done.is_set() and wait > 0:
            try:
                await asyncio.wait_for(job.done.wait(), timeout=min(wait, request_timeout + DEADLINE_GRACE_S))
            except asyncio.TimeoutError:
                pass
        return JSONResponse(job.view(), status_code=200 if job.done.is_set() else 202)

    @app.post("/get_reward")
    async def get_reward(body: RewardRequest) -> dict[str, Any]:
        if len(body.labels) != len(body.query) or (body.prompts and len(body.prompts) != len(body.query)):
            raise HTTPException(422, "query, prompts and labels (the task ids) must be as long as each other")
        prompts = body.prompts or [""] * len(body.query)
        subs = [
            Submission(
                task_id=label, completion=query[len(prompt) :] if query.startswith(prompt) else query, preset=preset
            )
            for query, prompt, label in zip(body.query, prompts, body.labels, strict=True)
        ]
        made = await enqueue(subs)
        await asyncio.gather(*(job.done.wait() for job in made))
        values: list[float] = []
        logs: dict[str, list[float]] = {"compiled": [], "correct": [], "speedup": [], "applicable": []}
        for job in made:
            if job.result is None:  # no verdict (its request's deadline, a server error): the preset's least
                values.append(floor(job.submission.preset))
                for key in logs:
                    logs[key].append(0.0)
                continue
            chosen = reward(job.result, job.submission.preset)
            values.append(chosen.value)
            logs["compiled"].append(float(job.result.compiled))
            logs["correct"].append(float(job.result.correct))
            logs["speedup"].append(float(job.result.speedup or 0.0))
            logs["applicable"].append(float(chosen.applicable))
        return {"rewards": values, "scores": values, "extra_logs": logs}

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "queued": queue.qsize(), "running": running}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        lines = [
            f"aka_queue_waiting {queue.qsize()}",
            f"aka_queue_capacity {queue.maxsize}",
            f"aka_running {running}",
            f"aka_submitted_total {counters.submitted}",
            f"aka_rejected_total {counters.rejected}",
            f"aka_done_total {counters.done}",
            f"aka_failed_total {counters.failed}",
            f"aka_timed_out_total {counters.timed_out}",
            f"aka_evaluation_seconds_total {counters.seconds:.3f}",
            f"aka_device_wait_seconds_total {counters.device_wait:.3f}",
        ]
        return PlainTextResponse("\n".join(lines) + "\n")

    return app


def check_binding(host: str, token: str | None) -> None:
    """Code arrives over the network: anything but loopback needs a bearer token."""
    if host not in LOOPBACK and not token:
        raise AkaError(
            f"--host {host}: the server runs code it is sent; bind it beyond 127.0.0.1 only with a "
            "bearer token (--token-env NAME, the variable holding it)"
        )
