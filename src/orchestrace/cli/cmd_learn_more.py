"""Wires the RetryStop, Delegate and Swarm commands into the ``train`` and ``eval`` groups."""

from __future__ import annotations

import typer

from . import learn_more_commands as more
from .cmd_learn import eval_app, train_app


def register(app: typer.Typer) -> None:
    for name, train, evaluate in (
        ("retry", more.train_retry_cmd, more.eval_retry_cmd),
        ("delegate", more.train_delegate_cmd, more.eval_delegate_cmd),
        ("swarm", more.train_swarm_cmd, more.eval_swarm_cmd),
    ):
        train_app.command(name)(train)
        eval_app.command(name)(evaluate)
