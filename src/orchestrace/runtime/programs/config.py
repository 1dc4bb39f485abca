"""Reading a program's config (``run --set KEY=VALUE``, JSON values): each value checked against
what the program needs, OT604 naming the program and the key. ``int("abc")`` was an internal error,
``rounds=0`` an empty run that exited 0, ``early="false"`` true and ``words="hot"`` three words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.errors import OrchestraceError

ON_ERROR = ("continue", "fail")


def _bad(program: str, key: str, need: str, value: Any) -> OrchestraceError:
    return OrchestraceError("OT604", f"{program}: config {key!r} must be {need}, got {value!r:.80}")


def positive_int(config: dict[str, Any], key: str, default: int, program: str) -> int:
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise _bad(program, key, "a positive integer", v)
    return v


def text(config: dict[str, Any], key: str, default: str, program: str) -> str:
    v = config.get(key, default)
    if not isinstance(v, str) or not v.strip():
        raise _bad(program, key, "a non-empty string", v)
    return v


def flag(config: dict[str, Any], key: str, default: bool, program: str) -> bool:
    v = config.get(key, default)
    if not isinstance(v, bool):
        raise _bad(program, key, "true or false", v)
    return v


def choice(config: dict[str, Any], key: str, default: str, allowed: Sequence[str], program: str) -> str:
    v = config.get(key, default)
    if v not in allowed:
        raise _bad(program, key, f"one of {', '.join(allowed)}", v)
    return v


def words(config: dict[str, Any], key: str, default: Sequence[str], program: str) -> list[str]:
    v = config.get(key, list(default))
    if not isinstance(v, list) or not v or not all(isinstance(w, str) and w.strip() for w in v):
        raise _bad(program, key, "a non-empty list of non-empty strings", v)
    return v
