"""A metrics endpoint on loopback: serves ``/metrics`` from a callback, from a daemon thread."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: (HTTP status, body); a status other than 200 is sent as an error with the body as its reason.
Produce = Callable[[], tuple[int, str]]


class TextEndpoint:
    """``GET /metrics`` answers ``produce()``; anything else is 404. Loopback only."""

    def __init__(self, produce: Produce, *, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        if not host.startswith("127."):
            raise ValueError(f"simulated endpoints only listen on loopback, not {host}")
        self.produce, self.name = produce, name
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{self.name} is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}/metrics"

    def start(self) -> TextEndpoint:
        """Listen (port 0 picks a free port) and serve; returns self."""
        produce = self.produce

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if urllib.parse.urlparse(self.path).path != "/metrics":
                    self.send_error(404, "only /metrics is served")
                    return
                status, text = produce()
                if status != 200:
                    self.send_error(status, text)
                    return
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
