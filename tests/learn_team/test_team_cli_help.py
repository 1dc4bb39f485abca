"""train team --help names every credit method the trainer accepts (it listed six of seven)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.learn.team.config import TRAIN_METHODS


def test_credit_help_lists_every_method() -> None:
    r = CliRunner().invoke(app, ["train", "team", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    help_text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.output).split())
    credit = help_text[help_text.rindex("--credit") :]  # the options table, not the example
    credit = credit[: credit.index("--unit")]
    listed = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", credit))
    assert set(TRAIN_METHODS) <= listed, credit
