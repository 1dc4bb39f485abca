"""Plugins named in TOML or on the command line: ``"package.module:function"`` to a callable."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .errors import OrchestraceError


def import_user_module(name: str) -> ModuleType:
    """``importlib.import_module`` of a user's module (a hook, a program): a module that fails
    while it is imported (a SyntaxError, an exception it raises, ``sys.exit``) is the user's code
    failing, so an ImportError saying what happened; it was an internal error of orchestrace (exit 3)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise
    except (Exception, SystemExit) as e:
        raise ImportError(f"{type(e).__name__} while importing it: {e}") from None


def resolve(
    ref: str | Callable[..., Any] | None, *, what: str = "reward hook", code: str = "OT401"
) -> Callable[..., Any] | None:
    """A hook given as a callable or as ``"package.module:function"`` (the TOML and CLI form)."""
    if ref is None or callable(ref):
        return ref
    mod, _, fn = ref.partition(":")
    if not fn:
        raise OrchestraceError(code, f"{what} must look like package.module:function, got {ref!r}")
    try:
        found = getattr(import_user_module(mod), fn)
    except (ImportError, AttributeError, ValueError) as e:
        raise OrchestraceError(code, f"cannot import {what} {ref!r}: {e}") from None
    if not callable(found):
        raise OrchestraceError(code, f"{what} {ref!r} is a {type(found).__name__}, not a function")
    return NamedHook(found, ref, what, code)


class NamedHook:
    """A hook named in TOML or on the command line. What it raises is the user's code failing: an
    OrchestraceError that names the hook (exit 2), where it was an internal error of orchestrace
    (exit 3, "a bug in orchestrace, not in your input"). Picklable when the function is."""

    def __init__(self, fn: Callable[..., Any], ref: str, what: str, code: str) -> None:
        self.fn, self.ref, self.what, self.code = fn, ref, what, code

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.fn(*args, **kwargs)
        except OrchestraceError:
            raise
        except Exception as e:
            raise OrchestraceError(
                self.code, f"{self.what} {self.ref!r} failed: {type(e).__name__}: {e}"
            ) from None


def hook_number(value: Any, hook: Any, trace_id: str, code: str) -> float:
    """A hook's result as a finite float; OrchestraceError naming the hook for anything else."""
    if isinstance(value, bool | int | float) and math.isfinite(value):
        return float(value)
    name = hook.ref if isinstance(hook, NamedHook) else getattr(hook, "__name__", repr(hook))
    raise OrchestraceError(
        code, f"{name!r} returned {value!r:.80} for trace {trace_id!r}: expected a finite number"
    )
