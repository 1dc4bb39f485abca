"""Task files (``learn/tasks.py``): the one loader for users' files and the shipped families."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrace.cli import main
from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.tasks import TaskItem, load_tasks, verifier


def write_jsonl(path: Path, rows: list[object]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


ROWS = [
    {"id": "s", "question": "2 + 2?", "answer": "4", "split": "shot"},
    {"id": 1, "question": "What is 3 + 4?", "answer": "7"},
    {"id": "b", "prompt": "Capital of France?", "answer": ["Paris", "paris city"], "metadata": {"k": 1}},
    {"id": "c", "question": "Pick one", "answer": "B"},
]


def half_right(answer: str, task: TaskItem) -> float:
    """A task verifier hook for the tests: 0.5 when the answer names the task's metadata key."""
    return 0.5 if str(task.metadata.get("k")) in answer else 0.0


def test_jsonl_and_parquet_read_the_same(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = load_tasks(write_jsonl(tmp_path / "t.jsonl", ROWS))
    rows = [
        {**r, "id": str(r["id"]), "answer": r["answer"] if isinstance(r["answer"], list) else [r["answer"]]}
        for r in ROWS
    ]
    for r in rows:
        r.setdefault("question", r.pop("prompt", None))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    b = load_tasks(str(tmp_path / "t.parquet"))
    assert [q.id for q in a.items] == ["1", "b", "c"] == [q.id for q in b.items]
    assert a.items[1].question == "Capital of France?" and a.items[1].answers == ("Paris", "paris city")
    assert a.items[1].metadata == {"k": 1}
    assert [s.id for s in a.shots] == ["s"]  # a few-shot example, never asked
    assert a.messages(a.items[0])[:2] == [
        {"role": "user", "content": "2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    assert a.verifier.name == "exact" and a.max_new_tokens == 16


@pytest.mark.parametrize(
    ("spec", "answers", "right", "wrong"),
    [
        ("exact", ("Paris",), ["paris", "The Paris.", "PARIS\nbecause"], ["Paris, France", ""]),
        ("phrase", ("europe", "western europe"), ["It is in Western Europe.", "the Europe"], ["Asia"]),
        ("word", ("cold",), ["Cold!", "cold and wet"], ["hot", "very cold"]),
        ("contains", ("Paris",), ["It is Paris, I think", "paris"], ["Parisian", "Lyon"]),
        ("numeric:0.01", ("3.14",), ["about 3.141", "x = 3.13"], ["3.2", "pi"]),
        ("numeric", ("1,000",), ["1000", "It is 1,000."], ["1001"]),
        ("choice", ("B",), ["B", "(b) because", "Answer: B."], ["A", "Because"]),
    ],
)
def test_verifiers(spec, answers, right, wrong):
    v = verifier(spec)
    item = TaskItem("q", "?", answers)
    assert all(v.correct(t, item) for t in right), [t for t in right if not v.correct(t, item)]
    assert not any(v.correct(t, item) for t in wrong), [t for t in wrong if v.correct(t, item)]
    assert all(v.canonical(t, answers) == answers[0] for t in right)


def test_hook_verifier_is_the_plugin_loader(tmp_path):
    ts = load_tasks(write_jsonl(tmp_path / "t.jsonl", ROWS), "test_tasks:half_right")
    item = ts.item("b")
    assert ts.verifier.score("I say 1", item) == 0.5 and not ts.verifier.correct("I say 1", item)
    with pytest.raises(OrchestraceError, match="cannot import task verifier 'nope_mod:f'"):
        verifier("nope_mod:f")
    with pytest.raises(OrchestraceError, match="unknown verifier 'exactly'"):
        verifier("exactly")


def test_split_is_fixed_unless_the_file_gives_one(tmp_path):
    rows = [{"id": f"q{i}", "question": f"q {i}?", "answer": str(i)} for i in range(20)]
    ts = load_tasks(write_jsonl(tmp_path / "a.jsonl", rows))
    train, held = ts.split(12, 5)
    assert (train, held) == ts.split(12, 5) and not set(train) & set(held)
    assert len(train) == 12 and len(held) == 5 and train != [f"q{i}" for i in range(12)]  # shuffled
    given = [{**r, "split": "test" if i % 4 == 0 else "train"} for i, r in enumerate(rows)]
    ts = load_tasks(write_jsonl(tmp_path / "b.jsonl", given))
    train, held = ts.split(100, 100)
    assert held == ["q0", "q4", "q8", "q12", "q16"] and len(train) == 15
    with pytest.raises(OrchestraceError, match="has 20 questions"):
        load_tasks(str(tmp_path / "a.jsonl")).split(18, 5)


def test_shipped_sets_are_the_families():
    from orchestrace.learn.stopping.families import FAMILIES

    cont = load_tasks("continents")
    assert len(cont.items) == 177 and len(cont.shots) == 3 and cont.verifier.name == "phrase"
    fam = FAMILIES["continents"]
    q = fam.questions[0]
    assert (q.id, q.gold) == (cont.items[0].id, cont.items[0].gold) == ("cont-albania", "europe")
    assert fam.canonical("It is in Southern Europe.", q) == "europe"
    assert fam.canonical("Eurasia", q) == "eurasia"
    assert FAMILIES["antonyms"].canonical("Freezing cold", FAMILIES["antonyms"].questions[0]) == "cold"


BAD = [
    ([{"id": "a", "answer": "x"}], 1, "missing 'question' (or 'prompt')"),
    ([{"id": "a", "question": "q"}], 1, "missing 'answer'"),
    ([{"question": "q", "answer": "x"}], 1, "missing or empty 'id'"),
    (
        [{"id": "a", "question": "q", "answer": "x"}, {"id": "a", "question": "r", "answer": "y"}],
        2,
        "duplicate id 'a' (first on line 1)",
    ),  # fmt: skip
    ([{"id": "a", "question": "q", "answer": []}], 1, "missing 'answer'"),
    ([{"id": "a", "question": "q", "answer": "x", "split": "dev"}], 1, "unknown split 'dev'"),
    ([{"id": "a", "question": "q", "answer": "x"}, [1, 2]], 2, "must be an object"),
]


@pytest.mark.parametrize(("rows", "line", "message"), BAD)
def test_bad_rows_name_file_and_line(tmp_path, rows, line, message):
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(OrchestraceError) as e:
        load_tasks(path)
    assert message in e.value.message and e.value.line == line and e.value.path == path


def test_cli_bad_task_file_exits_1_before_anything_is_written(tmp_path, capsys):
    path = write_jsonl(tmp_path / "bad.jsonl", BAD[3][0])
    cases = [
        (["--tasks", path], f"{path} line 2 /id: OT670 error: duplicate id 'a'"),
        (["--tasks", str(tmp_path / "none.jsonl")], "no task file"),
        (["--tasks", "continents", "--verifier", "no_such_module:f"], "cannot import task verifier"),
    ]
    for extra, msg in cases:
        with pytest.raises(SystemExit) as e:
            main(["train", "team", "-o", str(tmp_path / "run"), *extra])
        out = capsys.readouterr()
        text = out.out + out.err
        assert e.value.code == 1, text
        assert msg in text and "Traceback" not in text, text
        assert not (tmp_path / "run").exists()
