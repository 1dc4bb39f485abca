"""Deprecated (28 Nov 2026): this module trains nothing; the trainer sample streams are
``orchestrace.export.samples``. It re-exports them for code written against it and will be removed."""

import warnings

from .samples import (
    SAMPLE_TYPES,
    Sample,
    export_samples,
    export_trl,
    export_verl,
    samples,
    trl_replay,
    trl_row,
    verl_row,
)

warnings.warn(
    "orchestrace.export.trainer is deprecated: import from orchestrace.export.samples",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "SAMPLE_TYPES",
    "Sample",
    "export_samples",
    "export_trl",
    "export_verl",
    "samples",
    "trl_replay",
    "trl_row",
    "verl_row",
]
