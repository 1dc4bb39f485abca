"""Deprecated (28 Nov 2026): ``Setup`` is ``orchestrace.runtime.programs.Setup`` and the antonym
prompt and ``word`` are in ``orchestrace.runtime.programs.antonyms``; this module re-exports them
for programs written against it and will be removed."""

import warnings

from ..programs import Setup
from ..programs.antonyms import ANTONYM_EXAMPLES, ANTONYM_FEWSHOT, ANTONYM_SHOTS, ANTONYM_SYSTEM, word

warnings.warn(
    "orchestrace.runtime.examples.common is deprecated: import Setup from orchestrace.runtime.programs "
    "and the antonym prompt from orchestrace.runtime.programs.antonyms",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["ANTONYM_EXAMPLES", "ANTONYM_FEWSHOT", "ANTONYM_SHOTS", "ANTONYM_SYSTEM", "Setup", "word"]
