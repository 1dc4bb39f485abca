"""Plugins named in TOML or on the command line: ``"package.module:function"`` to a callable."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import OrchestraceError


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
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError, ValueError) as e:
        raise OrchestraceError(code, f"cannot import {what} {ref!r}: {e}") from None
