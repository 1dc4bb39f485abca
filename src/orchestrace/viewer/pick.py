"""Which trace of a file or store the viewer shows: by position or by id, and whether there are
others, so the user learns that a corpus holds more than the page shows."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import OrchestraceError
from ..core.model import Trace


@dataclass(frozen=True)
class Picked:
    trace: Trace
    position: int  # 0-based, in file (or store) order
    more: bool  # the input holds at least one other trace


def pick_trace(path: str, *, index: int | None = None, trace_id: str | None = None) -> Picked:
    """The trace at ``index`` (default 0) or with ``trace_id``; reads one trace past it to know
    whether there are others, not the whole corpus."""
    from ..store import traces_of

    if index is not None and trace_id is not None:
        raise OrchestraceError("OT010", "give --index or --trace, not both")
    if index is not None and index < 0:
        raise OrchestraceError("OT010", f"--index must be >= 0, got {index}")
    chosen: Trace | None = None
    position = -1
    seen: list[str] = []
    for k, tr in enumerate(traces_of(path)):
        if chosen is not None:
            return Picked(chosen, position, more=True)
        hit = tr.trace_id == trace_id if trace_id is not None else k == (index or 0)
        if hit:
            chosen, position = tr, k
        elif len(seen) < 5:
            seen.append(tr.trace_id)
    if chosen is not None:
        return Picked(chosen, position, more=position > 0)
    if trace_id is not None:
        listed = ", ".join(seen) + (", ..." if len(seen) == 5 else "")
        raise OrchestraceError(
            "OT010", f"no trace with id {trace_id!r} (ids here: {listed or 'none'})", path=path
        )
    raise OrchestraceError("OT010", f"the input holds fewer than {(index or 0) + 1} trace(s)", path=path)
