"""``orchestrace serve``: the gateway over HTTP (the standard library's ``ThreadingHTTPServer``,
HTTP/1.1 with keep-alive; one thread per connection, the calls themselves on the gateway's loop).

Routes (``<run>``: a run id; without one, the ``X-Orchestrace-Run`` header or the run ``default``):

- ``POST /v1/chat/completions``, ``POST /runs/<run>/v1/chat/completions``
- ``GET /v1/models``, ``GET /runs/<run>/v1/models``: the agents (or adapters) served
- ``POST /runs/<run>/end`` (optional JSON ``{"answer": "..."}``): close the run's trace
- ``POST /runs/<run>/agents-sdk/spans`` (``{"phase": "start"|"end", "span": {...}}``): an Agents
  SDK span (``spans.PostSpans`` sends them) whose tool calls and handoffs join the run's trace
- ``POST /runs/<run>/v1/traces``, ``POST /v1/traces``: OpenTelemetry spans (OTLP/HTTP, protobuf
  or JSON, as an ``OTLPSpanExporter`` sends them), merged into the run's trace as it ends
  (``otel``); without a run in the path or the header, each OTel trace goes to the run that
  answered its LLM spans; answered and refused in OTLP's shapes (``ExportTraceServiceResponse``,
  a ``google.rpc.Status``)

Safe by default: it listens on 127.0.0.1 unless told otherwise; a ``Host`` header that is not
this server's address gets a 421 (DNS rebinding, as ``view --serve``); a body is at most
``max_body`` bytes and must say its length (no chunked encoding); a prompt at most ``max_prompt_chars`` characters (and
the trainable model's token limit); at most ``max_concurrent`` calls are served at once (a call
waits up to ``slot_wait`` seconds for a slot, then gets a 429). Every error is OpenAI's error
shape; nothing a request carries is logged (``verbose`` logs method, path and status only).
"""

from __future__ import annotations

import re
import socket
import sys
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import orjson

from ...viewer.serve import allowed_hosts
from . import otel
from .protocol import GatewayError, models_body, new_id, parse_call, response_body, stream_events
from .service import Gateway

ROUTE = re.compile(r"^(?:/runs/(?P<run>[^/]+))?/v1/(?P<what>chat/completions|models)/?$")
END = re.compile(r"^/runs/(?P<run>[^/]+)/end/?$")
SPANS = re.compile(r"^/runs/(?P<run>[^/]+)/agents-sdk/spans/?$")
TRACES = re.compile(r"^(?:/runs/(?P<run>[^/]+))?/v1/traces/?$")
AGENT_HEADER = "X-Orchestrace-Agent"
RUN_HEADER = "X-Orchestrace-Run"
DEFAULT_RUN = "default"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Limits:
    max_body: int = 4 * 1024 * 1024
    max_prompt_chars: int = 200_000
    max_concurrent: int = 64
    slot_wait: float = 60.0


class GatewayServer(ThreadingHTTPServer):
    daemon_threads = True
    # connections the kernel completes before the server thread accepts them: socketserver's 5
    # dropped the others' SYNs, and a loaded machine (the accept thread waiting for the GIL while
    # a batch samples) held them past the client's connect timeout: 2 of 16 runs of a
    # train team --program iteration failed with "Connection error"
    request_queue_size = 256

    def __init__(
        self,
        gateway: Gateway,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: Limits | None = None,
        allow_hosts: tuple[str, ...] = (),
        verbose: bool = False,
    ) -> None:
        super().__init__((host, port), Handler)
        self.gateway = gateway
        self.limits = limits or Limits()
        self.slots = threading.BoundedSemaphore(self.limits.max_concurrent)
        self.allowed = allowed_hosts(host, self.server_address[1]) | {
            h.lower() for name in allow_hosts for h in (name, f"{name}:{self.server_address[1]}")
        }
        self.verbose = verbose

    def handle_error(self, request: object, client_address: object) -> None:
        """A client gone mid-answer is no error of ours; anything else: its type and source line,
        never socketserver's traceback (whose frames may hold a request's content)."""
        err = sys.exc_info()[1]
        if isinstance(err, ConnectionError) or err is None:
            return
        _internal(err)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: GatewayServer

    def setup(self) -> None:
        super().setup()
        # headers and body go out as two writes: without this, Nagle's algorithm holds the body
        # until the client's delayed ACK of the headers (about 40 ms per call on Linux)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # ------------------------------------------------------------------ output

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, e: GatewayError) -> None:
        self._send(e.status, e.body())

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a malformed request line or header, an unknown method) in
        OpenAI's shape, not its HTML page."""
        self.close_connection = True
        if code == HTTPStatus.NOT_IMPLEMENTED:  # http.server's answer to a method with no do_X
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, f"method {self.command} is not allowed here"
        if self.request_version == "HTTP/0.9":  # an unreadable request line: answer with headers anyway
            self.request_version = "HTTP/1.0"
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else "Error"
        self._send(code, GatewayError(code, message or phrase).body())

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:  # the request line (method, path, version) and status: no content
            sys.stderr.write(f"gateway: {format % args}\n")

    def log_error(self, format: str, *args: object) -> None:
        self.log_message(format, *args)

    # ------------------------------------------------------------------ input

    def _host_ok(self) -> bool:
        if (self.headers.get("Host") or "").strip().lower() in self.server.allowed:
            return True
        self.close_connection = True  # its body is not read: the connection cannot be reused
        self._error(GatewayError(421, "Host is not this server's address", code="misdirected_request"))
        return False

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise GatewayError(411, "send the body with a Content-Length (no chunked encoding)")
        raw = self.headers.get("Content-Length")
        if raw is None:  # HTTP/1.1: no length and no chunking is an empty body (curl -X POST)
            return b""
        try:
            n = int(raw)
        except ValueError:
            self.close_connection = True
            raise GatewayError(400, "Content-Length is not a number") from None
        if n < 0:
            self.close_connection = True
            raise GatewayError(400, "Content-Length is negative")
        if n > self.server.limits.max_body:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            raise GatewayError(413, f"the body has {n} bytes; at most {self.server.limits.max_body}")
        return self.rfile.read(n)

    # ------------------------------------------------------------------ routes

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        if not self._host_ok():
            return
        m = ROUTE.match(urlsplit(self.path).path)
        if m is None or m["what"] != "models":
            self._error(GatewayError(404, f"no route GET {urlsplit(self.path).path}", code="not_found"))
            return
        self._send(200, models_body(self.server.gateway.agent_names()))

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        if not self._host_ok():
            return
        path = urlsplit(self.path).path
        tr = TRACES.match(path)
        if tr is not None:
            self._traces(tr["run"])
            return
        try:
            body = self._body()
            m = ROUTE.match(path)
            if m is not None and m["what"] == "chat/completions":
                self._chat(m["run"], body)
                return
            e = END.match(path)
            if e is not None:
                self._end(e["run"], body)
                return
            sp = SPANS.match(path)
            if sp is not None:
                self._span(sp["run"], body)
                return
            raise GatewayError(404, f"no route POST {path}", code="not_found")
        except GatewayError as err:
            self._error(err)
        except Exception as err:  # a bug: answered as one, never as a traceback
            self._error(_internal(err))

    def _chat(self, run: str | None, body: bytes) -> None:
        gw = self.server.gateway
        call = parse_call(body, gw.defaults.max_tokens_cap)
        if sum(len(m["content"]) for m in call.messages) > self.server.limits.max_prompt_chars:
            raise GatewayError(
                400,
                f"the prompt is longer than {self.server.limits.max_prompt_chars} characters",
                param="messages",
                code="context_length_exceeded",
            )
        run_id = run or self.headers.get(RUN_HEADER) or DEFAULT_RUN
        agent = self.headers.get(AGENT_HEADER) or call.model
        if not self.server.slots.acquire(timeout=self.server.limits.slot_wait):
            raise GatewayError(
                429,
                f"{self.server.limits.max_concurrent} calls are being served; retry later",
                type="rate_limit_error",
                code="too_many_calls",
            )
        cid = new_id()
        try:
            out = gw.call(run_id, agent, call, cid)
        finally:
            self.server.slots.release()
        if call.stream:
            self._send(200, b"".join(stream_events(out, call, cid)), "text/event-stream")
        else:
            self._send(200, response_body(out, call, cid))

    def _traces(self, run: str | None) -> None:
        """OTLP/HTTP spans of a run; answers and errors in OTLP's shapes, in the request's encoding."""
        ctype = self.headers.get("Content-Type") or ""
        try:
            body = self._body()
            spans = otel.decode_request(
                body, ctype, self.headers.get("Content-Encoding") or "", self.server.limits.max_body
            )
            named = run or self.headers.get(RUN_HEADER)
            gw = self.server.gateway
            refused, why = gw.otel_spans(named, spans) if named else gw.otel_spans_of_any_run(spans)
            self._send(200, otel.response_body(ctype, refused, why), _otlp_type(ctype))
        except GatewayError as err:
            self._send(err.status, otel.error_body(ctype, err), _otlp_type(ctype))
        except Exception as err:  # a bug: answered as one, never as a traceback
            e = _internal(err)
            self._send(e.status, otel.error_body(ctype, e), _otlp_type(ctype))

    def _span(self, run: str, body: bytes) -> None:
        try:
            d = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise GatewayError(400, "the body is not JSON") from None
        if not isinstance(d, dict):
            raise GatewayError(400, 'a span is {"phase": "start" | "end", "span": {...}}')
        self.server.gateway.framework_span(run, d.get("phase"), d.get("span"))
        self._send(200, b"{}")

    def _end(self, run: str, body: bytes) -> None:
        answer = None
        if body.strip():
            try:
                d = orjson.loads(body)
            except orjson.JSONDecodeError:
                raise GatewayError(400, "the body is not JSON") from None
            if not isinstance(d, dict) or not isinstance(d.get("answer", ""), str | None):
                raise GatewayError(400, 'the body must be {"answer": "..."}', param="answer")
            answer = d.get("answer")
        path = self.server.gateway.finish_run(run, answer)
        self._send(200, orjson.dumps({"run": run, "trace": path}))


def _internal(err: Exception) -> GatewayError:
    """A bug, logged by its type and source line (never its message, which may quote a prompt)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "?"
    sys.stderr.write(f"gateway: internal error {type(err).__name__} at {where}\n")
    return GatewayError(500, f"internal error ({type(err).__name__})", type="server_error")


def _otlp_type(content_type: str) -> str:
    return otel.PROTOBUF if content_type.split(";", 1)[0].strip().lower() == otel.PROTOBUF else otel.JSON


def start_in_thread(server: GatewayServer) -> threading.Thread:
    # a short poll: shutdown() waits for the loop to notice (0.5 s by default, per server)
    t = threading.Thread(target=server.serve_forever, args=(0.05,), name="gateway-http", daemon=True)
    t.start()
    return t


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")
