"""Serve one viewer page on 127.0.0.1 (``orchestrace view --serve``).

Only the page itself is served, at ``/`` and ``/index.html``; any other path is a 404, so the
server never exposes files from disk. Binding to the loopback address keeps it local, and the
``Host`` check refuses DNS rebinding: a page on ``evil.example`` whose name an attacker re-points
to 127.0.0.1 reaches the socket, but its requests carry ``Host: evil.example`` and get a 421.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_server(html: str, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for the page (port 0 picks a free port; read it from ``server.server_address``)."""
    body = html.encode("utf-8")

    allowed: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if (self.headers.get("Host") or "").strip().lower() not in allowed:
                self.send_error(421, "Misdirected Request", "Host is not this server's address")
                return
            if self.path.split("?", 1)[0] not in ("/", "/index.html"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet by default
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    allowed.update(allowed_hosts(host, server.server_address[1]))
    return server


def allowed_hosts(host: str, port: int) -> set[str]:
    """``Host`` values the server answers: its bind address and ``localhost``, with and without
    the port."""
    names = {host.lower(), "localhost"}
    return names | {f"{n}:{port}" for n in names}


def serve_in_thread(html: str, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start serving in a daemon thread; returns (server, url). Call ``server.shutdown()`` to stop."""
    server = make_server(html, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, p = server.server_address[:2]
    return server, f"http://{host}:{p}/"
