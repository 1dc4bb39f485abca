"""The limits every input must respect, checked in one place (finding code OT008).

A trace that validates must be processable by every command: analysis sums token counts in
int64, DuckDB stores them as BIGINT, JSON writers refuse deep nesting, and the two JSON parsers
we use disagree past 64-bit integers (orjson turns them into floats, msgspec keeps them exact).
So the rules are stated on the JSON text and enforced before anything else reads a value:

- integers: within signed 64-bit, ``-2**63 .. 2**63 - 1`` (a wider integer is an error, never
  rounded to a float); token counts must also sum to at most ``2**63 - 1`` per trace;
- nesting: at most ``MAX_DEPTH`` levels of arrays/objects in a document;
- strings: at most ``MAX_STRING_CHARS`` characters each (keys included);
- float totals: ``cost_usd`` and ``t_end`` summed over a trace's events stay finite in float64
  (``t_end`` bounds every summed duration), so no cost or serial work becomes infinity or null.

The checks cost little on ordinary input: an integer of 19 or more digits cannot hide from a
scan of the raw bytes (``needs_exact_check``), and only a document that trips it is decoded
exactly and walked (``check_text``). Nesting and string sizes are bounded by the schema
everywhere except the free-form ``attrs`` and ``metadata`` and the string fields, which
validation checks (``check_value``); foreign logs are walked record by record as importers
read them.
"""

from __future__ import annotations

import math
import re
from functools import partial
from operator import is_not
from typing import Any

import msgspec
import numpy as np

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_DEPTH = 64
MAX_STRING_CHARS = 64 * 1024 * 1024

_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))  # digits -> "0", the rest -> " "
_LONG_INT = b"0" * 19  # 2**63 has 19 digits; every shorter integer fits
_BOUNDARY = re.compile(rb'(?<!\\)"')  # a quote no backslash escapes
_LONG_NUMBER = re.compile(rb"[:,\[][ \t\n\r]*-?[0-9]{19}")  # a number where JSON puts values
_LONG_FIRST = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\n\r]*-?[0-9]{19}")  # a document that is one


def needs_exact_check(data: bytes) -> bool:
    """True when the text may hold an integer past 64 bits: a run of 19 or more digits where a
    JSON number can start (at the start, or after ``:``, ``,`` or ``[`` and blanks). Runs
    elsewhere are inside strings (hex digests hold some). False proves the text holds none."""
    if not _has_digit_run(data):
        return False
    return _LONG_NUMBER.search(data) is not None or _LONG_FIRST.match(data) is not None


_SMALL = 16 << 10  # below this, one translate costs less than the array calls
_BLOCK = 64 << 10  # the masks of one block stay in the cache


def _has_digit_run(data: bytes) -> bool:
    """Does ``data`` hold 19 ASCII digits in a row? Vectorised for all but small texts: the digit
    mask ANDed with itself shifted by 1, 2, 4, 8 and 3 places is true where such a run starts
    (2, 4, 8, 16, then 19 digits), block by block, each block reaching 18 bytes into the next."""
    n = len(data)
    if n < _SMALL:
        return _LONG_INT in data.translate(_DIGITS)
    codes = np.frombuffer(data, np.uint8)
    for lo in range(0, n - 18, _BLOCK):
        m = codes[lo : lo + _BLOCK + 18] - 48 < 10
        m = m[:-1] & m[1:]
        m = m[:-2] & m[2:]
        m = m[:-4] & m[4:]
        m = m[:-8] & m[8:]
        if (m[:-3] & m[3:]).any():
            return True
    return False


def may_hold_long_string(data: bytes) -> bool:
    """True when the JSON text may hold a string (or key) of more than ``MAX_STRING_CHARS``
    characters; False proves it holds none. Inside a string every quote is escaped, so such a
    string leaves more than that many bytes without a quote that follows no backslash, and so
    covers a whole aligned window of half that size: a text with such a quote in every window
    holds none. A few regex searches, however large the text."""
    if len(data) <= MAX_STRING_CHARS:
        return False
    half = MAX_STRING_CHARS // 2
    return not all(_BOUNDARY.search(data, lo, lo + half) for lo in range(0, len(data), half))


class LimitViolation(msgspec.Struct, frozen=True):
    pointer: str
    message: str


def check_value(value: Any, pointer: str = "", depth: int = 0) -> LimitViolation | None:
    """The first value of ``value`` (a decoded JSON tree) that breaks a limit, or None.

    Iterative, so a tree deeper than Python's recursion limit is reported, not crashed on.
    Clean trees (nearly all) take one walk that builds no pointers; only a tree that breaks a
    limit is walked again to say where.
    """
    if (type(value) is dict or type(value) is list) and _within_limits(value, depth):
        return None
    return _first_violation(value, pointer, depth)


def _within_limits(value: dict[str, Any] | list[Any], depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        v, d = stack.pop()
        if d >= MAX_DEPTH:
            return False
        if type(v) is dict:
            if v and max(map(len, v)) > MAX_STRING_CHARS:
                return False
            v = v.values()
        for x in v:
            t = type(x)
            if t is str:
                if len(x) > MAX_STRING_CHARS:
                    return False
            elif t is int:
                if not INT64_MIN <= x <= INT64_MAX:
                    return False
            elif t is dict or t is list:
                stack.append((x, d + 1))
    return True


def _first_violation(value: Any, pointer: str, depth: int) -> LimitViolation | None:
    stack: list[tuple[str, Any, int]] = [(pointer, value, depth)]
    while stack:
        ptr, v, d = stack.pop()
        t = type(v)
        if t is int:
            if not INT64_MIN <= v <= INT64_MAX:
                return LimitViolation(ptr, f"integer {_digits(v)} is outside the signed 64-bit range")
        elif t is str:
            if len(v) > MAX_STRING_CHARS:
                return LimitViolation(ptr, f"string of {len(v):,} characters is over the limit")
        elif t is dict or t is list:
            if d >= MAX_DEPTH:
                return LimitViolation(ptr, f"nested deeper than {MAX_DEPTH} levels of arrays/objects")
            if t is dict:
                for k, x in v.items():
                    if len(k) > MAX_STRING_CHARS:
                        return LimitViolation(ptr, f"key of {len(k):,} characters is over the limit")
                    stack.append((f"{ptr}/{_esc(k)}", x, d + 1))
            else:
                stack.extend((f"{ptr}/{i}", x, d + 1) for i, x in enumerate(v))
    return None


def check_text(data: bytes) -> LimitViolation | None:
    """Exact limit check of one JSON document's text (call only when ``needs_exact_check``).

    msgspec decodes integers exactly, whatever their size; a document too deep for it to
    decode is past the limit by far.
    """
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        return LimitViolation("", f"nested deeper than {MAX_DEPTH} levels of arrays/objects")
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None  # not JSON: the parser's own error says where
    return check_value(value)


#: event fields summed per trace in float64 (what the sum becomes): the sum must stay finite
FLOAT_TOTALS = {"cost_usd": "the trace's cost", "t_end": "summed durations (serial work)"}


def float_total(vals: list[Any]) -> float:
    """Sum of the finite numbers among ``vals`` (other values are type findings already);
    infinite when the sum overflows float64. C speed when every value is a number or None."""
    try:
        total = sum(filter(partial(is_not, None), vals))
        if math.isfinite(total):
            return float(total)
    except TypeError:
        pass
    return float(sum(v for v in vals if type(v) in (int, float) and math.isfinite(v)))


def _digits(v: int) -> str:
    if abs(v) < 10**40:
        return str(v)
    text = str(abs(v))
    return f"{'-' if v < 0 else ''}{text[:12]}... ({len(text)} digits)"


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


LIMITS_DOC = (
    f"integers within signed 64-bit ({INT64_MIN}..{INT64_MAX}); nesting at most {MAX_DEPTH} levels; "
    f"strings at most {MAX_STRING_CHARS:,} characters; cost_usd and t_end sum to a finite float per trace"
)
