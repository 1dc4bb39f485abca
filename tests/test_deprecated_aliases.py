"""Modules renamed for what they hold keep their old import path, with a deprecation warning:
``runtime.examples.common`` (``Setup`` is ``runtime.programs.Setup``) and ``export.trainer`` (it
trains nothing: ``export.samples``)."""

from __future__ import annotations

import importlib
import sys

import pytest

from orchestrace.export import samples
from orchestrace.runtime.programs import Setup


def _import_fresh(name: str) -> object:
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def test_old_program_module_warns_and_gives_the_same_setup() -> None:
    with pytest.warns(DeprecationWarning, match="orchestrace.runtime.programs"):
        old = _import_fresh("orchestrace.runtime.examples.common")
    assert old.Setup is Setup


def test_old_trainer_export_module_warns_and_gives_the_same_functions() -> None:
    with pytest.warns(DeprecationWarning, match="orchestrace.export.samples"):
        old = _import_fresh("orchestrace.export.trainer")
    assert old.trl_replay is samples.trl_replay and old.export_trl is samples.export_trl
