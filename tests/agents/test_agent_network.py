"""An agent's network: its own namespace behind the guard, whose only way out is the egress gate.

A red team's agent reached the run's tokenless Ray cluster on the host's loopback, ran a detached
actor as root outside the guard and rewrote its task's result. Here a stand-in CLI probes
services on this machine's loopback and on its own address, directly and through the proxy its
environment names; the gate itself is driven over its Unix socket.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from network_services import RecordingService, UnixService, machine_ipv4, probe_results, write_probe

from aka.agents import egress
from aka.agents.egress import (
    Destination,
    EgressGate,
    EgressPolicy,
    EgressRefused,
    origin_form,
    parse_destination,
)
from aka.errors import ConfigError
from aka.run.layout import AGENT_HOME_DIR
from aka.run.runner import run_experiment

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it)",
)


def test_destinations_parse_from_urls_and_host_port() -> None:
    assert parse_destination("https://API.example.com/v1") == Destination("api.example.com", 443)
    assert parse_destination("http://127.0.0.1:8123/v1") == Destination("127.0.0.1", 8123)
    assert parse_destination("http://[::1]:9/x") == Destination("::1", 9)
    assert parse_destination("pypi.internal:8443") == Destination("pypi.internal", 8443)
    assert str(Destination("::1", 9)) == "[::1]:9"
    for bad in ("pypi.internal", "host:0", "host:99999", "ftp://x/", ":80"):
        with pytest.raises(ValueError):
            parse_destination(bad)


def test_the_policy_closes_this_machine_and_private_networks() -> None:
    policy = EgressPolicy(frozenset({Destination("10.1.2.3", 8000)}), own_addresses=frozenset({"203.0.113.9"}))
    assert policy.why_closed("8.8.8.8") is None
    assert policy.why_closed("2606:4700::1111") is None
    for private in ("127.0.0.1", "10.0.0.5", "192.168.1.1", "172.16.0.1", "169.254.169.254", "::1", "fd00::2"):
        assert policy.why_closed(private) == "a private or local address", private
    assert policy.why_closed("::ffff:127.0.0.1") == "a private or local address"
    assert policy.why_closed("203.0.113.9") == "this machine", "a node's own address, public or not"
    assert policy.resolve(Destination("10.1.2.3", 8000)) == [(socket.AF_INET, "10.1.2.3")], "a named endpoint"
    with pytest.raises(EgressRefused, match="private or local"):
        policy.resolve(Destination("10.1.2.3", 8001))


def test_a_name_opens_only_its_checked_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that resolves to the endpoint's address and to this machine's loopback is opened on
    the endpoint's address only; one that resolves to a public and a private one on the public one."""
    answers = {
        "mixed.example": ["10.1.2.3", "127.0.0.1"],
        "half.example": ["127.0.0.1", "8.8.8.8"],
        "local.example": ["127.0.0.1"],
    }

    def fake(host: str, port: int, **kwargs: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    policy = EgressPolicy(frozenset({Destination("10.1.2.3", 8000)}), own_addresses=frozenset())
    assert policy.resolve(Destination("mixed.example", 8000)) == [(socket.AF_INET, "10.1.2.3")]
    assert policy.resolve(Destination("half.example", 443)) == [(socket.AF_INET, "8.8.8.8")]
    with pytest.raises(EgressRefused, match="local.example:80 is a private or local address"):
        policy.resolve(Destination("local.example", 80))


def test_absolute_form_requests_reach_the_server_in_origin_form() -> None:
    head = b"POST http://h:1/v1/messages?beta=1 HTTP/1.1\r\nHost: h:1\r\nProxy-Connection: keep-alive\r\nX-Key: k"
    sent = origin_form(head, "/v1/messages?beta=1")
    assert sent.startswith(b"POST /v1/messages?beta=1 HTTP/1.1\r\nHost: h:1\r\nX-Key: k\r\n")
    assert sent.endswith(b"Connection: close\r\n\r\n") and b"Proxy-" not in sent


@pytest.fixture
def service() -> Iterator[RecordingService]:
    running = RecordingService()
    yield running
    running.stop()


def _through_gate(gate: EgressGate, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(20)
        client.connect(str(gate.socket_path))
        answer = b""
        try:
            client.sendall(request)
            while chunk := client.recv(65536):
                answer += chunk
                if b"service reached" in answer or b"aka egress gate" in answer:
                    break
        except (BrokenPipeError, ConnectionResetError):
            assert answer == b"", "a reset after part of an answer"  # closed unread: the peer sees a reset
        return answer


def test_the_gate_opens_named_endpoints_and_refuses_the_machine(service: RecordingService) -> None:
    port = int(service.url.split(":")[2].split("/")[0])
    with EgressGate([]) as gate:
        refused = _through_gate(gate, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert refused.startswith(b"HTTP/1.1 403") and b"127.0.0.1" in refused and gate.refused
        assert _through_gate(gate, b"GET /x HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert service.paths == []
    with EgressGate([Destination("127.0.0.1", port)]) as gate:
        tunnel = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        assert b"service reached" in _through_gate(gate, tunnel)
        absolute = f"GET http://127.0.0.1:{port}/absolute?q=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        assert b"service reached" in _through_gate(gate, absolute)
        assert gate.refused == []
        folder = gate.socket_path.parent
    assert service.paths == ["/tunnel", "/absolute?q=1"] and not folder.exists()


STAND_IN = textwrap.dedent("""\
    #!{python}
    import json, os, subprocess, sys
    subprocess.run([sys.executable, {probe!r}, os.path.join(os.environ["HOME"], "net_probe.json"), *{urls!r}])
    env = {{name: os.environ.get(name) for name in ("HTTPS_PROXY", "NO_PROXY")}}
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": json.dumps(env)}}))
""")


def _run_stand_in(
    urls: list[str], agent: dict[str, object], make_toy_task, write_run_config, tmp_path: Path, monkeypatch
) -> tuple[dict[str, str], Path]:
    make_toy_task()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "cursor-agent"
    stand_in.write_text(STAND_IN.format(python=sys.executable, probe=str(write_probe(tmp_path)), urls=urls))
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AKA_AGENT_CLI_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("CURSOR_API_KEY", "k")
    outcome = run_experiment(write_run_config(agent={"template": "cursor", **agent}))
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    assert outcome.results[0].agent is not None and outcome.results[0].agent.exit_reason == "finished"
    return probe_results(workspace / AGENT_HOME_DIR / "net_probe.json"), workspace


@needs_bwrap
def test_a_guarded_agent_reaches_no_service_of_this_machine(
    service: RecordingService, make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node_address = machine_ipv4()
    on_node = RecordingService(node_address) if node_address else None
    socket_file = UnixService(tmp_path / "daemon.sock")  # a service's socket file, as Docker's
    with socket.socket(socket.AF_UNIX) as caller:
        caller.connect(str(socket_file.path))
        assert caller.recv(100) == b"service reached", "the service answers outside the guard"
    try:
        urls = [service.url, *([on_node.url] if on_node else [])]
        seen, workspace = _run_stand_in(
            [*urls, socket_file.url], {}, make_toy_task, write_run_config, tmp_path, monkeypatch
        )
    finally:
        socket_file.stop()
        if on_node:
            on_node.stop()
    assert service.paths == [] and (on_node is None or on_node.paths == []) and socket_file.callers == 1, seen
    assert len(seen) == 2 * len(urls) + 1 and all(answer.startswith("closed") for answer in seen.values()), seen
    assert "refused" in seen[socket_file.url], "the socket file is masked"
    if on_node:
        assert "403" in seen[f"proxied {on_node.url}"], "the gate refused the node's address"
        log = (workspace / "agent.log").read_text()
        assert "aka egress gate refused:" in log and "this machine" in log


@needs_bwrap
def test_network_allow_opens_a_private_destination_and_host_shares_the_network(
    service: RecordingService, make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node_address = machine_ipv4()
    if node_address is None:
        pytest.skip("this machine has no address but loopback")
    on_node = RecordingService(node_address)
    try:
        port = on_node.url.split(":")[2].split("/")[0]
        allowed: dict[str, object] = {"network_allow": [f"{node_address}:{port}"]}
        seen, _ = _run_stand_in([on_node.url], allowed, make_toy_task, write_run_config, tmp_path, monkeypatch)
        assert seen[f"proxied {on_node.url}"] == "open service reached"
        assert seen[f"direct {on_node.url}"].startswith("closed"), "only through the gate"
        shutil.rmtree(tmp_path / "tasks")
        (tmp_path / "tasks").mkdir()
        seen, _ = _run_stand_in(
            [service.url], {"network": "host"}, make_toy_task, write_run_config, tmp_path, monkeypatch
        )
        assert seen[f"direct {service.url}"] == "open service reached", "network: host is the machine's"
    finally:
        on_node.stop()


def test_network_options_are_validated(write_run_config, make_toy_task) -> None:
    make_toy_task()
    with pytest.raises(ConfigError, match="network_allow.*HOST:PORT"):
        run_experiment(write_run_config(agent={"template": "cursor", "network_allow": ["pypi.internal"]}))
    with pytest.raises(ConfigError, match="agent.network"):
        run_experiment(write_run_config(agent={"template": "cursor", "network": "none"}))


def test_the_gate_serves_a_bounded_number_of_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each connection is a thread of the judge's process: past the bound one is closed unanswered (the
    client sees an end of file, a broken pipe or a reset), and a slot that ends serves the next."""
    monkeypatch.setattr(egress, "MAX_CONNECTIONS", 2)
    with EgressGate([]) as gate:
        idle = []
        for _ in range(2):
            held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            held.connect(str(gate.socket_path))
            idle.append(held)
        time.sleep(0.3)
        assert _through_gate(gate, b"CONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n") == b"", "past the bound: closed"
        idle.pop().close()
        deadline = time.monotonic() + 10
        while (answer := _through_gate(gate, b"CONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n")) == b"":
            assert time.monotonic() < deadline, "the ended connection's slot never came back"
            time.sleep(0.1)
        assert answer.startswith(b"HTTP/1.1 403")
        for held in idle:
            held.close()


class _MachineProxy:
    """The machine's own proxy (a cluster that reaches the internet only through one): records each
    request's head and answers a tunnel with 200 then a greeting, a plain request with a page."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://user:p%40ss@127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                self.heads.append(head)
                if head.startswith(b"CONNECT"):
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\nservice reached")
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nservice reached")


def test_the_gate_goes_through_the_machines_own_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = _MachineProxy()
    for name in ("HTTPS_PROXY", "HTTP_PROXY"):
        monkeypatch.setenv(name, proxy.url)
    monkeypatch.setenv("NO_PROXY", "bypassed.invalid")
    with EgressGate([]) as gate:
        assert b"service reached" in _through_gate(gate, b"CONNECT api.model.invalid:443 HTTP/1.1\r\n\r\n")
        plain = b"GET http://mirror.invalid/simple/ HTTP/1.1\r\nHost: mirror.invalid\r\nProxy-Connection: keep-alive"
        plain += b"\r\n\r\n"
        assert b"service reached" in _through_gate(gate, plain)
        for closed in (b"CONNECT 10.1.2.3:443", b"CONNECT localhost:9", b"CONNECT bypassed.invalid:443"):
            assert _through_gate(gate, closed + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403"), closed
    auth = b"Proxy-Authorization: Basic " + base64.b64encode(b"user:p@ss")
    tunnel, forwarded = proxy.heads
    assert tunnel.startswith(b"CONNECT api.model.invalid:443 HTTP/1.1\r\n") and auth in tunnel
    assert forwarded.startswith(b"GET http://mirror.invalid/simple/ HTTP/1.1\r\nHost: mirror.invalid\r\n")
    assert auth in forwarded and b"Connection: close" in forwarded and b"Proxy-Connection" not in forwarded
    proxy.server.close()


GATE_PROBE = textwrap.dedent("""\
    #!{python}
    import json, os, pathlib
    seen = {{"other_gate": os.path.exists({other!r}), "gates": sorted(os.listdir({gates!r}))}}
    pathlib.Path("gates.json").write_text(json.dumps(seen))
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "probed"}}))
""")


@needs_bwrap
def test_an_agent_sees_no_other_gate_and_starts_though_a_masked_socket_vanished(
    make_toy_task, write_run_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents in parallel: each gate's socket was masked for every other agent, one by one, and a
    gate gone between the listing and bubblewrap's start failed that agent (CI, two workers). The
    gates now share one folder the guard hides whole; any other socket that goes in that window
    (here on purpose) fails only a start, which is made again with a new list."""
    from aka.agents import cli_runner

    make_toy_task()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    with EgressGate([]) as other:
        stand_in = bin_dir / "cursor-agent"
        gates = egress.gates_folder()
        assert gates is not None and other.folder.parent == gates
        stand_in.write_text(GATE_PROBE.format(python=sys.executable, other=str(other.socket_path), gates=str(gates)))
        stand_in.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("AKA_AGENT_CLI_DIR", str(tmp_path / "none"))
        monkeypatch.setenv("CURSOR_API_KEY", "k")
        real = cli_runner._sandbox
        made: list[tuple[str, ...]] = []

        def racing(*args):  # type: ignore[no-untyped-def]
            if made:
                made.append(real(*args))
                return made[-1]
            folder = tmp_path / "transient"
            folder.mkdir()
            with socket.socket(socket.AF_UNIX) as server:
                server.bind(str(folder / "s.sock"))
                server.listen()
                made.append(real(*args))
            shutil.rmtree(folder)  # gone before bubblewrap starts
            return made[-1]

        monkeypatch.setattr(cli_runner, "_sandbox", racing)
        outcome = run_experiment(write_run_config(agent={"template": "cursor"}))
    workspace = next(p for p in outcome.run_dir.iterdir() if p.name.startswith("triton2triton_toy_answer_"))
    log = (workspace / "agent.log").read_text()
    assert outcome.results[0].agent is not None and outcome.results[0].agent.exit_reason == "finished", log
    assert len(made) == 2 and str(tmp_path / "transient" / "s.sock") in made[0], "the vanished socket was masked"
    assert "bwrap: Can't" in log and "started again" in log
    seen = json.loads((workspace / "work" / "gates.json").read_text())
    assert seen["other_gate"] is False and len(seen["gates"]) == 1 and seen["gates"] != [other.folder.name], seen


def test_a_gates_folder_name_taken_by_something_else_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another user (or anything) holding `<tmp>/aka-egress-<uid>` as a file, a link or a folder
    others may write must not get the gates: each is then made on its own in the temporary folder."""
    monkeypatch.setattr(egress.tempfile, "gettempdir", lambda: str(tmp_path))
    name = tmp_path / f"aka-egress-{os.getuid()}"
    for taken in ("file", "link", "writable"):
        if taken == "file":
            name.write_text("")
        elif taken == "link":
            (tmp_path / "elsewhere").mkdir()
            name.symlink_to(tmp_path / "elsewhere")
        else:
            name.mkdir(mode=0o777)
            name.chmod(0o777)
        assert egress.gates_folder() is None, taken
        assert "is not this user's own folder" in caplog.text
        name.unlink() if not name.is_dir() or name.is_symlink() else name.rmdir()
    assert egress.gates_folder() == name and (name.stat().st_mode & 0o777) == 0o711
