"""Deprecated (28 Nov 2026): ``Setup`` is ``orchestrace.runtime.program.Setup`` and the antonym
prompt and ``word`` are in ``orchestrace.runtime.examples.antonyms``; this module re-exports them
for programs written against it and will be removed."""

import warnings

from ..program import Setup
from .antonyms import ANTONYM_EXAMPLES, ANTONYM_FEWSHOT, ANTONYM_SHOTS, ANTONYM_SYSTEM, word

warnings.warn(
    "orchestrace.runtime.examples.common is deprecated: import Setup from orchestrace.runtime.program "
    "and the antonym prompt from orchestrace.runtime.examples.antonyms",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["ANTONYM_EXAMPLES", "ANTONYM_FEWSHOT", "ANTONYM_SHOTS", "ANTONYM_SYSTEM", "Setup", "word"]
