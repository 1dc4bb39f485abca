"""What the commands print with: the consoles (wide when piped, so tables keep full ids) and numbers\nfor tables."""

from __future__ import annotations

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
