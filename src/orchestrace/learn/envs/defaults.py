"""The data of the registered environments, given as an object, a name or a file path.

``gymnasium.make(id)`` alone must give a working environment, so each environment that replays
data has an embedded default: StopVote an embedded bank family (``antonyms``), RetryStop the
shipped excerpt of Reflexion's HumanEval log (``humaneval-excerpt``), Delegate and its cascade the
shipped excerpt of RouteLLM's GSM8K outcomes (``gsm8k-excerpt``). A name of a full public data
set (``tasks="humaneval"``, ``data="mmlu"``) reads it from ``$ORCHESTRACE_DATA`` (or
``shared/data`` beside the checkout); the ``-excerpt`` names need nothing outside the package.
A path names a file: a bank (``.jsonl[.gz]``), or RetryStop tasks / Delegate outcomes in the
format of the shipped excerpts (``data/README.md``). A wrong value is an ``EnvArgumentError``
that names the environment and the argument.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson

from ...core.errors import BadInput, OrchestraceError
from ..datasets import RETRY_FAMILIES, ROUTE_SOURCES, RetryTask, RouteData, load_retry, load_route
from ..stopping.banks import DEFAULT_BANKS, Bank, load_bank

T = TypeVar("T")

DEFAULT_BANK = "antonyms"
DEFAULT_TASKS = "humaneval-excerpt"
DEFAULT_ROUTE = "gsm8k-excerpt"
EXCERPTS = {"humaneval-excerpt": "humaneval-excerpt.jsonl.gz", "gsm8k-excerpt": "gsm8k-excerpt.jsonl.gz"}


class EnvArgumentError(BadInput):
    """A data argument of an environment that is none of: the object, a known name, a readable
    file of the right format."""

    def __init__(self, env: str, arg: str, value: Any, why: str) -> None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        super().__init__("OT664", f"{env}: {arg}={shown} {why}")


def bank_arg(value: Bank | str | os.PathLike[str], env: str = "StopVote-v0") -> Bank:
    """A bank: the object, an embedded family name (``continents``) or a bank file."""
    if isinstance(value, Bank):
        return value
    if not isinstance(value, str | os.PathLike):
        raise EnvArgumentError(
            env, "bank", value, _expected("a Bank", DEFAULT_BANKS, "a bank file (.jsonl[.gz])")
        )
    try:
        return load_bank(os.fspath(value))
    except OrchestraceError as e:
        raise EnvArgumentError(env, "bank", value, f"cannot be read: {e.message}") from None


def tasks_arg(value: list[RetryTask] | str | os.PathLike[str], env: str = "RetryStop-v0") -> list[RetryTask]:
    """RetryStop tasks: the list, a family name (public data), an excerpt name or a tasks file."""
    if isinstance(value, list) and value and all(isinstance(t, RetryTask) for t in value):
        return value
    names = (*RETRY_FAMILIES, "game24-standard", DEFAULT_TASKS)
    if not isinstance(value, str | os.PathLike):
        raise EnvArgumentError(
            env, "tasks", value, _expected("a non-empty list of RetryTask", names, "a tasks file")
        )
    return _by_name_or_path(
        env, "tasks", value, names, "a tasks file", lambda f: _read_tasks(f, env, value), load_retry
    )


def route_arg(value: RouteData | str | os.PathLike[str], env: str = "Delegate-v0") -> RouteData:
    """Delegate outcomes: the object, a source name (public data), an excerpt name or a file."""
    if isinstance(value, RouteData):
        return value
    names = (*ROUTE_SOURCES, DEFAULT_ROUTE)
    if not isinstance(value, str | os.PathLike):
        raise EnvArgumentError(env, "data", value, _expected("a RouteData", names, "an outcomes file"))
    return _by_name_or_path(
        env, "data", value, names, "an outcomes file", lambda f: _read_route(f, env, value), load_route
    )


def _by_name_or_path(
    env: str,
    arg: str,
    value: str | os.PathLike[str],
    names: tuple[str, ...],
    file: str,
    read: Callable[[Any], T],
    load_public: Callable[[str], T],
) -> T:
    """An excerpt shipped with the package, a public data set by name, or a file of ``read``'s
    format; anything else is an error naming the argument."""
    text = os.fspath(value)
    if text in EXCERPTS:
        return read(resources.files(__package__) / "data" / EXCERPTS[text])
    if text in names:
        return _public(env, arg, value, lambda: load_public(text))
    if not os.path.isfile(text):
        raise EnvArgumentError(env, arg, value, _expected("a known name or a file", names, file))
    return read(text)


def _expected(what: str, names: tuple[str, ...], file: str) -> str:
    return f"is not {what}: expected that, a name ({', '.join(names)}) or the path of {file}"


def _public(env: str, arg: str, value: Any, load: Any) -> Any:
    """A full public data set by name; when it is not there, the error says so and names the
    shipped excerpt, which needs nothing."""
    try:
        return load()
    except OrchestraceError as e:
        excerpt = DEFAULT_TASKS if arg == "tasks" else DEFAULT_ROUTE
        raise EnvArgumentError(
            env, arg, value, f"reads the public data set: {e.message} (the shipped {excerpt!r} needs none)"
        ) from None


def _lines(source: Any, env: str, arg: str, value: Any) -> list[dict[str, Any]]:
    try:
        data = (Path(source) if isinstance(source, str) else source).read_bytes()
        if str(source).endswith(".gz"):
            data = gzip.decompress(data)
        rows = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    except (OSError, EOFError, orjson.JSONDecodeError) as e:
        raise EnvArgumentError(env, arg, value, f"cannot be read as JSONL: {e}") from None
    if not rows or not all(isinstance(r, dict) for r in rows):
        raise EnvArgumentError(env, arg, value, "holds no JSON object per line")
    return rows


def _read_tasks(source: Any, env: str, value: Any) -> list[RetryTask]:
    """One task per line: ``{"id", "family", "success": [bool], "content": [str], "cost": [number]}``."""
    out = []
    for n, r in enumerate(_lines(source, env, "tasks", value), 1):
        try:
            task = RetryTask(
                str(r["id"]), str(r["family"]), list(r["success"]), list(r["content"]), list(r["cost"])
            )
        except (KeyError, TypeError) as e:
            raise EnvArgumentError(env, "tasks", value, f"line {n}: not a task ({e})") from None
        if not (len(task.success) == len(task.content) == len(task.cost) > 0):
            raise EnvArgumentError(
                env, "tasks", value, f"line {n}: success, content and cost differ in length"
            )
        out.append(task)
    return out


def _read_route(source: Any, env: str, value: Any) -> RouteData:
    """A header line ``{"name", "models", "price_source"}``, then one query per line:
    ``{"id", "text", "group", "quality": [per model], "cost": [USD per model], "responses": [...]}``."""
    head, *rows = _lines(source, env, "data", value)
    try:
        models = [str(m) for m in head["models"]]
        quality = np.array([r["quality"] for r in rows], dtype=np.float64)
        cost = np.array([r["cost"] for r in rows], dtype=np.float64)
        responses = (
            [list(map(str, r["responses"])) for r in rows] if all("responses" in r for r in rows) else None
        )
        data = RouteData(
            str(head.get("name", "data")),
            [str(r["id"]) for r in rows],
            [str(r["text"]) for r in rows],
            [str(r.get("group", "")) for r in rows],
            models,
            quality,
            cost,
            dict(head.get("price_source") or {}),
            responses,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise EnvArgumentError(env, "data", value, f"is not an outcomes file ({e})") from None
    if not rows or quality.shape != (len(rows), len(models)) or cost.shape != quality.shape:
        raise EnvArgumentError(
            env, "data", value, "needs one quality and one cost per model on every query line"
        )
    return data


def route_lines(data: RouteData) -> list[bytes]:
    """``data`` in the file format ``route_arg`` reads (the shipped excerpt is written so)."""
    head = {"name": data.name, "models": data.models, "price_source": data.price_source}
    rows = [
        {
            "id": data.ids[i],
            "text": data.texts[i],
            "group": data.groups[i],
            "quality": data.quality[i].tolist(),
            "cost": data.cost[i].tolist(),
            **({"responses": data.responses[i]} if data.responses is not None else {}),
        }
        for i in range(len(data.ids))
    ]
    return [orjson.dumps(r) for r in (head, *rows)]
