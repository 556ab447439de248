"""`aka serve`, started for real (uvicorn in its own process) on toy tasks: submit and poll, the
cache, a batch, backpressure (429), OpenRLHF's /get_reward, the bearer token, request limits,
metrics, and the refusal to bind beyond loopback without a token."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import processes_under, toy_kernel_source

TASK = "triton2triton/toy/answer"
GOOD = toy_kernel_source(time_ms=2.0)  # twice as fast as the baseline's 4.0 ms: score 320
TOKEN = "s3cret-token"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


class Server:
    def __init__(self, port: int, token: str | None) -> None:
        self.base, self.token = f"http://127.0.0.1:{port}", token

    def call(
        self, method: str, path: str, body: object = None, token: str | None = "default", raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        given = self.token if token == "default" else token
        if given:
            request.add_header("Authorization", f"Bearer {given}")
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                text = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as error:
            text, status = error.read().decode(), error.code
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text


@contextlib.contextmanager
def _serving(tasks_root: Path, tmp_path: Path, *extra: str) -> Iterator[Server]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aka.cli",
            "serve",
            "--tasks-root",
            str(tasks_root),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--port",
            str(port),
            "--max-queue",
            "2",
            "--token-env",
            "AKA_TEST_TOKEN",
            *extra,
        ],
        cwd=tmp_path,
        env=_env(AKA_TEST_TOKEN=TOKEN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    made = Server(port, TOKEN)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if made.call("GET", "/healthz", token=None)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            proc.kill()
            pytest.fail(f"the server did not start: {proc.communicate()[1][-2000:]}")
        yield made
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def server(tasks_root: Path, make_toy_task, tmp_path: Path) -> Iterator[Server]:
    make_toy_task(TASK, baseline="source")
    with _serving(tasks_root, tmp_path) as made:
        yield made


def _result(server: Server, job: dict[str, Any]) -> dict[str, Any]:
    status, body = server.call("GET", f"/v1/jobs/{job['id']}/result?wait=110")
    assert status == 200, body
    return dict(body)


def test_submit_poll_cache_batch_and_backpressure(server: Server) -> None:
    status, job = server.call("POST", "/v1/submit", {"task_id": TASK, "files": {"kernel.py": GOOD}})
    assert status == 202 and job["state"] in ("queued", "running"), job
    done = _result(server, job)
    assert done["state"] == "done" and done["reward"] == {"value": 320.0, "preset": "score", "applicable": True}
    assert done["result"]["speedup"] == pytest.approx(2.0) and done["result"]["cached"] is False

    again = _result(server, server.call("POST", "/v1/submit", {"task_id": TASK, "files": {"kernel.py": GOOD}})[1])
    assert again["result"]["cached"] is True

    completion = f"Here it is:\n```python kernel.py\n{toy_kernel_source(value=41)}```\n"
    status, batch = server.call(
        "POST",
        "/v1/batch",
        {
            "candidates": [
                {"task_id": TASK, "completion": completion, "preset": "log_speedup"},
                {"task_id": "no/such/task", "files": {"kernel.py": GOOD}},
            ]
        },
    )
    assert status == 202
    wrong, unknown = (_result(server, job) for job in batch["jobs"])
    assert wrong["state"] == "done" and wrong["result"]["correct"] is False
    assert wrong["reward"]["preset"] == "log_speedup"
    assert unknown["state"] == "failed" and "unknown task id" in unknown["error"]

    status, body = server.call(
        "POST",
        "/v1/batch",
        {
            "candidates": [
                {"task_id": TASK, "files": {"kernel.py": toy_kernel_source(time_ms=t)}} for t in (1.0, 1.5, 3.0)
            ]
        },
    )
    assert status == 429 and "queue is full" in body["detail"]

    status, metrics = server.call("GET", "/metrics")
    assert status == 200 and "aka_rejected_total 3" in metrics and "aka_done_total 3" in metrics
    assert "aka_device_wait_seconds_total 0.000" in metrics  # the CPU's steps never wait for each other


def test_openrlhf_get_reward(server: Server) -> None:
    prompt = "Write the kernel.\n"
    response = f"```python kernel.py\n{GOOD}```"
    status, body = server.call(
        "POST", "/get_reward", {"query": [prompt + response], "prompts": [prompt], "labels": [TASK]}
    )
    assert status == 200, body
    assert body["rewards"] == [320.0] and body["scores"] == [320.0]
    assert body["extra_logs"]["correct"] == [1.0] and body["extra_logs"]["speedup"] == [pytest.approx(2.0)]
    assert server.call("POST", "/get_reward", {"query": ["a", "b"], "labels": [TASK]})[0] == 422


def test_the_token_and_the_request_size_are_checked(server: Server) -> None:
    assert server.call("GET", "/metrics", token=None)[0] == 401
    assert server.call("GET", "/metrics", token="wrong")[0] == 401
    assert server.call("GET", "/healthz", token=None)[0] == 200
    import http.client

    connection = http.client.HTTPConnection(server.base.removeprefix("http://"), timeout=30)
    connection.putrequest("POST", "/v1/submit")  # a body over the limit is refused before it is read
    connection.putheader("Authorization", f"Bearer {TOKEN}")
    connection.putheader("Content-Length", str(5 * 2**20))
    connection.endheaders()
    assert connection.getresponse().status == 413
    connection.close()
    connection = http.client.HTTPConnection(server.base.removeprefix("http://"), timeout=30)
    connection.putrequest("POST", "/v1/submit")  # no declared length: counted as it arrives
    connection.putheader("Authorization", f"Bearer {TOKEN}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    chunk = b"x" * 2**20
    with contextlib.suppress(OSError):  # the server may answer and close before the last chunk
        for _ in range(6):
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")
    assert connection.getresponse().status == 413
    connection.close()
    status, body = server.call("POST", "/v1/submit", {"task_id": TASK})
    assert status == 422 and "exactly one of 'files' and 'completion'" in json.dumps(body)
    status, body = server.call("POST", "/v1/submit", {"task_id": TASK, "files": {}, "preset": "nope"})
    assert status == 422 and "unknown reward preset 'nope'" in json.dumps(body)
    status, _ = server.call("GET", "/metrics", token="\u00ff")  # not ASCII: refused, not a server error
    assert status == 401


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aka.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(_free_port()),
            "--cache-dir",
            str(tmp_path),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "only with a bearer token" in done.stderr
    argv = [sys.executable, "-m", "aka.cli", "serve", "--preset", "best", "--cache-dir", str(tmp_path)]
    done = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown reward preset 'best' (use one of score, log_speedup" in done.stderr


@pytest.mark.parametrize(
    "limits",
    [("--request-timeout", "6", "--preset", "log_speedup"), ("--request-timeout", "600", "--eval-timeout", "6")],
    ids=["request-deadline", "evaluation-deadline"],
)
def test_a_job_past_its_deadline_is_killed_and_frees_the_device(
    tasks_root: Path, make_toy_task, tmp_path: Path, limits: tuple[str, ...]
) -> None:
    make_toy_task(TASK, baseline="source")
    hung = toy_kernel_source(extra="import time\ntime.sleep(600)")
    with _serving(tasks_root, tmp_path, *limits) as server:
        started = time.monotonic()
        status, job = server.call("POST", "/v1/submit", {"task_id": TASK, "files": {"kernel.py": hung}})
        assert status == 202
        done = _result(server, job)
        if "--eval-timeout" in limits:  # the candidate ran out of its own time: its verdict
            assert done["state"] == "done" and done["result"]["failure_kind"] == "timeout", done
        else:  # the request's deadline passed: no verdict on the candidate, no reward
            assert done["state"] == "timeout" and done.get("result") is None, done
        assert time.monotonic() - started < 40 and not processes_under(tmp_path / "cache" / "scratch")
        good = _result(server, server.call("POST", "/v1/submit", {"task_id": TASK, "files": {"kernel.py": GOOD}})[1])
        assert good["state"] == "done" and good["reward"]["value"] == 320.0
        status, waiting = server.call("POST", "/v1/submit", {"task_id": TASK, "files": {"kernel.py": hung}})
        status, hit = server.call("POST", "/v1/submit", {"task_id": TASK, "files": {"kernel.py": GOOD}})
        assert status == 202 and hit["state"] == "done" and hit["result"]["cached"], "a cache hit never queues"
        hung_again = _result(server, waiting)
        assert (hung_again.get("result") or {}).get("cached") is not True  # a deadline never gives a final word
        if "--eval-timeout" not in limits:  # no verdict: /get_reward's preset's least, never above a wrong answer
            query = f"```python kernel.py\n{hung}```"
            status, body = server.call("POST", "/get_reward", {"query": [query], "labels": [TASK]})
            assert status == 200 and body["rewards"] == [-2.0] and body["extra_logs"]["applicable"] == [0.0], body
