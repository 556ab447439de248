"""Services on this machine that an agent must not reach (a stand-in for a cluster's head, the
reward server), and the probe an agent's shell runs against them."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from aka.agents.egress import machine_addresses

PROBE_SCRIPT = """\
import json, os, socket, sys, urllib.request
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
proxied = urllib.request.build_opener()  # HTTP(S)_PROXY and NO_PROXY as the agent has them
seen = {}
for url in sys.argv[2:]:
    if url.startswith("unix:"):  # a service's socket file (a Docker daemon's, say)
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.settimeout(15)
                client.connect(url[5:])
                seen[url] = "open " + client.recv(100).decode()
        except Exception as exc:
            seen[url] = "closed " + str(exc)
        continue
    for name, opener in (("direct", direct), ("proxied", proxied)):
        try:
            seen[name + " " + url] = "open " + opener.open(url, timeout=15).read().decode()
        except Exception as exc:
            seen[name + " " + url] = "closed " + str(exc)
with open(sys.argv[1], "w") as out:
    json.dump(seen, out)
print("NETPROBE", json.dumps(seen))
"""


class RecordingService:
    """An HTTP service on `host` that records the paths asked of it."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.paths: list[str] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                service.paths.append(self.path)
                body = b"service reached"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://{host}:{self._httpd.server_address[1]}/cluster"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class UnixService:
    """A service on a Unix socket file of this machine (as a Docker daemon's): greets each caller
    and counts them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.callers = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix:{self.path}"

    def _serve(self) -> None:
        while True:
            try:
                caller, _ = self._server.accept()
            except OSError:
                return
            self.callers += 1
            with caller:
                caller.sendall(b"service reached")

    def stop(self) -> None:
        self._server.close()
        self.path.unlink(missing_ok=True)


def machine_ipv4() -> str | None:
    """An IPv4 address of this machine's own that is not loopback (a node's address)."""
    for address in sorted(machine_addresses()):
        ip = ipaddress.ip_address(address)
        if ip.version == 4 and not ip.is_loopback:
            return address
    return None


def write_probe(folder: Path) -> Path:
    path = folder / "net_probe.py"
    path.write_text(PROBE_SCRIPT)
    return path


def probe_results(path: Path) -> dict[str, str]:
    return dict(json.loads(path.read_text()))
