"""One self-contained HTML file: our template, our script, the trace as inert JSON data.

Safety: the trace is embedded in ``<script type="application/json">`` (never executed) with
``<``, ``>``, ``&`` and the JavaScript line separators escaped as ``\\uXXXX``, so no trace string
can close the element or form markup; the page reads it with ``JSON.parse`` and writes text only
through ``textContent`` and canvas ``fillText``. A Content-Security-Policy allows exactly our one
script and stylesheet (by hash) and nothing else: no network, no inline handlers, no ``eval``.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from ..core.model import Trace
from .payload import build_payload

_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def embed_json(obj: Any) -> str:
    """JSON safe inside an HTML script element: the characters that could end it are escaped.

    They can only occur inside JSON strings, where ``\\u003c`` decodes to the same text.
    """
    data = orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)
    for raw, esc in _ESCAPES:
        data = data.replace(raw, esc)
    return data.decode("utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def render_payload(payload: dict[str, Any]) -> str:
    """The page for an already built payload."""
    script = _asset("viewer.js")
    page = _asset("page.html")
    start, end = page.index("<style>") + len("<style>"), page.index("</style>")
    style = page[start:end]
    csp = (
        "default-src 'none'; "
        f"script-src '{_sha256(script)}'; style-src '{_sha256(style)}'; "
        "img-src data: blob:; base-uri 'none'; form-action 'none'"
    )
    head, _, tail = page.replace("__CSP__", csp).replace("__SCRIPT__", script).partition("__DATA__")
    return head + embed_json(payload) + tail  # data last: nothing is substituted inside it


def render_html(trace: Trace, *, max_content: int = 4000) -> str:
    """The self-contained viewer page of one trace."""
    return render_payload(build_payload(trace, max_content=max_content))


def write_html(trace: Trace, out: str | Path, *, max_content: int = 4000) -> Path:
    path = Path(out)
    path.write_text(render_html(trace, max_content=max_content), encoding="utf-8")
    return path
