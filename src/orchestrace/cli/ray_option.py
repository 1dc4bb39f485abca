"""The ``--ray [ADDRESS]`` option shared by every command that does bulk work (the executor it
selects is ``orchestrace.parallel``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from ..parallel import LOCAL

#: The ``--ray [ADDRESS]`` option for any command that does bulk work: ``--ray`` alone starts a
#: local loopback-only instance, ``--ray ADDRESS`` joins a cluster. Register the command with
#: ``app.command(name, cls=RayCommand)`` so the address may be left out, and pass the value on
#: as ``parallel_map(..., ray=value)``.
RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Run the bulk work as Ray tasks. Alone (last, or before another option): a local "
        'instance on loopback. With an address: "auto", HOST:PORT or ray://HOST:10001.',
    ),
]


class RayCommand(TyperCommand):
    """A typer command whose ``--ray`` option may be given without a value (meaning "local").

    Typer's parser has no optional-value options, so a bare ``--ray`` (last, or followed by
    another option) gets ``local`` inserted after it before parsing.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, a in enumerate(args):
            out.append(a)
            if a == "--":
                out.extend(args[i + 1 :])
                break
            if a == "--ray" and (i + 1 == len(args) or args[i + 1].startswith("-")):
                out.append(LOCAL)
        return super().parse_args(ctx, out)
