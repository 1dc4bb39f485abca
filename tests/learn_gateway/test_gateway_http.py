"""The gateway over real HTTP on 127.0.0.1 with a scripted backend (no model): the OpenAI protocol
as the official client reads it, what a run's trace records, and every refusal in OpenAI's error
shape (raw malformed HTTP included)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from orchestrace.core.io import load_one
from orchestrace.learn.gateway.completers import BackendCompleter
from orchestrace.learn.gateway.launch import ServeOptions, build
from orchestrace.learn.gateway.server import GatewayServer, Limits, start_in_thread
from orchestrace.runtime.backends.base import ChatRequest
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.cache import cache_path

RULES = {"capital": "Paris is the capital of France.", "Summarise": "France's capital: Paris."}


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayServer]:
    opts = ServeOptions(
        port=0, runs=str(tmp_path / "runs"), agents="researcher,writer=editor", adapters="role"
    )
    server = build(opts, BackendCompleter(ScriptedBackend(rules=RULES), None, batch_window=0))
    start_in_thread(server)
    yield server
    server.shutdown()
    server.server_close()
    server.gateway.close()


def chat(url: str, body: dict, **kw) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", content=orjson.dumps(body), **kw)


def test_a_two_agent_run_through_the_openai_client_is_one_trace_with_its_data_flow(gateway, tmp_path):
    import openai

    client = openai.OpenAI(base_url=f"{gateway.url}/runs/r1/v1", api_key="unused")
    found = client.chat.completions.create(
        model="researcher", messages=[{"role": "user", "content": "What is the capital of France?"}]
    )
    notes = found.choices[0].message.content
    assert notes == RULES["capital"] and found.choices[0].finish_reason == "stop"
    assert found.usage.total_tokens == found.usage.prompt_tokens + found.usage.completion_tokens
    # the writer gets the researcher's notes re-cased and re-spaced: still the same data
    prompt = "Summarise:\n  " + notes.upper().replace(" ", "   ")
    chunks = list(
        client.chat.completions.create(
            model="writer",
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == RULES["Summarise"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and not chunks[-1].choices
    # an unrelated call of the researcher: no edge from the writer (its answer is not in the prompt)
    client.chat.completions.create(model="researcher", messages=[{"role": "user", "content": "and Spain?"}])
    ended = httpx.post(f"{gateway.url}/runs/r1/end", json={"answer": RULES["Summarise"]}).json()
    tr = load_one(ended["trace"])  # validated
    assert tr.trace_id == "r1" and tr.metadata["outcome"]["final"] == RULES["Summarise"]
    returns = [e for e in tr.events if e.type == "return"]
    assert [(e.agent, e.role, e.turn) for e in returns] == [
        ("researcher", "researcher", 0),
        ("writer", "editor", 0),
        ("researcher", "researcher", 1),
    ]
    kind = {e.id: e.type for e in tr.events}
    data = [(x.src, x.dst) for x in tr.edges if x.type == "message" and kind[x.src] == "return"]
    assert data == [(returns[0].id, returns[1].id)]
    assert returns[1].attrs["data_flow"] == [{"from": returns[0].id, "match": "normalised"}]
    spawned = {e.to for e in tr.events if e.type == "spawn"}
    assert spawned == {"researcher", "writer"}
    # the aggregate reads the writer's completion: the program's answer was the writer's
    agg = next(e for e in tr.events if e.type == "aggregate")
    assert [x.src for x in tr.edges if x.dst == agg.id] == [returns[1].id]
    # each call's cache entry is where its return event says
    lines = [orjson.loads(x) for x in Path(cache_path(ended["trace"])).read_bytes().splitlines()]
    refs = {f"{r['key']}#{r['n']}": r for r in lines}
    texts = [refs[e.attrs["call"]]["outcome"]["ok"]["text"] for e in returns]
    assert texts[:2] == [RULES["capital"], RULES["Summarise"]]
    assert refs[returns[1].attrs["call"]]["request"]["model"] == "editor"  # the adapter of its role


def test_the_agent_and_run_can_come_from_headers(gateway):
    r = chat(
        gateway.url,
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "capital?"}]},
        headers={"X-Orchestrace-Agent": "writer", "X-Orchestrace-Run": "h1"},
    )
    assert r.status_code == 200 and r.json()["model"] == "gpt-4o"
    path = gateway.gateway.finish_run("h1")
    assert [e.agent for e in load_one(path).events if e.type == "return"] == ["writer"]


def test_a_seed_the_call_gives_is_the_seed_it_samples_with(gateway):
    r = chat(gateway.url, {"model": "writer", "messages": [{"role": "user", "content": "x"}], "seed": 5})
    assert r.status_code == 200
    path = gateway.gateway.finish_run("default")
    (entry,) = [orjson.loads(x) for x in Path(cache_path(path)).read_bytes().splitlines()]
    assert entry["request"]["seed"] == 5


def test_models_lists_the_agents(gateway):
    r = httpx.get(f"{gateway.url}/runs/x/v1/models")
    assert [m["id"] for m in r.json()["data"]] == ["researcher", "writer"]


def openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "model"),
        (b'{"model": "researcher"}', "messages"),
        (b'{"model": "researcher", "messages": []}', "messages"),
        (b'{"model": "researcher", "messages": ["hi"]}', "messages[0]"),
        (b'{"model": "researcher", "messages": [{"role": "robot", "content": "hi"}]}', "messages[0].role"),
        (b'{"model": "researcher", "messages": [{"role": "user", "content": 5}]}', "messages[0].content"),
        (b'{"model": "researcher", "messages": [{"role": "user", "content": "hi"}], "n": 2}', "n"),
        (
            b'{"model": "researcher", "messages": [{"role": "user", "content": "x"}], "temperature": 9}',
            "temperature",
        ),
        (
            b'{"model": "researcher", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}',
            "max_tokens",
        ),
        (
            b'{"model": "researcher", "messages": [{"role": "user", "content": "x"}], "max_tokens": 99999}',
            "max_tokens",
        ),
        (
            b'{"model": "researcher", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}',
            "top_logprobs",
        ),
        (b'{"model": "researcher", "messages": [{"role": "user", "content": "x"}], "stop": [1]}', "stop"),
        (
            b'{"model": "researcher", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
            "stream",
        ),
        (b'{"model": "nobody", "messages": [{"role": "user", "content": "x"}]}', "model"),
    ],
)
def test_a_malformed_call_is_a_400_in_openai_shape_and_records_nothing(gateway, body, param):
    r = httpx.post(f"{gateway.url}/runs/bad/v1/chat/completions", content=body)
    err = openai_error(r, 400)
    assert err["type"] == "invalid_request_error" and err["param"] == param
    assert "bad" not in gateway.gateway.runs  # refused before the run was opened


def test_a_run_id_that_could_leave_the_runs_folder_is_refused(gateway, tmp_path):
    body = {"model": "researcher", "messages": [{"role": "user", "content": "x"}]}
    data = orjson.dumps(body)
    for rid in (b"..", b".hidden", b"a%2Fb", b"a%2F..%2F..%2Fx"):  # raw: a client would normalise ".."
        head = b"POST /runs/" + rid + b"/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        status, err = status_and_json(raw(gateway, head + b"Content-Length: %d\r\n\r\n" % len(data) + data))
        assert status == 400 and "bad run id" in err["error"]["message"], rid
    r = chat(gateway.url, body, headers={"X-Orchestrace-Run": "../../etc/x"})
    assert "bad run id" in openai_error(r, 400)["message"]
    assert not list(tmp_path.glob("*.events.jsonl")) and not (tmp_path / "etc").exists()


def test_a_call_to_an_ended_run_is_refused(gateway):
    body = {"model": "researcher", "messages": [{"role": "user", "content": "x"}]}
    assert (
        httpx.post(f"{gateway.url}/runs/e1/v1/chat/completions", content=orjson.dumps(body)).status_code
        == 200
    )
    assert httpx.post(f"{gateway.url}/runs/e1/end").status_code == 200
    r = httpx.post(f"{gateway.url}/runs/e1/v1/chat/completions", content=orjson.dumps(body))
    assert openai_error(r, 400)["code"] == "run_closed"
    assert openai_error(httpx.post(f"{gateway.url}/runs/nope/end"), 404)["code"] == "run_not_found"
    # curl -X POST sends no Content-Length at all: an empty body, which end takes
    assert chat(gateway.url, body, headers={"X-Orchestrace-Run": "e2"}).status_code == 200
    reply = raw(gateway, b"POST /runs/e2/end HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200")


def raw(server: GatewayServer, data: bytes) -> bytes:
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def status_and_json(reply: bytes) -> tuple[int, dict]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), orjson.loads(body)


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 9\r\n"
        + b"X" * 70000
        + b"\r\n\r\n",
        b"POST /v1/chat/completions HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: many\r\n\r\n{}",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -4\r\n\r\n{}",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"DELETE /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    ],
)
def test_raw_malformed_http_gets_an_error_in_openai_shape_never_a_traceback(gateway, request_bytes, capfd):
    status, body = status_and_json(raw(gateway, request_bytes))
    assert 400 <= status < 500 or status == 505  # 505: HTTP version not supported
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in capfd.readouterr().err


def test_limits_body_size_prompt_length_and_foreign_host(tmp_path):
    opts = ServeOptions(
        port=0, runs=str(tmp_path), agents="a", limits=Limits(max_body=2000, max_prompt_chars=100)
    )
    server = build(opts, BackendCompleter(ScriptedBackend(), None, batch_window=0))
    start_in_thread(server)
    try:
        big = {"model": "a", "messages": [{"role": "user", "content": "x" * 5000}]}
        assert openai_error(chat(server.url, big), 413)["type"] == "invalid_request_error"
        long = {"model": "a", "messages": [{"role": "user", "content": "x" * 500}]}
        assert openai_error(chat(server.url, long), 400)["code"] == "context_length_exceeded"
        ok = {"model": "a", "messages": [{"role": "user", "content": "x"}]}
        assert openai_error(chat(server.url, ok, headers={"Host": "evil.example"}), 421)
        assert (
            chat(server.url, ok, headers={"Host": f"localhost:{server.server_address[1]}"}).status_code == 200
        )
    finally:
        server.shutdown()
        server.server_close()
        server.gateway.close()


def test_many_runs_connecting_at_once_all_connect_before_the_server_accepts(tmp_path):
    """The runs of a batch connect at once; the kernel must complete their connections while the
    server thread is busy (here: never accepting). With socketserver's backlog of 5, 6 of 40 did."""
    opts = ServeOptions(
        port=0, runs=str(tmp_path / "runs"), agents="researcher,writer=editor", adapters="role"
    )
    server = build(opts, BackendCompleter(ScriptedBackend(rules=RULES), None, batch_window=0))
    clients = []
    try:
        for _ in range(40):
            c = socket.socket()
            c.settimeout(0.5)
            c.connect(server.server_address)
            clients.append(c)
    finally:
        for c in clients:
            c.close()
        server.server_close()
        server.gateway.close()
    assert len(clients) == 40


def test_calls_beyond_the_concurrency_bound_get_a_429(tmp_path):
    release = threading.Event()

    class Blocking(ScriptedBackend):
        async def chat(self, req: ChatRequest):
            await asyncio.to_thread(release.wait, 20)
            return await super().chat(req)

    opts = ServeOptions(
        port=0, runs=str(tmp_path), agents="a", limits=Limits(max_concurrent=1, slot_wait=0.2)
    )
    server = build(opts, BackendCompleter(Blocking(), None, batch_window=0))
    start_in_thread(server)
    try:
        body = {"model": "a", "messages": [{"role": "user", "content": "x"}]}
        first: list[httpx.Response] = []
        t = threading.Thread(target=lambda: first.append(chat(server.url, body, timeout=30)))
        t.start()
        while not server.gateway.runs.get("default"):  # the first call holds the only slot
            threading.Event().wait(0.01)
        assert openai_error(chat(server.url, body), 429)["type"] == "rate_limit_error"
        release.set()
        t.join(30)
        assert first[0].status_code == 200
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        server.gateway.close()


def test_no_content_reaches_the_log_and_no_content_mode_keeps_it_out_of_the_trace(tmp_path, capfd):
    secret = "the launch code is 0000"
    opts = ServeOptions(port=0, runs=str(tmp_path), agents="a", verbose=True, keep_content=False)
    server = build(opts, BackendCompleter(ScriptedBackend(rules={"launch": secret}), None, batch_window=0))
    start_in_thread(server)
    try:
        r = chat(server.url, {"model": "a", "messages": [{"role": "user", "content": f"launch? {secret}"}]})
        assert r.json()["choices"][0]["message"]["content"] == secret
        chat(server.url, {"model": "nobody", "messages": [{"role": "user", "content": secret}]})
        path = server.gateway.finish_run("default")
    finally:
        server.shutdown()
        server.server_close()
        server.gateway.close()
    logged = capfd.readouterr()
    assert "POST /v1/chat/completions" in logged.err  # verbose logs the request line
    assert secret not in logged.out + logged.err
    assert secret.encode() not in Path(path).read_bytes()
