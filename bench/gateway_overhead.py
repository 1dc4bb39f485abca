"""What a call through the gateway costs over calling the trainable backend in-process.

    python bench/gateway_overhead.py                      # the real model, 4 new tokens, 12 calls each way
    python bench/gateway_overhead.py --calls 30 --max-tokens 1
    python bench/gateway_overhead.py --scripted --calls 200   # no model: HTTP + parsing + recording alone

One process, one model. The same request (a fixed prompt and seed, greedy so every call samples
the same tokens) is made ``--calls`` times each way, the two ways interleaved (so a busy machine
slows both alike): in-process, ``await backend.chat(req)`` on the ``TrainableBackend`` the gateway
wraps; through the gateway, ``POST /runs/<run>/v1/chat/completions`` with the openai client over
a kept-alive connection to 127.0.0.1, which parses, records the call's events and cache entry,
samples and answers. Reported: the median seconds per call each way, their ratio, and the median
difference (the overhead in milliseconds). ``--window`` is the gateway's batch window (its default
0.01 s lets concurrent calls meet in one batch; a lone call waits it out, so it is in the figure).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

PROMPT = [
    {"role": "user", "content": "In which country is the city of Graz? Answer with just the country name."},
    {"role": "assistant", "content": "Austria"},
    {"role": "user", "content": "In which country is the city of Lyon? Answer with just the country name."},
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--window", type=float, default=0.01, help="the gateway's batch window (s)")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: figures that a busy machine bends least)"
    )
    ap.add_argument("--scripted", action="store_true", help="a scripted backend instead of the model")
    args = ap.parse_args()

    import openai

    from orchestrace.learn.gateway.completers import BackendCompleter, SerialModel
    from orchestrace.learn.gateway.launch import ServeOptions, build
    from orchestrace.learn.gateway.server import start_in_thread
    from orchestrace.runtime.backends.base import ChatRequest

    if args.scripted:
        from orchestrace.runtime.backends.scripted import ScriptedBackend

        backend = ScriptedBackend(choices=["Austria"])
        completer = BackendCompleter(backend, None, batch_window=args.window)
    else:
        from orchestrace.learn.team.backend import TrainableBackend
        from orchestrace.learn.team.model import TeamModel

        serial = SerialModel(TeamModel(["agent"], threads=args.threads))
        backend = TrainableBackend(serial)  # type: ignore[arg-type]
        completer = BackendCompleter(backend, serial, batch_window=args.window)
    runs = tempfile.mkdtemp(prefix="gateway-bench-")
    server = build(ServeOptions(port=0, runs=runs, agents="agent"), completer)
    start_in_thread(server)
    client = openai.OpenAI(base_url=f"{server.url}/runs/bench/v1", api_key="unused", max_retries=0)
    req = ChatRequest(messages=PROMPT, model="agent", temperature=0.0, max_tokens=args.max_tokens, seed=0)

    def direct() -> float:
        t = time.perf_counter()
        asyncio.run(backend.chat(req))
        return time.perf_counter() - t

    def through() -> float:
        t = time.perf_counter()
        client.chat.completions.create(
            model="agent", messages=PROMPT, temperature=0.0, max_tokens=args.max_tokens, seed=0
        )
        return time.perf_counter() - t

    direct(), through()  # warm-up: first forward passes, the connection
    ds, gs = [], []
    for _ in range(args.calls):
        ds.append(direct())
        gs.append(through())
    server.gateway.finish_run("bench")
    server.shutdown()
    server.gateway.close()
    d, g = statistics.median(ds), statistics.median(gs)
    diff = statistics.median(b - a for a, b in zip(ds, gs, strict=True))
    what = "scripted backend" if args.scripted else f"SmolLM2-135M + LoRA, {args.max_tokens} new tokens"
    print(f"{what}, {args.calls} calls each way, batch window {args.window:g} s")
    print(f"in-process backend: median {d * 1000:.1f} ms/call")
    print(f"through the gateway: median {g * 1000:.1f} ms/call")
    print(f"ratio {g / d:.3f}x; overhead (median of paired differences) {diff * 1000:.1f} ms/call")


if __name__ == "__main__":
    main()
