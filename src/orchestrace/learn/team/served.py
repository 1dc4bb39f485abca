"""Rollouts served by an OpenAI-compatible server (vLLM) that the trainer pushes its adapters to.

The trainer keeps the model for the update; sampling moves to a server holding the same base
model with LoRA enabled. Before a batch of rollouts whose adapters changed since the last push,
each adapter is written as a peft folder (``adapter_config.json`` + ``adapter_model.safetensors``)
under ``adapter_dir`` and loaded with ``POST /v1/load_lora_adapter {lora_name, lora_path}``
under a name that carries the first 12 hex digits of its tensors' sha256 (``solver-3f2a...``);
the version it replaces is then dropped with ``POST /v1/unload_lora_adapter {lora_name}``. So a
name always means the same weights, and the name a call was served by is in its trace.

Each call is ``POST /v1/completions`` with the prompt as token ids (the trainer's chat template,
so the loss sees exactly what the server saw), ``model`` = the adapter's served name, the call's
temperature, max tokens and seed, ``logprobs: 1`` and ``return_tokens_as_token_ids: true``
(vLLM then names each sampled token ``token_id:N``). The server must return the log-probs of the
distribution it sampled from (vLLM: ``--logprobs-mode processed_logprobs``; its default
``raw_logprobs`` ignores the temperature), since they are the PPO ratio's behaviour policy.
vLLM needs ``--enable-lora --max-lora-rank 8`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``;
``lora_path`` is read by the server, so ``adapter_dir`` must be at the same path there (a shared
mount) or given as ``server_dir``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import orjson

from ...core.model import Trace
from ...runtime.backends.base import BackendError, ChatRequest, ChatResponse, TokenSample, http_error
from .model import LORA_TARGETS, TeamModel
from .program import BadInput
from .rollouts import Rollout, run_rollouts

TOKEN_PREFIX = "token_id:"


def adapter_digest(state: dict[str, Any]) -> str:
    """sha256 over the adapter's tensors (names, shapes, float32 bytes), in name order."""
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().contiguous()
        h.update(f"{k}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def write_peft_folder(model: TeamModel, name: str, folder: Path) -> None:
    """The adapter as peft saves one (what vLLM's LoRA loader reads)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(model.adapter_state(name), str(folder / "adapter_model.safetensors"))
    cfg = model.model.peft_config[name].to_dict()
    cfg["target_modules"] = sorted(LORA_TARGETS)
    cfg["base_model_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    (folder / "adapter_config.json").write_text(
        json.dumps(cfg, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )


class ServedBackend:
    """A runtime backend whose calls go to the server, each to the served name of its adapter."""

    def __init__(self, base_url: str, model: TeamModel, served: dict[str, str], timeout: float) -> None:
        self.name = "served-lora"
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.served = served  # adapter -> the lora_name it is loaded under now
        self.timeout = timeout

    async def chat(self, req: ChatRequest) -> ChatResponse:
        if req.model not in self.served:
            raise BackendError(
                "malformed", f"no adapter {req.model!r} was pushed to the server", retryable=False
            )
        prompt = self.model.encode(req.messages)
        body = {
            "model": self.served[req.model],
            "prompt": prompt,
            "max_tokens": int(req.max_tokens),
            "temperature": float(req.temperature),
            "seed": int(req.seed),
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                r = await client.post(
                    f"{self.base_url}/v1/completions",
                    content=orjson.dumps(body),
                    headers={"Content-Type": "application/json"},
                )
        except httpx.TimeoutException as e:
            raise BackendError(
                "timeout", f"no answer within {self.timeout:g} s ({type(e).__name__})", retryable=True
            ) from None
        except httpx.HTTPError as e:
            raise BackendError("connection", f"{type(e).__name__}: {e}", retryable=True) from None
        if r.status_code != 200:
            raise http_error(r.status_code, r.text)
        return self.parse(r.content, req, prompt)

    def parse(self, content: bytes, req: ChatRequest, prompt: list[int]) -> ChatResponse:
        try:
            d = orjson.loads(content)
            choice = d["choices"][0]
            lp = choice["logprobs"]
            names, values = lp["tokens"], lp["token_logprobs"]
            if not all(isinstance(t, str) and t.startswith(TOKEN_PREFIX) for t in names):
                raise ValueError(
                    f"tokens are not named {TOKEN_PREFIX}N (return_tokens_as_token_ids unsupported?)"
                )
            ids = [int(t[len(TOKEN_PREFIX) :]) for t in names]
            logprobs = [float(v) for v in values]
            if len(logprobs) != len(ids):
                raise ValueError("tokens and token_logprobs differ in length")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as e:
            raise BackendError(
                "malformed", f"not a completion with token ids and log-probs ({type(e).__name__}: {e})"
            ) from None
        return ChatResponse(
            text=self.model.decode(ids),
            tokens_in=len(prompt),
            tokens_out=len(ids),
            model=self.served[req.model],
            finish_reason=choice.get("finish_reason"),
            tokens=TokenSample(
                prompt_ids=prompt,
                completion_ids=ids,
                logprobs=logprobs,
                adapter=req.model,
                temperature=float(req.temperature),
            ),
        )


class ServedRollouts:
    """Pushes changed adapters to the server, then runs the rollouts with :class:`ServedBackend`."""

    def __init__(
        self,
        model: TeamModel,
        *,
        base_url: str,
        adapter_dir: str | Path,
        server_dir: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.adapter_dir = Path(adapter_dir)
        self.server_dir = server_dir
        self.served: dict[str, str] = {}
        self.backend = ServedBackend(self.base_url, model, self.served, timeout)
        self.timeout = timeout

    def _post(self, path: str, body: dict[str, Any]) -> None:
        try:
            r = httpx.post(f"{self.base_url}{path}", json=body, timeout=self.timeout)
        except httpx.HTTPError as e:
            raise BadInput("OT689", f"rollout server {self.base_url}: {type(e).__name__}: {e}") from None
        if r.status_code != 200:
            raise BadInput(
                "OT689", f"rollout server {self.base_url}{path} answered {r.status_code}: {r.text[:300]}"
            )

    def push(self) -> list[str]:
        """Load every adapter whose tensors changed since the last push; return the names loaded."""
        loaded = []
        for name in self.model.adapters:
            lora_name = f"{name}-{adapter_digest(self.model.adapter_state(name))[:12]}"
            old = self.served.get(name)
            if old == lora_name:
                continue
            folder = self.adapter_dir / lora_name
            write_peft_folder(self.model, name, folder)
            path = f"{self.server_dir.rstrip('/')}/{lora_name}" if self.server_dir else str(folder.resolve())
            self._post("/v1/load_lora_adapter", {"lora_name": lora_name, "lora_path": path})
            self.served[name] = lora_name
            loaded.append(lora_name)
            if old is not None:
                self._post("/v1/unload_lora_adapter", {"lora_name": old})
        return loaded

    def run(self, model: TeamModel, rollouts: list[Rollout]) -> list[Trace]:
        self.push()
        return run_rollouts(self.backend, rollouts)

    def close(self) -> None:
        for lora_name in self.served.values():
            self._post("/v1/unload_lora_adapter", {"lora_name": lora_name})
        self.served.clear()
