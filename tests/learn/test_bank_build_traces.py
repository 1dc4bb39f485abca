"""``bank build`` records what it samples as vote traces, and the bank is what they read back as."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load_one
from orchestrace.core.validate import validate_path
from orchestrace.learn.stopping.families import family
from orchestrace.learn.stopping.sampling import BackendSampler, build_bank
from orchestrace.learn.stopping.traces import bank_from_traces, check_traces, episode_from_trace
from orchestrace.runtime.backends.scripted import ScriptedBackend

#: raw model texts: an answer with trailing words and capitals, an empty (null) sample, punctuation
TEXTS = ["Cold", "cold.", "Warm weather\nmore", "", "the cool", "hot"]


def _sampler() -> BackendSampler:
    return BackendSampler(ScriptedBackend(choices=TEXTS, seed=3), "scripted")


def test_built_bank_is_the_view_over_its_traces(tmp_path: Path) -> None:
    d = str(tmp_path / "traces")
    bank = build_bank("antonyms", samples=7, limit=5, seed=1, model=_sampler(), traces_dir=d)
    plain = build_bank("antonyms", samples=7, limit=5, seed=1, model=_sampler())
    # recording changes nothing: the same questions, samples and order as sampling without traces
    assert [q.to_json() for q in bank.questions] == [q.to_json() for q in plain.questions]
    assert bank.meta == plain.meta and bank.name == plain.name == "antonyms"
    assert any(None in q.samples for q in bank.questions), "the empty text is a null sample"
    paths = sorted(glob.glob(f"{d}/*.events.jsonl"))
    assert len(paths) == 5 and all(validate_path(p).valid for p in paths)
    back = bank_from_traces(f"{d}/*.events.jsonl")
    assert [q.to_json() for q in back.questions] == [q.to_json() for q in bank.questions]
    # the traces keep what the model said (raw text) and how it was asked (prompt, seed, model)
    fam = family("antonyms")
    tr = load_one(paths[0])
    ep = episode_from_trace(tr, paths[0])
    q = next(q for q in fam.questions if q.id == ep.question_id)
    rets = [e for e in tr.events if e.type == "return"]
    texts = {e.content or "" for p in paths for e in load_one(p).events if e.type == "return"}
    assert texts == set(TEXTS)  # every raw text, multi-line and empty ones included
    assert [fam.canonical(e.content or "", q) for e in rets] == ep.answers
    cfg = tr.metadata["runtime"]["config"]
    assert cfg["messages"] == fam.messages(q) and cfg["model"] == "scripted" and cfg["family"] == "antonyms"


def test_an_invalid_recorded_trace_is_named(tmp_path: Path) -> None:
    d = tmp_path / "t"
    build_bank("antonyms", samples=3, limit=2, model=_sampler(), traces_dir=str(d))
    bad = sorted(d.glob("*.events.jsonl"))[1]
    bad.write_text(bad.read_text().replace('"type":"return"', '"type":"no_such_type"', 1))
    with pytest.raises(OrchestraceError) as e:
        check_traces(sorted(map(str, d.glob("*.events.jsonl"))))
    assert e.value.code == "OT614" and str(bad) in str(e.value)
