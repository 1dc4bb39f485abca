"""Foreign values as a trace holds them: content as its hash (privacy: text is kept, redacted, only\nwhen the caller asks), timestamps as seconds, objects, lists, integers and counts read without trusting\nthe log."""

from __future__ import annotations

import hashlib
from datetime import datetime
from functools import lru_cache
from typing import Any

import orjson

from ..core.limits import INT64_MAX, INT64_MIN
from .reading import ImportStats

# ---------------------------------------------------------------- privacy


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def as_text(value: Any) -> str:
    """A foreign content value (string, block list, object) as one string, deterministically."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in value):
        return "\n".join(str(b.get("text", "")) for b in value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:  # nested past orjson's writer, or an int past 64 bits
        return f"[{type(value).__name__} too deep or too large to keep as text]"


# ---------------------------------------------------------------- time


@lru_cache(maxsize=65536)
def parse_ts(value: str) -> float | None:
    """ISO-8601 timestamp -> POSIX seconds; None when unparseable."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError, TypeError):
        return None


# ---------------------------------------------------------------- foreign values

# Foreign logs hold whatever their writers (or attackers) put there: each value is read through
# one of these, so a wrong type degrades to "absent" (and is counted) instead of a crash.


def as_obj(value: Any) -> dict[str, Any]:
    """A value that should be a JSON object; anything else reads as an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A value that should be a JSON array; anything else reads as an empty one."""
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """An int64 from an int, an integral float or a decimal string (OTLP writes int64 as
    strings); None for anything else, a bool or a number past 64 bits."""
    if isinstance(value, str):
        text = value.strip()
        if not (text.lstrip("-").isdigit() and text.isascii() and len(text) <= 20):
            return None
        value = int(text)
    elif type(value) is float and value.is_integer() and abs(value) <= 2**63:
        value = int(value)
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    return None


def as_count(value: Any, stats: ImportStats | None = None, what: str = "count") -> int:
    """A count (tokens, turns) as a non-negative int64 (see ``as_int``). Anything else is 0,
    noted in ``stats.bad_values[what]`` so the trace's metadata says what was not read."""
    n = as_int(value)
    if n is not None and n >= 0:
        return n
    if value is not None and stats is not None:
        stats.bad_values[what] += 1
    return 0


def ts_of(value: Any) -> float | None:
    if isinstance(value, str):
        return parse_ts(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
