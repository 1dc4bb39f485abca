"""Errors a user can cause, each with a stable code and a location.

The CLI turns these into one readable line and an exit code; a traceback always means a bug.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Severity = Literal["error", "warning"]


class Finding(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One validation finding. ``pointer`` is a JSON pointer into the trace, ``line`` is 1-based."""

    code: str
    severity: Severity
    message: str
    pointer: str | None = None
    line: int | None = None
    path: str | None = None

    def where(self) -> str:
        """``path line N /pointer``; empty for a usage error tied to no input."""
        if self.path is None and self.line is None and not self.pointer:
            return ""
        parts = [self.path or "<input>"]
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.pointer:
            parts.append(self.pointer)
        return ":".join(parts[:1]) + ("" if len(parts) == 1 else " " + " ".join(parts[1:]))

    def __str__(self) -> str:
        where = self.where()
        return f"{where + ': ' if where else ''}{self.code} {self.severity}: {self.message}"


class OrchestraceError(Exception):
    """A user-facing error (bad input, bad usage); never a bug."""

    exit_code = 2

    def __init__(
        self,
        code: str,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        pointer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.line = line
        self.pointer = pointer

    def finding(self) -> Finding:
        return Finding(
            code=self.code,
            severity="error",
            message=self.message,
            pointer=self.pointer,
            line=self.line,
            path=self.path,
        )

    def __str__(self) -> str:
        return str(self.finding())

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled from its fields, not ``__init__``'s arguments, so that an error raised in a
        worker process or a Ray task reaches the caller as the same error."""
        return (_rebuild_error, (type(self), dict(self.__dict__)))


def _rebuild_error(cls: type[OrchestraceError], fields: dict[str, object]) -> OrchestraceError:
    e = cls.__new__(cls)
    Exception.__init__(e, fields["message"])
    e.__dict__.update(fields)
    return e


class BadInput(OrchestraceError):
    """The content of an input file is wrong (a bank, a policy, a trace that cannot be learned
    from), not the way the command was called: exit 1, as validate exits on a bad trace."""

    exit_code = 1


class LoadError(OrchestraceError):
    """A file could not be read (OT001: exit 2, like a usage error) or parsed as what it claims
    to be (bad input: exit 1, as validate reports it)."""

    @property  # type: ignore[override]
    def exit_code(self) -> int:
        return 2 if self.code == "OT001" else 1


class InvalidTrace(OrchestraceError):
    """A trace failed validation; ``findings`` lists everything that was found."""

    exit_code = 1

    def __init__(self, findings: list[Finding], path: str | None = None) -> None:
        first = next((f for f in findings if f.severity == "error"), findings[0])
        super().__init__(first.code, first.message, path=path, line=first.line, pointer=first.pointer)
        self.findings = findings
