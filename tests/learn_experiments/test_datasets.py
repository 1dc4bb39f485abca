"""Loaders on the real public data (``data``): counts and values checked by opening the files."""

from __future__ import annotations

import collections
import csv

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn import datasets as ds


def test_alfworld_first_success_histogram(data) -> None:
    tasks = ds.load_alfworld(data)
    assert len(tasks) == 134
    first = collections.Counter(t.first_success for t in tasks)
    # Reflexion solves 84 environments at trial 0 and every one by trial 14
    assert first[0] == 84 and first[1] == 19 and None not in first
    env2 = next(t for t in tasks if t.id == "env_2")
    assert env2.success == [False, True]
    assert env2.content[0].startswith("In this environment, my plan was to find a plate")


def test_humaneval_attempts_follow_reflections(data) -> None:
    tasks = ds.load_humaneval(data)
    assert len(tasks) == 164
    assert sum(len(t.success) == 1 and t.success[0] for t in tasks) == 134
    assert max(len(t.success) for t in tasks) == 10  # 9 reflections = 10 attempts
    assert all(not any(t.success[:-1]) for t in tasks)  # only the last attempt can pass


def test_game24_costs_sum_to_the_logged_usage(data) -> None:
    tasks = ds.load_game24(data)
    assert len(tasks) == 100 and all(len(t.success) == 100 for t in tasks)
    # running usage restarts after puzzle 931: 14.88315 + 32.17008 USD in the log
    assert sum(sum(t.cost) for t in tasks) == pytest.approx(14.88315 + 32.17008, abs=0.01)
    assert sum(sum(t.success) for t in tasks) == 403  # 4.03% of the 10,000 CoT samples are correct


def test_routellm_gsm8k_drops_contaminated_and_prices_tokens(data) -> None:
    d = ds.load_routellm("gsm8k", data)
    assert len(d.ids) == 1319 - 12  # 12 prompts are listed as contaminated
    assert d.models == ["mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"]
    assert d.quality.sum(axis=0).tolist() == [833.0, 1121.0]
    # query 0 priced by hand: GPT-4-turbo at $10/M input and $30/M output tokens (FrugalGPT table),
    # tokens = characters / 4 of the prompt and of the logged response
    assert len(d.texts[0]) == 121
    csv.field_size_limit(1 << 30)
    path = data / "routellm/routellm/evals/gsm8k/gsm8k_responses.csv"
    with path.open(encoding="utf-8", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["prompt"] == d.texts[0])
    resp = row["gpt-4-1106-preview_response"]
    assert d.cost[0, 1] == pytest.approx(121 / 4 * 10e-6 + len(resp) / 4 * 30e-6)
    assert d.cost[0, 0] == pytest.approx(
        (121 + len(row["mistralai/Mixtral-8x7B-Instruct-v0.1_response"])) / 4 * 0.9e-6
    )
    assert "exact" in d.price_source["gpt-4-1106-preview"]
    assert "proxy" in d.price_source["mistralai/Mixtral-8x7B-Instruct-v0.1"]


def test_alpaca_quality_is_preference_minus_one(data) -> None:
    d = ds.load_alpaca(root=data)
    assert len(d.ids) == 805 and len(d.models) == len(ds.ALPACA_DEFAULT_MODELS)
    j = d.models.index("gpt4_1106_preview")
    assert d.quality[:, j] == pytest.approx(0.5)  # the reference against itself: a tie
    # a model's mean quality is its AlpacaEval 2 win rate, as the published leaderboard gives it
    board = data / "alpaca-eval/docs/data_AlpacaEval_2/weighted_alpaca_eval_gpt4_turbo_leaderboard.csv"
    with board.open(encoding="utf-8", newline="") as fh:
        published = {
            r["samples"].split("/results/")[1].split("/")[0]: float(r["win_rate"])
            for r in csv.DictReader(fh)
            if "/results/" in r["samples"]
        }
    on_board = [m for m in d.models if m in published]
    assert len(on_board) == 6  # all but Mixtral-8x7B-Instruct-v0.1_concise
    for m in on_board:
        assert 100 * d.quality[:, d.models.index(m)].mean() == pytest.approx(published[m], rel=1e-9), m


def test_missing_data_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(OrchestraceError) as e:
        ds.load_alfworld(tmp_path)
    assert e.value.code == "OT660" and "ORCHESTRACE_DATA" in str(e.value)
    with pytest.raises(OrchestraceError) as e:
        ds.load_retry("chess")
    assert e.value.code == "OT662"


def test_unknown_alpaca_model_is_a_clear_error(data) -> None:
    with pytest.raises(OrchestraceError) as e:
        ds.load_alpaca(["no-such-model"], data)
    assert e.value.code == "OT663"


def test_damaged_data_files_are_clear_errors(tmp_path) -> None:
    """A public data file that is not UTF-8, or parses but lacks what the reader needs, is OT661
    naming the file or the data folder (they were UnicodeDecodeError / KeyError, exit 3)."""
    he = tmp_path / "reflexion" / "programming_runs" / "root" / "reflexion_humaneval_py_pass_at_1"
    he.mkdir(parents=True)
    (he / "reflexion_humaneval_py_pass_at_1.jsonl").write_bytes(b'{"task_id": "\xff"}\n')
    with pytest.raises(OrchestraceError) as e:
        ds.load_retry("humaneval", tmp_path)
    assert e.value.code == "OT661" and "not UTF-8" in e.value.message
    assert e.value.path == str(he / "reflexion_humaneval_py_pass_at_1.jsonl")
    g24 = tmp_path / "tree-of-thoughts" / "logs" / "game24"
    g24.mkdir(parents=True)
    (g24 / "gpt-4_0.7_naive_cot_sample_100_start900_end1000.json").write_text('[{"idx": 1}]')
    with pytest.raises(OrchestraceError) as e:
        ds.load_retry("game24", tmp_path)
    assert e.value.code == "OT661" and "KeyError" in e.value.message and e.value.path == str(tmp_path)
    gsm = tmp_path / "routellm" / "routellm" / "evals" / "gsm8k"
    gsm.mkdir(parents=True)
    (gsm / "gsm8k_responses.csv").write_bytes(b"prompt,x\n\xff\xfe,1\n")
    with pytest.raises(OrchestraceError) as e:
        ds.load_route("gsm8k", tmp_path)
    assert e.value.code == "OT661" and e.value.path == str(gsm / "gsm8k_responses.csv")
