"""A program's ``Setup`` is ``orchestrace.runtime.program.Setup``; the module programs imported it
from before (``runtime.examples.common``) still works, with a deprecation warning."""

from __future__ import annotations

import importlib
import sys

import pytest

from orchestrace.runtime.program import Setup


def test_old_import_path_warns_and_gives_the_same_setup() -> None:
    sys.modules.pop("orchestrace.runtime.examples.common", None)
    with pytest.warns(DeprecationWarning, match="orchestrace.runtime.program"):
        old = importlib.import_module("orchestrace.runtime.examples.common")
    assert old.Setup is Setup
