"""Bank files: format, loader errors, embedded banks, answer canonicalisation."""

from __future__ import annotations

import gzip

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.stopping.banks import (
    Bank,
    BankQuestion,
    default_bank,
    load_bank,
    one_sample_accuracy,
    save_bank,
)
from orchestrace.learn.stopping.families import FAMILIES


def test_round_trip(tmp_path) -> None:
    b = Bank(
        "x", [BankQuestion("a", "q?", None, ["1", None, "2"], correct=[True, False, False], cost=[1, 2, 0.5])]
    )
    for name in ("b.jsonl", "b.jsonl.gz"):
        save_bank(b, str(tmp_path / name))
        back = load_bank(str(tmp_path / name))
        assert back.questions[0].to_json() == b.questions[0].to_json()
    q = back.questions[0]
    assert q.is_correct(0) and not q.is_correct(1) and not q.is_correct(-1)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"id": "a", "question": "q"}', "missing field 'samples'"),
        ('{"id": "a", "question": "q", "samples": [1]}', "/samples/0"),
        ('{"id": "a", "question": "q", "samples": []}', "empty"),
        ('{"id": "a", "question": "q", "samples": ["x"], "correct": [1]}', "booleans"),
        ('{"id": "a", "question": "q", "samples": ["x"], "cost": [-1]}', "/cost/0"),
        ('{"id": "a", "question": "q", "samples": ["x"], "extra": 1}', "unknown field"),
        ("[1, 2]", "JSON object"),
        ("{oops", "not JSON"),
    ],
)
def test_loader_errors_name_file_line_and_field(tmp_path, line: str, needle: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "ok", "question": "q", "samples": ["x"]}\n' + line + "\n")
    with pytest.raises(OrchestraceError) as e:
        load_bank(str(p))
    assert needle in str(e.value) and "line 2" in str(e.value) and "bad.jsonl" in str(e.value)


def test_duplicate_ids_and_bad_gzip(tmp_path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "a", "question": "q", "samples": ["x"]}\n' * 2)
    with pytest.raises(OrchestraceError, match="duplicate id"):
        load_bank(str(p))
    g = tmp_path / "g.jsonl.gz"
    g.write_bytes(gzip.compress(b"{}")[:-6])
    with pytest.raises(OrchestraceError):
        load_bank(str(g))
    with pytest.raises(OrchestraceError):
        load_bank(str(tmp_path / "nope.jsonl"))


def test_a_gzip_damaged_inside_is_ot007(tmp_path) -> None:
    # damage past the header: zlib.error, not OSError, was an internal error (exit 3)
    data = bytearray(
        gzip.compress(b"".join(b'{"id": "q%d", "question": "q", "samples": ["x"]}\n' % i for i in range(300)))
    )
    data[len(data) // 2] ^= 0xFF
    data[len(data) // 2 + 1] ^= 0xFF
    g = tmp_path / "g.jsonl.gz"
    g.write_bytes(bytes(data))
    with pytest.raises(OrchestraceError, match="corrupt gzip stream") as e:
        load_bank(str(g))
    assert e.value.code == "OT007" and e.value.path == str(g)


def test_calibrating_to_a_bank_of_null_samples_is_refused(tmp_path) -> None:
    from orchestrace.learn.stopping.banks import calibrate

    p = tmp_path / "nulls.jsonl"
    p.write_text('{"id": "a", "question": "q", "samples": [null, null]}\n')
    # bank info printed SynthParams(a=nan, b=nan, ...) after numpy's "Mean of empty slice"
    with pytest.raises(OrchestraceError, match="every sample of every question is null") as e:
        calibrate(load_bank(str(p)))
    assert e.value.code == "OT610" and e.value.path == str(p)


def test_embedded_banks_are_real_samples() -> None:
    for name in ("antonyms", "countries"):
        b = default_bank(name)
        assert len(b) >= 20 and b.min_samples >= 40
        assert all(q.gold for q in b.questions)
        assert load_bank(name).questions[0].id == b.questions[0].id


def test_canonicalisation_maps_aliases() -> None:
    ant = FAMILIES["antonyms"]
    q = next(q for q in ant.questions if q.id == "ant-big")
    assert ant.canonical(" Small.\nmore", q) == "small"
    assert ant.canonical("Tiny", q) == "small"  # accepted synonym counts as gold
    assert ant.canonical("  ", q) is None
    cty = FAMILIES["countries"]
    q = next(q for q in cty.questions if q.id == "city-new-york")
    assert cty.canonical("The United States of America.", q) == "united states"
    assert cty.canonical("USA", q) == "united states"
    assert cty.canonical("Canada", q) == "canada"


def test_one_sample_accuracy_is_the_mean_over_every_sample() -> None:
    """q1 has 3 of 4 samples right, q2 1 of 4 (only its first): one sample is right with
    probability (0.75 + 0.25) / 2 = 0.5; the first sample alone would say 1.0."""
    b = Bank(
        "x",
        [
            BankQuestion("q1", "?", "a", ["a", "b", "a", "a"]),
            BankQuestion("q2", "?", "a", ["a", "b", None, "c"]),
        ],
    )
    assert one_sample_accuracy(b) == 0.5
    assert one_sample_accuracy(b, 2) == 0.5  # (1/2 + 1/2) / 2
    assert one_sample_accuracy(b, 1) == 1.0


def test_a_synthetic_bank_of_no_question_or_a_negative_seed_is_refused() -> None:
    from orchestrace.learn.stopping.banks import synthetic_bank

    # bank synth -n -5 wrote an empty file and "wrote -5 synthetic questions"; --seed -1 was numpy's
    # ValueError (exit 3)
    for kw, said in (
        ({"n": -5}, "at least one question, got -5"),
        ({"n": 3, "seed": -1}, "seed must be >= 0"),
    ):
        with pytest.raises(OrchestraceError, match=said) as e:
            synthetic_bank(**kw)
        assert e.value.code == "OT610"


def test_eval_stop_with_a_budget_below_two_is_refused() -> None:
    from orchestrace.learn.stopping.training import eval_stop

    with pytest.raises(OrchestraceError, match="--budget must be >= 2 samples, got 0") as e:  # IndexError
        eval_stop("antonyms", budget=0)
    assert e.value.code == "OT631"


def test_a_bank_with_a_byte_order_mark_is_read(tmp_path) -> None:
    # docs/input-limits.md: one UTF-8 BOM is accepted by every reader; the bank said "not JSON"
    p = tmp_path / "b.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"id": "a", "question": "q", "samples": ["x", "y"]}\n')
    assert [q.id for q in load_bank(str(p)).questions] == ["a"]
