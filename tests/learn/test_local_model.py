"""The offline SmolLM2-135M backend: KV-cache repetition gives seeded, reproducible samples."""

from __future__ import annotations

import pytest

from orchestrace.learn.stopping.families import family


@pytest.mark.slow
def test_local_model_samples_are_seeded_and_parse(capfd: pytest.CaptureFixture[str]) -> None:
    from orchestrace.runtime.backends.local import LocalModel

    m = LocalModel(threads=1)
    # transformers' advice to load in float32 is wrong for this model (bfloat16 is faster): not shown
    assert "weights packed" not in capfd.readouterr().err
    fam = family("countries")
    q = next(q for q in fam.questions if q.id == "city-paris")
    a = m.sample(fam.messages(q), 6, max_new_tokens=fam.max_new_tokens, temperature=0.7, seed=5)
    b = m.sample(fam.messages(q), 6, max_new_tokens=fam.max_new_tokens, temperature=0.7, seed=5)
    assert a == b and len(a) == 6
    assert sum(fam.canonical(x, q) == "france" for x in a) >= 3  # the model knows Paris
    text, tin, out = m.chat(fam.messages(q), max_new_tokens=8, temperature=0.0, seed=0)
    assert fam.canonical(text, q) == "france" and tin > 50 and 0 < len(out.ids) <= 8
