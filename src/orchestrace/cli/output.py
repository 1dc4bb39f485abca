"""What the commands print with: the consoles (wide when piped, so tables keep full ids) and numbers\nfor tables."""

from __future__ import annotations

from typing import Any

import orjson
from rich.console import Console


def _console(*, stderr: bool = False) -> Console:
    """A console that, when piped (not a terminal), is wide enough that tables keep full ids and
    headers instead of cutting them to 80 columns."""
    c = Console(stderr=stderr, soft_wrap=True)
    if not c.is_terminal:
        c.width = PIPED_WIDTH
    return c


PIPED_WIDTH = 10_000


console = _console()


console_err = _console(stderr=True)


def fmt_number(v: float, digits: int = 4) -> str:
    """A number for a table: an int exactly; a float to ``digits`` significant digits but never
    fewer than its integer digits (10002.0 is "10002", not "1e+04"; 1.3333 is "1.333"), up to 1e15."""
    if isinstance(v, int):
        return str(v)
    whole = len(str(int(abs(v)))) if abs(v) < 1e15 else 0
    return f"{v:.{max(digits, whole)}g}"


def json_document(obj: Any, option: int = orjson.OPT_INDENT_2) -> bytes:
    """``obj`` as one JSON document (and a newline). A file name that is not UTF-8 (a str with
    surrogate escapes, as the OS gives it) is written with its bytes escaped (``bad\\xff.json``):
    orjson refused it, and ``validate --format json`` exited 3 with no document."""
    try:
        return orjson.dumps(obj, option=option) + b"\n"
    except orjson.JSONEncodeError:
        return orjson.dumps(_utf8(obj), option=option) + b"\n"


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        try:
            raw = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate that no file name byte made
            raw = value.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_utf8(v) for v in value]
    return value
