"""``orchestrace serve`` as a user runs it: a process that prints where it listens, records a run
through --server (a scripted upstream on 127.0.0.1), and on Ctrl-C (or SIGTERM) closes the open runs' traces."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from gateway_teams import upstream as scripted_server
from test_gateway_tools import scripted_reply

from orchestrace.core.io import load_one

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_serve_records_until_interrupted_then_closes_its_runs(tmp_path, stop):
    upstream = scripted_server(scripted_reply, [])
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-m", "orchestrace", "serve", "--port", "0", "--runs", str(tmp_path / "runs")]
    cmd += ["--agents", "researcher", "--server", f"http://127.0.0.1:{upstream.server_address[1]}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+)/runs/RUN/v1", line).group(1)
        body = {"model": "researcher", "messages": [{"role": "user", "content": "Paris?"}]}
        r = httpx.post(f"{url}/runs/cli-1/v1/chat/completions", json=body, timeout=30)
        assert (
            r.json()["choices"][0]["message"]["content"] == "Paris has been the capital of France since 987."
        )
        # a span of the run (OTLP/JSON): merged as the server stops and closes the run
        span = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7"}
        span |= {"name": "execute_tool lookup", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
        export = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
        assert httpx.post(f"{url}/runs/cli-1/v1/traces", json=export, timeout=30).json() == {}
        proc.send_signal(stop)  # Ctrl-C, or a service manager's stop
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        upstream.shutdown()
        upstream.server_close()
    assert proc.returncode == 0, err
    assert "1 run(s) recorded" in out and "Traceback" not in err
    tr = load_one(tmp_path / "runs" / "cli-1.events.jsonl")  # closed on Ctrl-C: a whole trace
    assert tr.metadata["outcome"]["status"] == "ok"
    assert [e.agent for e in tr.events if e.type == "return"] == ["researcher"]
    assert [e.tool for e in tr.events if e.type == "tool_call"] == ["lookup"]


def test_serve_on_another_address_warns(tmp_path, capsys):
    from orchestrace.cli import main

    with pytest.raises(SystemExit) as e:  # refused before listening: the warning came first
        main(["serve", "--host", "0.0.0.0", "--adapters", "agent", "--runs", str(tmp_path)])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "not loopback" in err and "OT740" in err


@pytest.mark.parametrize(
    ("options", "said"),
    [
        # each served on: a NaN temperature given to every call, a default never given, calls that
        # all failed upstream, a policy that was never loaded, the last of two roles
        ({"temperature": float("nan")}, "--temperature must be a finite number >= 0, got nan"),
        ({"max_tokens": 100, "max_tokens_cap": 10}, "--max-tokens 100 is above --max-tokens-cap 10"),
        ({"server": "gpu:8000"}, "--server must be an http(s) URL"),
        ({"policy": "runs/team/iter-003/policy"}, "--policy loads adapters into the local model"),
        ({"agents": "a=planner,a=writer"}, "agent 'a' named twice"),
        ({"allow_hosts": ("",)}, "--allow-host needs a host name"),
    ],
)
def test_serve_options_that_would_serve_wrongly_are_refused(tmp_path, options, said):
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.gateway.launch import ServeOptions, build

    base = {"server": "http://127.0.0.1:9", "agents": "a", "port": 0, "runs": str(tmp_path / "runs")}
    with pytest.raises(OrchestraceError) as e:
        build(ServeOptions(**{**base, **options})).server_close()
    assert e.value.code == "OT740" and said in e.value.message


def test_serve_runs_folder_that_is_a_file_is_named(tmp_path):
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.learn.gateway.launch import ServeOptions, build

    (tmp_path / "runs").write_text("")  # FileExistsError: an internal error (exit 3)
    opts = ServeOptions(server="http://127.0.0.1:9", agents="a", port=0, runs=str(tmp_path / "runs"))
    with pytest.raises(OrchestraceError, match="cannot make the runs folder") as e:
        build(opts).server_close()
    assert e.value.code == "OT001" and e.value.path == str(tmp_path / "runs")
