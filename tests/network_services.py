"""Services on this machine that an agent must not reach (a stand-in for a cluster's head, the
reward server), and the probe an agent's shell runs against them."""

from __future__ import annotations

import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from aka.agents.egress import machine_addresses

PROBE_SCRIPT = """\
import json, os, sys, urllib.request
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
proxied = urllib.request.build_opener()  # HTTP(S)_PROXY and NO_PROXY as the agent has them
seen = {}
for url in sys.argv[2:]:
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
