"""Speed of one ``train team`` iteration against plain ``transformers.generate`` and a plain TRL
GRPOTrainer step, on the same model (SmolLM2-135M, fp32, LoRA r=8 on q/v), the same prompts and
the same max new tokens, in one process, one after the other (so all three see the same load).

    nice python bench/train_team_speed.py                     # default config: 4 questions x 4 runs
    nice python bench/train_team_speed.py --iterations 2 --threads 2

1. our loop: ``--iterations`` warm-up-free iterations of collect (the team program's rollouts,
   recorded and validated) + update (read the traces, PPO-clip, ``epochs`` Adam steps, save the
   adapters); one warm-up iteration first. Its LLM calls (prompt ids, adapter) are the batch the
   other two get.
2. ``transformers.generate``: the same prompts, left-padded, one ``generate`` per adapter (the
   solvers' prompts with the solver adapter, then the aggregators'), sampling at the same
   temperature (top-k 0, top-p 1), the same ``max_new_tokens``; no log-probs (plain).
3. TRL ``GRPOTrainer`` (peft LoRA, the same settings): a dataset of every other call's prompt
   (the recorded ids decoded, chat template included) x ``num_generations=2``, so one generation batch has as many completions as
   our iteration has calls; ``num_iterations = epochs`` optimizer steps per generation, as ours.
   One warm-up generation (its ``epochs`` steps), then one timed.

Generated tokens = completion tokens sampled (up to and including EOS); training tokens = prompt
+ completion tokens of every trained sequence, times the optimizer steps over them (the shared
prefix is counted in full for both, though our loop computes it once). Peak RSS is the process's
``ru_maxrss`` read after each part (it only grows: our loop's figure includes loading the model).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def our_loop(cfg, threads: int | None, iterations: int, tmp: Path) -> tuple[dict, list]:
    """(figures, the measured iteration's call rows) of the loop's own collect + update."""
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.step import make_step

    t0 = time.perf_counter()
    step = make_step(cfg, threads)
    load_s = time.perf_counter() - t0
    policy = None
    gen_tok = train_tok = 0
    roll_s = upd_s = 0.0
    rows: list = []
    for i in range(1, iterations + 2):  # iteration 1 is the warm-up
        d = tmp / f"iter-{i:03d}"
        d.mkdir(parents=True)
        t0 = time.perf_counter()
        traces = step.collect(i, policy, d)
        t1 = time.perf_counter()
        policy, _ = step.update(i, policy, traces, d)
        t2 = time.perf_counter()
        if i == 1:
            continue
        rows = read_batch(traces, step.spec, cfg.credit, cfg.unit).rows
        roll_s += t1 - t0
        upd_s += t2 - t1
        gen_tok += sum(len(r.sample.completion_ids) for r in rows)
        seq = sum(len(r.sample.prompt_ids) + len(r.sample.completion_ids) for r in rows)
        train_tok += seq * cfg.epochs
    step.model.model.eval()
    return {
        "load_s": load_s,
        "iterations": iterations,
        "calls_per_iteration": len(rows),
        "s_per_iteration": (roll_s + upd_s) / iterations,
        "rollout_s": roll_s / iterations,
        "update_s": upd_s / iterations,
        "generated_tokens_per_s": gen_tok / roll_s,
        "training_tokens_per_s": train_tok / upd_s,
        "peak_rss_gb": peak_rss_gb(),
    }, [rows, step]


def plain_generate(step, rows, cfg, max_new: int) -> dict:
    """One ``generate`` per adapter over the same prompts, left-padded."""
    torch = step.model.torch
    model = step.model
    total_s = 0.0
    gen_tok = 0
    for adapter in dict.fromkeys(r.adapter for r in rows):
        prompts = [r.sample.prompt_ids for r in rows if r.adapter == adapter]
        temp = next(r.sample.temperature for r in rows if r.adapter == adapter)
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), model.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        model.use(adapter)
        torch.manual_seed(cfg.seed)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=temp,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new,
                eos_token_id=sorted(model.eos_ids),
                pad_token_id=model.pad_id,
            )
        total_s += time.perf_counter() - t0
        for row in out[:, width:].tolist():
            n = 0
            for t in row:
                n += 1
                if t in model.eos_ids:
                    break
            gen_tok += n
    return {
        "s": total_s,
        "generated_tokens": gen_tok,
        "generated_tokens_per_s": gen_tok / total_s,
        "peak_rss_gb": peak_rss_gb(),
    }


def trl_grpo(step, rows, cfg, max_new: int, threads: int | None, tmp: Path) -> dict:
    """A plain GRPOTrainer on the same model folder, prompts and LoRA settings."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from orchestrace.learn.team.model import LORA_TARGETS, dequantised_folder

    tok = step.model.tokenizer
    picked = rows[::2]
    # plain-text prompts: the recorded ids decoded (chat template included), tokenized again by TRL
    prompts = [tok.decode(r.sample.prompt_ids) for r in picked]

    def reward(completions, **_):  # any verifiable reward; it costs nothing next to the model
        return [float("paris" in c.lower()) for c in completions]

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter())

    n = len(picked) * 2
    args = GRPOConfig(
        output_dir=str(tmp / "trl"),
        use_cpu=True,
        per_device_train_batch_size=n,
        gradient_accumulation_steps=1,
        num_generations=2,
        num_iterations=cfg.epochs,
        max_steps=2 * cfg.epochs,
        max_completion_length=max_new,
        temperature=cfg.temperature,
        learning_rate=cfg.lr,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=cfg.seed,
        dataloader_num_workers=0,
        shuffle_dataset=False,
    )
    lora = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=2 * cfg.lora_rank,
        target_modules=list(LORA_TARGETS),
        task_type="CAUSAL_LM",
    )
    if threads:
        torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(dequantised_folder(), dtype=torch.float32)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tok,
        peft_config=lora,
        callbacks=[Clock()],
    )
    t0 = time.perf_counter()
    trainer.train()
    # generation steps log the completions' mean length; the last one is the timed generation's
    comp_len = [h for h in trainer.state.log_history if "completions/mean_length" in h][-1][
        "completions/mean_length"
    ]
    start = times[cfg.epochs - 1]
    s = times[-1] - start
    prompt_tok = sum(len(tok(p)["input_ids"]) for p in prompts) * 2
    return {
        "first_generation_s": start - t0,
        "s_per_iteration": s,
        "completions": n,
        "generated_tokens_per_s": None,  # generation and training are not timed apart by TRL
        "training_tokens_per_s": (prompt_tok + comp_len * n) * cfg.epochs / s,
        "mean_completion_tokens": comp_len,
        "peak_rss_gb": peak_rss_gb(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=2, help="timed iterations of our loop")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from orchestrace.learn.stopping.families import FAMILIES
    from orchestrace.learn.team.config import TeamConfig

    cfg = TeamConfig(questions=a.questions, group=a.group)
    max_new = FAMILIES[cfg.family].max_new_tokens
    with tempfile.TemporaryDirectory() as tmp:  # each part printed as it ends (a slow machine)
        ours, (rows, step) = our_loop(cfg, a.threads, a.iterations, Path(tmp))
        print(json.dumps({"ours": ours}), flush=True)
        gen = plain_generate(step, rows, cfg, max_new)
        print(json.dumps({"transformers_generate": gen}), flush=True)
        trl = trl_grpo(step, rows, cfg, max_new, a.threads, Path(tmp))
    figures = {
        "config": {
            "questions": cfg.questions,
            "group": cfg.group,
            "solvers": cfg.solvers,
            "max_new_tokens": max_new,
            "epochs": cfg.epochs,
            "threads": a.threads,
        },
        "load_avg_1min": os.getloadavg()[0],
        "ours": ours,
        "transformers_generate": gen,
        "trl_grpo": trl,
        "ratios": {
            "generated_tokens_per_s_ours_over_generate": ours["generated_tokens_per_s"]
            / gen["generated_tokens_per_s"],
            "s_per_iteration_trl_over_ours": trl["s_per_iteration"] / ours["s_per_iteration"],
            "training_tokens_per_s_ours_over_trl": ours["training_tokens_per_s"]
            / trl["training_tokens_per_s"],
        },
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
