"""Trainer exports: sample streams, TRL/verl files, and 2 real TRL GRPO steps on our export (offline)."""

import os

import orjson
import pytest
from tracekit import ev, mk

from orchestrace.core.errors import OrchestraceError
from orchestrace.export import get_exporter
from orchestrace.export.samples import samples


def task_group(n: int = 4):
    """n runs of one task: a planner proposes, a solver answers; only some answers are right."""
    out = []
    for g in range(n):
        right = g % 2 == 0
        es = [
            ev(
                "p",
                0,
                "message",
                "planner",
                role="planner",
                to="solver",
                content=f"Plan {g}: add the numbers.",
                tokens_out=6,
            ),
            ev(
                "s",
                1,
                "message",
                "solver",
                role="solver",
                to="planner",
                content="2 + 3 = 5" if right else f"2 + 3 = {6 + g}",
                tokens_out=5,
            ),
            ev(
                "x",
                2,
                "tool_call",
                "solver",
                role="solver",
                tool="calc",
                content_ref=f"sha256:{g:04d}",
                call_id="c",
            ),
            ev("y", 3, "tool_result", "calc", tool="calc", call_id="c"),
        ]
        edges = [("p", "s", "message"), ("s", "x", "causal"), ("x", "y", "tool_dependency")]
        tr = mk(es, edges, rewards={"team": 1.0 if right else 0.0}, task_id="add", trace_id=f"run{g}")
        tr.metadata = {"question": "What is 2 + 3?"}
        out.append(tr)
    return out


def test_sample_streams_per_agent_and_role():
    st = samples(task_group(), method="grpo", unit="agent")
    assert set(st) == {"planner", "solver"}
    solver = st["solver"]
    assert len(solver) == 8  # message + tool call in each of 4 runs
    first = solver[0]
    assert first.prompt == "planner: Plan 0: add the numbers." and first.response == "2 + 3 = 5"
    assert first.group_id == "add::solver" and first.unit == "agent" and first.unit_id == "solver"
    assert first.advantage == pytest.approx(0.5 / (0.5773502691896258 + 1e-6))
    ref = solver[1]
    assert ref.response is None and ref.response_ref == "sha256:0000"
    assert samples(task_group(), method="grpo", unit="agent")["planner"][0].prompt == "What is 2 + 3?"
    assert set(samples(task_group(), by="role", method="loo", unit="message")) == {"planner", "solver"}


def test_trl_and_verl_files(tmp_path):
    n = get_exporter("trl")(task_group(), str(tmp_path / "trl"), method="drmas", unit="message")
    # the 4 tool calls whose text was withheld (content_ref only) cannot be trained on: left out
    assert n == 8 and sorted(os.listdir(tmp_path / "trl")) == ["planner.jsonl", "solver.jsonl"]
    rows = [orjson.loads(x) for x in (tmp_path / "trl" / "solver.jsonl").read_bytes().splitlines()]
    assert {"prompt", "completion", "advantage", "group_id", "unit", "reward"} <= set(rows[0])
    assert all(r["completion"] for r in rows)
    withheld = task_group()
    for tr in withheld:
        for e in tr.events:
            e.content = None
    with pytest.raises(OrchestraceError, match="no sample has completion text"):
        get_exporter("trl")(withheld, str(tmp_path / "none"))
    assert not (tmp_path / "none").exists()
    import pyarrow.parquet as pq

    assert (
        get_exporter("verl")(task_group(), str(tmp_path / "verl"), method="grpo", unit="agent", by="role")
        == 12
    )
    tab = pq.read_table(tmp_path / "verl" / "solver.parquet").to_pylist()
    assert tab[0]["prompt"][0]["role"] == "user" and tab[0]["extra_info"]["uid"] == "add::solver"
    assert (
        get_exporter("samples")(
            task_group(), str(tmp_path / "s"), partition="true", method="shapley", unit="agent"
        )
        == 12
    )


def _tiny_lm_and_tokenizer(texts, tmp_path):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts * 20, vocab_size=300, min_frequency=1, special_tokens=["<pad>", "<eos>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, pad_token="<pad>", eos_token="<eos>")
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    import torch

    torch.manual_seed(0)
    return LlamaForCausalLM(cfg), tok


def _grpo_two_steps(monkeypatch, tmp_path, model, tok, rows, group_size, max_len, decode):
    """Two GRPOTrainer steps (offline, 2 CPU threads) whose rollouts replay the exported rows;
    returns (trainer, served completions, number of parameter tensors that changed)."""
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "TRL_EXPERIMENTAL_SILENCE"):
        monkeypatch.setenv(k, "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    import torch

    torch.set_num_threads(2)
    from trl import GRPOConfig, GRPOTrainer

    from orchestrace.export.samples import trl_replay

    dataset, replay, reward_func = trl_replay(rows, tok, group_size=group_size)
    served = []

    def rollout_func(prompts, trainer):
        out = replay(prompts, trainer)
        served.extend(decode(ids) for ids in out["completion_ids"])
        return out

    before = {k: v.clone() for k, v in model.named_parameters()}
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        max_steps=2,
        per_device_train_batch_size=group_size,
        num_generations=group_size,
        max_completion_length=max_len,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        beta=0.0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_func],
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        rollout_func=rollout_func,
    )
    trainer.train()
    changed = sum(not torch.equal(before[k], v) for k, v in model.named_parameters())
    return trainer, served, changed


def test_trl_without_any_sample_says_why(tmp_path):
    # no output event carries content, content_ref or tokens_out: the error said "0 samples with
    # content withheld: import the traces with their content kept (--keep-content)"
    tr = mk([ev("a", 0, "message", "o", to="o")], rewards={"team": 1.0})
    with pytest.raises(OrchestraceError, match="no sample: no event of type aggregate, message,") as ei:
        get_exporter("trl")([tr], str(tmp_path / "none"))
    assert "keep-content" not in ei.value.message


def test_trl_grpo_two_steps_on_our_export(tmp_path, monkeypatch):
    get_exporter("trl")(task_group(), str(tmp_path / "trl"), method="grpo", unit="agent")
    rows = [orjson.loads(x) for x in (tmp_path / "trl" / "solver.jsonl").read_bytes().splitlines()]
    model, tok = _tiny_lm_and_tokenizer([r["prompt"] + " " + r["completion"] for r in rows], tmp_path)
    trainer, served, changed = _grpo_two_steps(
        monkeypatch, tmp_path, model, tok, rows, 4, 16, lambda ids: tok.decode(ids[:-1])
    )
    assert trainer.state.global_step == 2
    # the trainer learned from the recorded solver answers, not from fresh generations
    assert len(served) == 8 and set(served) == {r["completion"] for r in rows if r["completion"]}
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert logged and all(h["reward_std"] > 0 for h in logged)  # right and wrong answers in each group
    assert changed > 0


def _codex_rows(root, tmp_path, **opts):
    from orchestrace.importers import codex

    tr = next(codex.load(next((root / "codex").glob("rollout-*.jsonl")), keep_content=True))
    get_exporter("trl")([tr], str(tmp_path / "trl"), group="turn", **opts)
    return tr, [orjson.loads(x) for x in (tmp_path / "trl" / "codex.jsonl").read_bytes().splitlines()]


def test_trl_rows_from_a_real_codex_log(public_excerpt, tmp_path):
    """One real session (one trace, one task): per-turn groups ranked by each tool call's outcome."""
    tr, rows = _codex_rows(public_excerpt, tmp_path)
    session = tr.task_id
    assert rows and all(r["completion"] for r in rows)
    assert not any(r["prompt"] == session for r in rows)  # the real context, not the session id
    by_id = {e.id: e for e in tr.events}
    e = by_id[rows[0]["event_id"]]
    assert rows[0]["completion"] == e.content and "show tools" in rows[0]["prompt"]
    groups = {}
    for r in rows:
        groups.setdefault(r["group_id"], []).append(r)
    mixed = [g for g in groups.values() if len({r["reward"] for r in g}) > 1]
    assert mixed  # failed, duplicate and good calls in one turn: a real advantage signal
    for g in mixed:
        assert abs(sum(r["advantage"] for r in g)) < 1e-6 and any(r["advantage"] < 0 for r in g)
        assert all(
            (a["advantage"] > b["advantage"]) == (a["reward"] > b["reward"])
            for a in g
            for b in g
            if a["reward"] != b["reward"]
        )


def test_trl_grpo_two_steps_on_real_log_rows(public_excerpt, tmp_path, monkeypatch):
    """TRL's GRPOTrainer on rows exported from a real Codex log: non-zero advantages, weights move."""
    _, rows = _codex_rows(public_excerpt, tmp_path, max_prompt_chars=150)
    rows = [r for r in rows if r["group_id"].endswith("::turn:1::codex")]
    model, tok = _tiny_lm_and_tokenizer([r["prompt"] + " " + r["completion"] for r in rows[:60]], tmp_path)
    trainer, served, changed = _grpo_two_steps(monkeypatch, tmp_path, model, tok, rows, 16, 24, list)
    assert trainer.state.global_step == 2
    assert len(served) == 32 and max(len(ids) for ids in served) == 24  # max_completion_length honoured
    logged = [h for h in trainer.state.log_history if "reward_std" in h]
    assert logged and any(h["reward_std"] > 0 for h in logged)
    assert changed > 0


def test_an_export_option_with_a_typo_is_refused(tmp_path):
    # --opt mthod=shapley was ignored: the streams came out under the default grpo, exit 0
    with pytest.raises(OrchestraceError, match="unknown option 'mthod'") as ei:
        get_exporter("trl")(task_group(), str(tmp_path / "trl"), mthod="shapley")
    assert "method" in ei.value.message
    for target in ("survey", "jsonl"):  # they read no option at all
        with pytest.raises(OrchestraceError, match=f"the {target} export takes no options, got 'method'"):
            get_exporter(target)(task_group(), str(tmp_path / "x.jsonl"), method="grpo")
    assert get_exporter("trl")(task_group(), str(tmp_path / "ok"), method="shapley", samples="64") > 0
