"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the runtime tests.

Replies are scripted by substring of the last user message: ``plan[substr]`` is a list of
actions consumed one per matching request (``ok``, ``429``, ``500``, ``slow``, ``malformed``,
``close``); answers come from ``answers[substr]``, else ``"same"``. A request with
``logprobs: true`` gets ``logprobs[substr]`` (one log-probability per word of the answer) back in
the Chat Completions shape.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FakeOpenAI:
    def __init__(self) -> None:
        self.plan: dict[str, list[str]] = {}
        self.answers: dict[str, str] = {}
        self.logprobs: dict[str, list[float]] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                last = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
                with fake.lock:
                    fake.requests.append(body)
                    action = "ok"
                    for pat, acts in fake.plan.items():
                        if pat in last and acts:
                            action = acts.pop(0)
                            break
                if action == "close":
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                if action in ("429", "500"):
                    self._send(int(action), b'{"error": {"message": "try later"}}', {"Retry-After": "0"})
                    return
                if action == "slow":
                    time.sleep(1.0)
                if action == "malformed":
                    self._send(200, b'{"choices": [{"message": ')
                    return
                text = next((v for k, v in fake.answers.items() if k in last), "same")
                lps = next((v for k, v in fake.logprobs.items() if k in last), [-0.5] * len(text.split()))
                n_in = sum(len(m["content"].split()) for m in body["messages"])
                out = {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": n_in,
                        "completion_tokens": len(text.split()),
                        "total_tokens": 0,
                    },
                }
                if body.get("logprobs"):
                    words = text.split()
                    out["choices"][0]["logprobs"] = {
                        "content": [
                            {"token": w, "logprob": lp, "top_logprobs": []}
                            for w, lp in zip(words, lps, strict=True)
                        ]
                    }
                self._send(200, json.dumps(out).encode())

            def _send(self, status, data, headers=None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # a client that hung up is expected here
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    s = FakeOpenAI()
    s.answers = {'"hot"': "cold", '"tall"': "short", '"early"': "late", '"happy"': "sad"}
    yield s
    s.close()
