"""``bank build`` records what it samples as vote traces, and the bank is what they read back as."""

from __future__ import annotations

import glob
import re
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


def _damaged(tmp_path: Path, damage) -> str:
    """A bank written as vote traces, the first one's records edited by ``damage(records)``."""
    import json

    from orchestrace.learn.stopping.banks import Bank, BankQuestion
    from orchestrace.learn.stopping.traces import bank_to_traces

    qs = [BankQuestion(f"q{i}", f"Q{i}?", "a", ["a", "b", "a"], cost=[1.0, 2.0, 1.0]) for i in range(3)]
    paths = bank_to_traces(Bank("small", qs), str(tmp_path / "t"))
    recs = [json.loads(line) for line in Path(paths[0]).read_text().splitlines()]
    damage(recs)
    Path(paths[0]).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return paths[0]


def _config(recs: list) -> dict:
    return recs[-1]["metadata"]["runtime"]["config"]  # the closing update record: it wins


def _first_answer(recs: list) -> dict:
    return next(r for r in recs if r.get("type") == "return")["attrs"]


@pytest.mark.parametrize(
    ("damage", "pointer", "said"),
    [
        # internal errors (exit 3): float("abc"), float(None), an unhashable dict or list
        (lambda r: _first_answer(r).update(sample_cost="abc"), "/events/1/attrs/sample_cost", "finite number >= 0, got 'abc'"),
        (lambda r: _first_answer(r).update(sample_cost=None), "/events/1/attrs/sample_cost", "got None"),
        (lambda r: _first_answer(r).update(answer={"a": 1}), "/events/1/attrs/answer", "a string or null"),
        (lambda r: _config(r).update(family=["x"]), "/metadata/runtime/config/family", "family must be a string"),
        (lambda r: r[-1]["metadata"]["runtime"].update(config=[1]), "/metadata/runtime/config", "must be an object"),
        # read on silently into the bank: a cost of -5, a gold of 5, bool("no") as a right answer
        (lambda r: _first_answer(r).update(sample_cost=-5), "/events/1/attrs/sample_cost", "got -5"),
        (lambda r: _config(r).update(gold=5), "/metadata/runtime/config/gold", "gold must be a string, got 5"),
        (lambda r: _first_answer(r).update(correct="no"), "/events/1/attrs/correct", "true, false or null"),
    ],
)  # fmt: skip
def test_a_vote_run_with_values_of_the_wrong_type_is_bad_input(tmp_path: Path, damage, pointer, said) -> None:
    bad = _damaged(tmp_path, damage)
    with pytest.raises(OrchestraceError) as e:
        bank_from_traces(str(tmp_path / "t" / "*.events.jsonl"))
    assert e.value.code == "OT614" and e.value.exit_code == 1 and said in e.value.message
    assert (e.value.path, e.value.pointer) == (bad, pointer)


def test_a_vote_run_of_an_unknown_family_names_its_file(tmp_path: Path) -> None:
    bad = _damaged(tmp_path, lambda r: _config(r).update(family="nosuch"))
    with pytest.raises(OrchestraceError, match="unknown task family 'nosuch'") as e:
        bank_from_traces(str(tmp_path / "t" / "*.events.jsonl"))
    assert e.value.path == bad


def test_a_bank_of_failed_calls_is_an_error_not_a_bank_of_nulls(tmp_path: Path) -> None:
    """bank build against a server that is not there wrote '238 questions x 40 samples' of null
    answers and exited 0; every call of a question failing is now OT619 with the cause."""
    from orchestrace.runtime.backends.base import BackendError

    class Down:
        name = "down"

        async def chat(self, req):
            raise BackendError("connection", "nobody listens")

    with pytest.raises(OrchestraceError, match="every sample of a question failed: .*nobody listens") as e:
        build_bank(
            "antonyms", samples=3, limit=2, model=BackendSampler(Down(), "down"), traces_dir=str(tmp_path)
        )
    assert e.value.code == "OT619"


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"limit": -1}, "got 3 and -1"),  # questions[:-1]: every question but the last
        ({"samples": 0}, "got 0 and 2"),
        ({"temperature": float("nan")}, "--temperature must be a finite number >= 0, got nan"),
    ],
)
def test_bank_build_numbers_it_cannot_use_are_refused(kw, said) -> None:
    args = {"samples": 3, "limit": 2, "model": _sampler(), **kw}
    with pytest.raises(OrchestraceError, match=re.escape(said)) as e:
        build_bank("antonyms", **args)
    assert e.value.code == "OT631"
