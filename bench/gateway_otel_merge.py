"""How long merging a run's OpenTelemetry spans takes when the run ends (the gateway's loop is busy
meanwhile, so other runs' calls wait that long).

    python bench/gateway_otel_merge.py                     # 1,000 / 10,000 / 100,000 spans
    python bench/gateway_otel_merge.py --spans 100000

Each run: one gateway call (a scripted backend, no model), then one ``invoke_agent`` span holding
N - 1 ``execute_tool`` spans, all at the same time (the worst case for ordering edges of one
time), handed to the run as the OTLP route would; then the run is closed (merge + trace written)
and the trace validated. Reported: seconds to close, and the validator's findings (none expected).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from orchestrace.core.validate import validate_path
from orchestrace.learn.gateway.completers import BackendCompleter
from orchestrace.learn.gateway.protocol import parse_call
from orchestrace.learn.gateway.service import Gateway, Team
from orchestrace.runtime.backends.scripted import ScriptedBackend


def span(i: int, parent: str, name: str, attrs: dict[str, str]) -> dict:
    return {
        "trace": "t",
        "id": f"{i:016x}",
        "parent": parent,
        "name": name,
        "start": time.time(),
        "end": time.time(),
        "attrs": attrs,
        "status": None,
        "links": [],
        "resource": {},
    }


def one(n: int, runs: str) -> None:
    gw = Gateway(BackendCompleter(ScriptedBackend(rules={}), None, batch_window=0), Team(), runs)
    try:
        gw.call("r", "a", parse_call(b'{"model": "a", "messages": [{"role": "user", "content": "go"}]}', 64))
        root = span(
            0, "", "invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
        )
        tools = [span(i, root["id"], "execute_tool t", {"gen_ai.tool.name": "t"}) for i in range(1, n)]
        for t in tools:
            t["start"] = t["end"] = root["start"]
        gw.otel_spans("r", [root, *tools])
        t0 = time.perf_counter()
        path = gw.finish_run("r")
        took = time.perf_counter() - t0
        findings = [f.code for f in validate_path(path).findings]
        print(f"{n:>7} spans: merged and closed in {took:.2f} s; validator findings: {findings or 'none'}")
    finally:
        gw.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spans", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    args = ap.parse_args()
    for n in args.spans:
        with tempfile.TemporaryDirectory() as d:
            one(n, d)


if __name__ == "__main__":
    main()
