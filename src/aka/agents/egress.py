"""The agent's only way out of its network namespace: an HTTP proxy (the gate) that the platform
runs outside the guard and that decides every connection.

Behind the guard an agent CLI has a network namespace of its own with nothing but loopback; the
relay started there (`aka.agents.egress_relay`) hands each connection to this gate over a Unix
socket. The gate reaches the agent's model endpoints (its `base_url` or the CLI's endpoint
variable, on whatever address) and the allowed extras (agent option `network_allow`), and any
public internet address; never this machine's own addresses nor a private, loopback, link-local
or otherwise non-global one. Before, a red team's agent reached the run's Ray cluster on the
host's loopback, ran a detached actor as root outside the guard and rewrote its task's result;
the platform's reward server and other services on the machine or its private network were as
open. Names are resolved here, once, and the connection goes to the address that was checked (a
name cannot resolve to a public address for the check and a private one for the connection).

The gate speaks what CLIs send to an `HTTP(S)_PROXY`: `CONNECT host:port` (HTTPS, passed through
untouched) and absolute-form requests (`GET http://host:port/path`, forwarded in origin form with
`Connection: close`). Where aka's own environment names a proxy (`HTTPS_PROXY`, `HTTP_PROXY`,
`NO_PROXY`), the gate goes through it, never for loopback. A refusal is an HTTP 403 whose body
says why; refusals are kept for the agent's log.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import logging
import os
import socket
import socketserver
import stat
import tempfile
import threading
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote, urlsplit

from aka.agents.egress_relay import join
from aka.trees import remove_tree

logger = logging.getLogger(__name__)

HEAD_LIMIT_BYTES = 65536
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 256
"""Connections one gate serves at once (each is a thread of the judge's process: an agent opening
thousands would take them from it); more are closed unanswered until some end."""
PROXY_PORT = 3128
"""Where the relay listens for proxy requests inside the agent's namespace (another where an
endpoint on the host's loopback uses it)."""
_HOP_HEADERS = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"te", b"upgrade"}


class EgressRefused(Exception):
    """A destination the gate does not open (its message says why)."""


@dataclass(frozen=True)
class Destination:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def on_loopback(self) -> bool:
        return self.host in ("localhost", "::1") or self.host.startswith("127.")


def refusal(destination: Destination, why: str, address: str) -> EgressRefused:
    return EgressRefused(
        f"{destination} is {why} ({address}); agents reach their model endpoints and public addresses "
        "only (agent option network_allow adds a HOST:PORT)"
    )


def parse_destination(text: str, default_port: int | None = None) -> Destination:
    """`host:port`, `[v6]:port`, or a URL (`https://api.example.com/v1`: its port or the scheme's)."""
    text = text.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"'{text}' is not an http:// or https:// URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return Destination(parts.hostname.lower(), port)
    host, sep, port_text = text.rpartition(":")
    if not sep and default_port is not None:
        host, port_text = text, str(default_port)
    host = host.strip("[]").lower()
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"'{text}' is not HOST:PORT (e.g. pypi.internal:443)")
    return Destination(host, int(port_text))


def machine_addresses() -> frozenset[str]:
    """Every address this machine's interfaces hold (a public one too: a service on the node's own
    address is as local as one on loopback), from /proc and the host name."""
    found: set[str] = set()
    try:
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            found.add(str(ipaddress.IPv6Address(bytes.fromhex(raw))))
    except (OSError, ValueError, IndexError):
        pass
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in zip(lines, lines[1:], strict=False):
            if "/32 host LOCAL" in line:
                found.add(before.split()[-1])
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]))
    except OSError:
        pass
    return frozenset(found)


@dataclass
class EgressPolicy:
    """Which destinations the gate opens: the named ones (model endpoints, `network_allow`) on any
    address, anything else only on public addresses that are not this machine's."""

    named: frozenset[Destination]
    own_addresses: frozenset[str] = field(default_factory=machine_addresses)

    def resolve(self, destination: Destination) -> list[tuple[socket.AddressFamily, str]]:
        """The addresses to connect to, each one checked; `EgressRefused` when none may be."""
        try:
            infos = socket.getaddrinfo(destination.host, destination.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise EgressRefused(f"{destination.host} does not resolve ({exc})") from exc
        addresses: list[tuple[socket.AddressFamily, str]] = list(
            dict.fromkeys((socket.AddressFamily(info[0]), str(info[4][0])) for info in infos)
        )
        if destination in self.named:
            return addresses
        opened = [
            (f, a) for f, a in addresses if Destination(a, destination.port) in self.named or not self.why_closed(a)
        ]
        if not opened:  # only the checked addresses: a name may mix a public one with this machine's
            address = addresses[0][1]
            raise refusal(destination, self.why_closed(address) or "closed", address)
        return opened

    def check_name(self, destination: Destination) -> None:
        """For a destination reached through the machine's proxy, which resolves it itself: a name
        that resolves here to any closed address is refused; one that does not resolve here is
        the proxy's to find (it is not this machine)."""
        if destination in self.named:
            return
        try:
            infos = socket.getaddrinfo(destination.host, destination.port, type=socket.SOCK_STREAM)
        except OSError:
            return
        for info in infos:
            address = str(info[4][0])
            why = self.why_closed(address)
            if why and Destination(address, destination.port) not in self.named:
                raise refusal(destination, why, address)

    def why_closed(self, address: str) -> str | None:
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        if str(ip) in self.own_addresses:
            return "this machine"
        if not ip.is_global:
            return "a private or local address"
        return None


def open_destination(policy: EgressPolicy, destination: Destination) -> socket.socket:
    """A connection to the first checked address of `destination` that answers."""
    errors = []
    for family, address in policy.resolve(destination):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect((address, destination.port))
        except OSError as exc:
            sock.close()
            errors.append(f"{address}: {exc}")
            continue
        sock.settimeout(None)
        return sock
    raise OSError(f"cannot connect to {destination}: {'; '.join(errors)}")


def read_head(client: socket.socket) -> tuple[bytes, bytes]:
    """The request's head (through the blank line) and whatever of its body came with it."""
    client.settimeout(HEAD_TIMEOUT_S)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT_BYTES:
            raise ValueError("request head too long")
        chunk = client.recv(65536)
        if not chunk:
            raise ValueError("connection closed before a request")
        data += chunk
    client.settimeout(None)
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def origin_form(head: bytes, path: str) -> bytes:
    """An absolute-form request head as a server expects it: the path only, no proxy or hop
    headers, and `Connection: close` (the next request on the client's connection may be for
    another host)."""
    method, _, version = head.split(b"\r\n", 1)[0].split(b" ", 2)
    return rewritten(head, method + b" " + path.encode() + b" " + version)


def rewritten(head: bytes, first_line: bytes, extra: list[bytes] | None = None) -> bytes:
    """`head` with `first_line`, without hop-by-hop and proxy headers, with `extra` and
    `Connection: close`."""
    headers = head.split(b"\r\n")[1:]
    kept = [h for h in headers if h.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    return b"\r\n".join([first_line, *kept, *(extra or []), b"Connection: close"]) + b"\r\n\r\n"


def target_path(target: str) -> str:
    parts = urlsplit(target)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def through_proxy(proxy_url: str, destination: Destination, head: bytes | None) -> tuple[socket.socket, bytes, bytes]:
    """A connection through the machine's proxy, with what to send it and what it already sent
    back: a tunnel to `destination` (`head` None), else the absolute-form request `head` as the
    proxy expects it (hop headers replaced, its credentials added)."""
    parts = urlsplit(proxy_url)
    sock = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=CONNECT_TIMEOUT_S)
    auth = []
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth = [b"Proxy-Authorization: Basic " + base64.b64encode(credentials)]
    if head is not None:
        sock.settimeout(None)
        return sock, rewritten(head, head.split(b"\r\n", 1)[0], auth), b""
    try:
        sock.sendall(b"\r\n".join([f"CONNECT {destination} HTTP/1.1".encode(), f"Host: {destination}".encode(), *auth]))
        sock.sendall(b"\r\n\r\n")
        answer_head, early = read_head(sock)
    except (OSError, ValueError):
        sock.close()
        raise
    status = answer_head.split(b"\r\n", 1)[0].decode("latin-1")
    if status.split(" ")[1:2] != ["200"]:
        sock.close()
        raise OSError(f"the machine's proxy {parts.hostname}:{parts.port} answered {status!r} for {destination}")
    return sock, b"", early


def _bypassed(host: str, proxies: dict[str, str]) -> bool:
    """`NO_PROXY` matching as urllib does it (not in the standard library's stubs)."""
    return bool(urllib.request.proxy_bypass_environment(host, proxies))  # type: ignore[attr-defined]


def answer(client: socket.socket, status: str, text: str) -> None:
    body = (text + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    try:
        client.sendall(head.encode() + body)
    except OSError:
        pass


def gates_folder() -> Path | None:
    """The one folder that holds every gate's own folder on this machine for this user (made
    once, never removed, listable by no one else): an agent's guard hides it whole and binds back
    only its own gate. Masking each other agent's gate socket one by one raced with their ends:
    a gate gone between the listing and the agent's start failed that start. None (each gate in
    the temporary folder) where the name is taken by something not this user's own folder."""
    folder = Path(tempfile.gettempdir()) / f"aka-egress-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
        folder.chmod(0o711)  # whatever the umask: an agent running as another user passes through
    try:
        found = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o022:
        logger.warning("%s is not this user's own folder: each agent's network gate is made beside it", folder)
        return None
    return folder


class EgressGate:
    """The gate for one agent run: a Unix socket in a folder of its own, served by threads of this
    process until `close` (a context manager). `refused` lists what it refused and why."""

    def __init__(self, endpoints: Iterable[Destination], allowed: Iterable[Destination] = ()) -> None:
        named = [*endpoints, *allowed]
        loopback = [Destination(ip, d.port) for d in named if d.host == "localhost" for ip in ("127.0.0.1", "::1")]
        self.policy = EgressPolicy(frozenset([*named, *loopback]))
        self.folder = Path(tempfile.mkdtemp(prefix="gate-", dir=gates_folder()))
        self.folder.chmod(0o755)
        self.socket_path = self.folder / "gate.sock"
        self.refused: list[str] = []
        self._proxies = urllib.request.getproxies_environment()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        gate = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    gate.handle(self.request)
                finally:
                    gate._slots.release()

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

            def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
                if not gate._slots.acquire(blocking=False):
                    self.shutdown_request(request)
                    return
                try:
                    super().process_request(request, client_address)
                except BaseException:
                    gate._slots.release()
                    raise

        self._server = Server(str(self.socket_path), Handler)
        self.socket_path.chmod(0o666)  # an agent running as another user connects too
        self._thread = threading.Thread(target=self._server.serve_forever, name="aka-egress", daemon=True)
        self._thread.start()

    def handle(self, client: socket.socket) -> None:
        try:
            head, rest = read_head(client)
            first = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, target, _ = (first.split(" ", 2) + ["", ""])[:3]
            tunnel = method.upper() == "CONNECT"
            if not tunnel and not target.lower().startswith("http://"):
                answer(client, "400 Bad Request", f"aka egress gate: expected CONNECT or an http:// URL, got {first!r}")
                return
            destination = parse_destination(target)
            proxy = self.machine_proxy(destination, "https" if tunnel else "http")
            early = b""
            if proxy is None:
                upstream = open_destination(self.policy, destination)
                forward = rest if tunnel else origin_form(head, target_path(target)) + rest
            else:
                self.policy.check_name(destination)
                upstream, forward, early = through_proxy(proxy, destination, None if tunnel else head)
                forward += rest
        except EgressRefused as exc:
            with self._lock:
                self.refused.append(str(exc))
            answer(client, "403 Forbidden", f"aka egress gate: {exc}")
            return
        except (OSError, ValueError) as exc:
            answer(client, "502 Bad Gateway", f"aka egress gate: {exc}")
            return
        with self._lock:
            self._open.update((client, upstream))
        try:
            if tunnel:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + early)
            if forward:
                upstream.sendall(forward)
            join(client, upstream)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.difference_update((client, upstream))

    def machine_proxy(self, destination: Destination, scheme: str) -> str | None:
        """The proxy this machine's own environment names for `destination` (`HTTPS_PROXY` for a
        tunnel, `HTTP_PROXY` for plain HTTP, none where `NO_PROXY` matches): a machine that reaches
        the internet only through one is reached through it; never for loopback, as Go's clients)."""
        url = self._proxies.get(scheme)
        if not url or destination.on_loopback or _bypassed(destination.host, self._proxies):
            return None
        return url if "://" in url else f"http://{url}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        remove_tree(self.folder)

    def __enter__(self) -> EgressGate:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
