"""`aka dashboard --serve`: the built site over HTTP on 127.0.0.1, with the run folders its links
point into (logs, transcripts, results) and nothing else.

The server's root is the folder above the site and the runs, so the page's relative links work
as they do from `file://`; `/` leads to the page; a request for anything outside the site and
the runs (after symlinks are followed) is answered 404, and folders are not listed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aka.dashboard.site import INDEX_NAME

logger = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"


class _SiteHandler(SimpleHTTPRequestHandler):
    extensions_map = {
        **SimpleHTTPRequestHandler.extensions_map,
        **dict.fromkeys((".log", ".yaml", ".jsonl", ".md"), "text/plain; charset=utf-8"),
    }

    def __init__(self, *args: Any, allowed: tuple[Path, ...], home: str, **kwargs: Any) -> None:
        self.allowed, self.home = allowed, home
        super().__init__(*args, **kwargs)

    def _permitted(self) -> bool:
        path = Path(self.translate_path(self.path)).resolve()
        page = path.is_file() or (path.is_dir() and (path / INDEX_NAME).is_file())
        return page and any(path.is_relative_to(root) for root in self.allowed)

    def do_GET(self) -> None:
        if self.path == "/" and self.home != "/":
            self.send_response(302)
            self.send_header("Location", self.home)
            self.end_headers()
        elif self._permitted():
            super().do_GET()
        else:
            self.send_error(404)

    def do_HEAD(self) -> None:
        if self._permitted():
            super().do_HEAD()
        else:
            self.send_error(404)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s " + format, self.address_string(), *args)


def site_server(site: Path, run_dirs: list[Path], port: int) -> tuple[ThreadingHTTPServer, str]:
    """A server of the site and its runs on 127.0.0.1 (`port` 0: any free one), and the page's URL."""
    site, runs = site.resolve(), [d.resolve() for d in run_dirs]
    root = Path(os.path.commonpath([site, *runs]))
    home = "/" + (quote(site.relative_to(root).as_posix()) + "/" if site != root else "") + INDEX_NAME
    handler = partial(_SiteHandler, directory=str(root), allowed=(site, *runs), home=home)
    server = ThreadingHTTPServer((LOOPBACK, port), handler)
    return server, f"http://{LOOPBACK}:{server.server_address[1]}{home}"


def serve_site(site: Path, run_dirs: list[Path], port: int, started: Callable[[str], None]) -> None:
    """Serve until interrupted; `started` gets the page's URL once the server listens."""
    server, url = site_server(site, run_dirs, port)
    with server:
        started(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            return
