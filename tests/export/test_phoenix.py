"""Arize Phoenix, started on 127.0.0.1, ingests our OTLP/HTTP protobuf export as we meant it.

Phoenix is an optional test dependency (``scripts/install.sh --test`` installs it); without it
the test skips, except under CI where it must run. Its gRPC receiver (which binds every
interface) is disabled and it may not fetch anything from outside (see phoenix_server.py).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrace.core.model import Trace
from orchestrace.export.otlp import export_otlp
from orchestrace.gen import generate

pytestmark = pytest.mark.slow

if not os.environ.get("CI"):
    pytest.importorskip(
        "phoenix.server.main", reason="Arize Phoenix not installed (scripts/install.sh --test)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, Path]]:
    """Base URL of a Phoenix server of our own, the gRPC port it was told (and must not open), and
    the strace log of its sockets."""
    port, grpc_port = _free_port(), _free_port()
    work = tmp_path_factory.mktemp("phoenix")
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    }
    log = open(work / "server.log", "wb")  # noqa: SIM115
    cmd = [sys.executable, str(Path(__file__).with_name("phoenix_server.py"))]
    strace = shutil.which("strace")
    if strace is None and os.environ.get("CI"):
        pytest.fail("strace is required for this test under CI (scripts/install.sh --test installs it)")
    if strace is not None:  # record every bind()/connect() of the server and its threads
        cmd = [strace, "-f", "-qq", "-e", "trace=connect,bind", "-o", str(work / "net.log"), *cmd]
    # its own process group: strace does not pass SIGTERM on, so the group is signalled at the end
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        # a watchdog, not a speed check: a machine loaded by other jobs (load 18 on 2 cores) had
        # not served /healthz after 180 s; it returns as soon as the server answers
        deadline = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("Phoenix did not start:\n" + (work / "server.log").read_text()[-2000:])
                time.sleep(1)
        yield url, grpc_port, work / "net.log"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _spans(url: str, project: str, expected: int) -> list:
    """Every span Phoenix stored for ``project`` (ingestion is asynchronous: wait for ``expected``)."""
    import httpx
    from phoenix.client import Client

    client = Client(base_url=url)
    # a watchdog, not a speed check: it returns as soon as every span is stored (a loaded machine
    # took over 60 s for the Codex session's 313 spans)
    deadline = time.monotonic() + 600
    while True:
        try:  # the project appears with its first stored span
            got = client.spans.get_spans(project_identifier=project, limit=100_000)
        except (httpx.HTTPStatusError, httpx.TransportError):  # not stored yet, or a loaded server
            got = []
        if len(got) >= expected or time.monotonic() > deadline:
            return got
        time.sleep(1)


def _project_totals(url: str, project: str) -> tuple[int, int]:
    """Phoenix's own token total and trace count for a project (its GraphQL API, as the UI reads it)."""
    import httpx

    q = "{ projects { edges { node { name traceCount tokenCountTotal } } } }"
    nodes = httpx.post(url + "/graphql", json={"query": q}, timeout=30).json()["data"]["projects"]["edges"]
    node = next(n["node"] for n in nodes if n["node"]["name"] == project)
    return int(node["tokenCountTotal"]), int(node["traceCount"])


def _check(url: str, project: str, traces: list[Trace], **options: object) -> list:
    n = export_otlp(traces, url + "/v1/traces", project=project, **options)
    spans = _spans(url, project, n)
    assert len(spans) == n
    ids = {s["context"]["span_id"] for s in spans}
    roots = [s for s in spans if not s.get("parent_id")]
    assert len(roots) == len(traces)  # one root per trace, every other span hangs under a stored span
    assert all(s["parent_id"] in ids for s in spans if s.get("parent_id"))
    kinds = Counter(s["span_kind"] for s in spans)
    events = Counter(e.type for tr in traces for e in tr.events)
    assert kinds["TOOL"] == events["tool_call"]
    assert kinds["AGENT"] == sum(len(tr.agents()) for tr in traces)
    tokens, n_traces = _project_totals(url, project)
    assert n_traces == len(traces)
    assert tokens == sum(e.tokens for tr in traces for e in tr.events)  # every token, on LLM spans
    return spans


def test_phoenix_ingests_generated_traces(phoenix: tuple[str, int, Path]) -> None:
    url, grpc_port, _ = phoenix
    traces = [generate(seed=s, size=30, topology=t) for s, t in enumerate(("hierarchical", "swarm"))]
    spans = _check(url, "orchestrace-gen", traces)
    # spawn tree: every agent span of a spawned agent hangs under the spawn event's span
    by_id = {s["context"]["span_id"]: s for s in spans}
    spawned = [
        s for s in spans if s["span_kind"] == "AGENT" and by_id[s["parent_id"]]["name"].startswith("spawn ")
    ]
    assert len(spawned) == sum(e.type == "spawn" for tr in traces for e in tr.events if e.to) > 0
    # stamped now (the traces do not say when they ran), not in 2023
    assert all(s["start_time"] >= "2026" for s in spans)
    with socket.socket() as s:  # the gRPC receiver, which would listen on every interface, is off
        assert s.connect_ex(("127.0.0.1", grpc_port)) != 0


def test_phoenix_ingests_a_real_codex_session_with_content(
    phoenix: tuple[str, int, Path], public_excerpt: Path
) -> None:
    from orchestrace.importers import codex

    tr = next(codex.load(next((public_excerpt / "codex").glob("rollout-*.jsonl")), keep_content=True))
    spans = _check(phoenix[0], "codex", [tr], include_content=True)
    llm = [s for s in spans if s["span_kind"] == "LLM"]
    assert sum(s["attributes"]["llm.token_count.total"] for s in llm) == tr.costs["tokens"] == 6_064_954
    root = next(s for s in spans if not s.get("parent_id"))
    assert root["attributes"]["input.value"] == next(
        e.content for e in tr.events if e.type == "human_intervention"
    )
    tools = [s for s in spans if s["span_kind"] == "TOOL"]
    assert all(s["attributes"]["output.value"] for s in tools if "output.value" in s["attributes"])
    assert sum("output.value" in s["attributes"] for s in tools) >= 100


_ADDR = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def test_phoenix_stayed_on_loopback(phoenix: tuple[str, int, Path]) -> None:
    """Every address the server bound or connected to, over both tests above, is loopback."""
    net = phoenix[2]
    if not net.exists():
        pytest.skip("strace not installed: socket addresses not recorded")
    addrs = [a or b for a, b in _ADDR.findall(net.read_text())]
    assert addrs, "strace saw no IP socket at all: the check would prove nothing"
    outside = sorted({a for a in addrs if not ipaddress.ip_address(a).is_loopback})
    assert outside == [], f"Phoenix used addresses outside loopback: {outside}"
