"""The trace browser's HTTP server (``orchestrace ui``): the standard library's threading server.

Why not an ASGI stack: the work of a request is blocking DuckDB calls and page rendering, so an
event loop would only hand them to threads again; ``view --serve`` already answers with this
server and its foreign-Host check (DNS rebinding gets a 421), and it adds no dependency.

Every answer is a page: bad parameters are a 400, an unknown trace or path a 404, a foreign
Host a 421, anything else a 405; an unexpected failure is logged to stderr and answered with a
short 500 page, never a traceback.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ...core.errors import OrchestraceError
from ..html import render_html
from ..serve import allowed_hosts
from . import pages
from .data import BrowseError, Store, compare, list_traces, load_trace, parse_query, stored_ids, summary_of
from .runs import Run, held_out_pairs, load_run_trace, read_run, side

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass
class App:
    """What the server answers from: one store and the training runs given with ``--run``."""

    store: Store
    runs: list[Run] = field(default_factory=list)
    max_content: int = 4000

    def route(self, path: str, args: dict[str, list[str]]) -> str:
        handler = ROUTES.get(path)
        if handler is None:
            raise BrowseError(404, f"no page {path!r}")
        return handler(self, args)


def _one(args: dict[str, list[str]], key: str, allowed: tuple[str, ...]) -> str:
    """The single value of a required parameter; other parameters than ``allowed`` are a 400."""
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        raise BrowseError(400, f"unknown parameter {unknown[0]!r}; this page takes {', '.join(allowed)}")
    vs = args.get(key)
    if not vs or not vs[0]:
        raise BrowseError(400, f"parameter {key!r} is required")
    if len(vs) > 1:
        raise BrowseError(400, f"parameter {key!r} given {len(vs)} times")
    return vs[0]


_NONE = {"r": "training runs (ui --run FOLDER shows one)", "it": "iterations", "f": "trace files"}


def _index(args: dict[str, list[str]], key: str, allowed: tuple[str, ...], n: int, what: str) -> int:
    v = _one(args, key, allowed)
    if n == 0:
        raise BrowseError(404, f"{key}: there are no {_NONE[key]}")
    if not v.isdigit() or int(v) >= n:
        raise BrowseError(404 if v.isdigit() else 400, f"{key}: {v!r}; expected {what} from 0 to {n - 1}")
    return int(v)


def page_list(app: App, args: dict[str, list[str]]) -> str:
    q = parse_query(args)
    return pages.list_page(app.store, q, list_traces(app.store, q), runs=bool(app.runs))


def page_trace(app: App, args: dict[str, list[str]]) -> str:
    return render_html(load_trace(app.store, _one(args, "id", ("id",))), max_content=app.max_content)


def page_compare(app: App, args: dict[str, list[str]]) -> str:
    if "pick" in args:  # the list's checkboxes
        picked = args["pick"]
        if set(args) != {"pick"} or len(picked) != 2:
            raise BrowseError(400, f"pick exactly two traces to compare ({len(picked)} picked)")
        a_id, b_id = picked
    else:
        a_id, b_id = _one(args, "a", ("a", "b")), _one(args, "b", ("a", "b"))
    sa, sb = summary_of(app.store, a_id), summary_of(app.store, b_id)
    c = compare(load_trace(app.store, a_id), load_trace(app.store, b_id))
    return pages.compare_page(c, sa, sb, runs=bool(app.runs))


def page_runs(app: App, args: dict[str, list[str]]) -> str:
    if args:
        raise BrowseError(400, "this page takes no parameters")
    return pages.runs_page(app.runs)


def page_run(app: App, args: dict[str, list[str]]) -> str:
    allowed = ("r", "it")
    k = _index(args, "r", allowed, len(app.runs), "a run number")
    run = app.runs[k]
    chosen = listing = None
    if "it" in args:
        chosen = _index(args, "it", allowed, len(run.iterations), "an iteration")
        listed: list[tuple[str, int, str, str | None]] = []  # kind, position, trace id or file, error
        for pos, (kind, path) in enumerate(_files(run, chosen)):
            try:  # a file still being written by a running training loop is listed, not fatal
                listed.append((kind, pos, load_run_trace(path).trace_id, None))
            except OrchestraceError as e:
                listed.append((kind, pos, path.name, f"{e.code}: {e.message}"))
        stored = stored_ids(app.store, [name for _, _, name, err in listed if err is None])
        listing = [
            pages.Listed(kind, pos, name, err is None and name in stored, err)
            for kind, pos, name, err in listed
        ]
    return pages.run_page(k, run, chosen, listing)


def _files(run: Run, number: int) -> list[tuple[str, Path]]:
    it = run.iterations[number]
    return [("training", p) for p in it.traces] + [("held-out", p) for p in it.held_out]


def page_run_trace(app: App, args: dict[str, list[str]]) -> str:
    allowed = ("r", "it", "f")
    run = app.runs[_index(args, "r", allowed, len(app.runs), "a run number")]
    it = _index(args, "it", allowed, len(run.iterations), "an iteration")
    files = _files(run, it)
    if not files:
        raise BrowseError(404, f"iteration {it} has no trace files")
    f = _index(args, "f", allowed, len(files), "a trace number")
    return render_html(load_run_trace(files[f][1]), max_content=app.max_content)


def page_pairs(app: App, args: dict[str, list[str]]) -> str:
    k = _index(args, "r", ("r",), len(app.runs), "a run number")
    run = app.runs[k]
    got = held_out_pairs(run)
    if got is None:
        raise BrowseError(404, "this run has fewer than two evaluated iterations with held-out runs")
    first, last, pairs = got
    files_a = [p for _, p in _files(run, first.number)]
    files_b = [p for _, p in _files(run, last.number)]
    rows = [
        (name, files_a.index(pa), side(load_run_trace(pa)), files_b.index(pb), side(load_run_trace(pb)))
        for name, pa, pb in pairs
    ]
    return pages.pairs_page(k, run, first.number, last.number, rows)


ROUTES: dict[str, Callable[[App, dict[str, list[str]]], str]] = {
    "/": page_list,
    "/index.html": page_list,
    "/trace": page_trace,
    "/compare": page_compare,
    "/runs": page_runs,
    "/run": page_run,
    "/run/trace": page_run_trace,
    "/run/pairs": page_pairs,
}


def parse_args(query: str) -> dict[str, list[str]]:
    """A query string as lists of values; bad percent-encoding or a part without ``=`` is a 400."""
    try:
        return parse_qs(
            query, keep_blank_values=True, strict_parsing=bool(query), errors="strict", max_num_fields=64
        )
    except (ValueError, UnicodeDecodeError) as e:
        raise BrowseError(400, f"malformed query string: {e}") from None


def make_app_server(app: App, port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for ``app`` (port 0: any free port, read it from ``server.server_address``)."""
    allowed: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if (self.headers.get("Host") or "").strip().lower() not in allowed:
                self._send(421, pages.error_page(421, "Host is not this server's address"))
                return
            try:
                url = urlsplit(self.path)
                body = app.route(url.path, parse_args(url.query))
                self._send(200, body)
            except BrowseError as e:
                self._send(e.status, pages.error_page(e.status, e.message, runs=bool(app.runs)))
            except OrchestraceError as e:  # a run folder's trace file that does not load, ...
                where = f" ({e.path})" if e.path else ""
                self._send(400, pages.error_page(400, f"{e.code}: {e.message}{where}", runs=bool(app.runs)))
            except Exception:  # noqa: BLE001 - a bug: logged here, never shown to the browser
                traceback.print_exc(file=sys.stderr)
                self._send(500, pages.error_page(500, "internal error (logged by the server)"))

        def do_POST(self) -> None:  # noqa: N802
            self._send(405, pages.error_page(405, "the browser only reads: GET"))

        do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST  # noqa: N815

        def _send(self, status: int, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Frame-Options", "DENY")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # quiet by default
            pass

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as e:  # the port is taken, the address is not this machine's, ...
        raise OrchestraceError("OT343", f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    server.daemon_threads = True
    port = server.server_address[1]
    allowed.update(allowed_hosts(host, port) | allowed_hosts("127.0.0.1", port))
    return server


def serve_in_thread(app: App, port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start serving in a daemon thread; returns (server, url). ``server.shutdown()`` stops it."""
    server = make_app_server(app, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, p = server.server_address[:2]
    return server, f"http://{host}:{p}/"


def ui_server(
    store: str,
    runs: list[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_content: int = 4000,
) -> tuple[ThreadingHTTPServer, App]:
    """Open the store (read-only) and the run folders, and bind the server; the caller serves."""
    from .data import open_store

    app = App(open_store(store), [read_run(r) for r in runs or []], max_content)
    return make_app_server(app, port, host), app
