"""Viewer benchmark: build a 100,000-event page and open it in headless Chromium.

Prints the Python build time and page size, then per load (in the page, performance.now() from
navigation start): script start, JSON parsed, indexes built, first frame drawn and rasterised;
then frame times for pans and zooms and for the first graph-view frame.

    python bench/viewer_bench.py [--size 100000] [--topology hierarchical] [--loads 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from orchestrace.gen import generate
from orchestrace.viewer import render_html

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--topology", default="hierarchical")
    ap.add_argument("--width", type=int, default=6)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--loads", type=int, default=3)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores)")
    t = time.perf_counter()
    tr = generate(seed=a.seed, size=a.size, topology=a.topology, width=a.width)
    print(
        f"trace: {len(tr.events)} events, {len(tr.edges)} edges, {len(tr.agents())} agents "
        f"(generated in {time.perf_counter() - t:.1f} s)"
    )
    t = time.perf_counter()
    page = render_html(tr)
    build = time.perf_counter() - t
    path = Path(tempfile.mkdtemp()) / "bench.html"
    path.write_text(page, encoding="utf-8")
    print(f"page: {len(page) / 1e6:.1f} MB, built in {build:.2f} s (payload + critical path + taint)")

    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=a.chromium, args=ARGS)
        firsts = []
        for k in range(a.loads):
            pg = b.new_page(viewport={"width": 1400, "height": 800})
            pg.goto(path.as_uri(), timeout=180_000)
            tm = pg.evaluate("window.__orchestrace.timing")
            firsts.append(tm["drawn"])
            print(
                f"load {k + 1}: script {tm['script']:.0f} ms, parsed {tm['parsed']:.0f}, "
                f"indexed {tm['indexed']:.0f}, first frame {tm['drawn']:.0f} ms"
            )
            if k < a.loads - 1:
                pg.close()
        moves = [
            "zoom(3)",
            "pan(-200, 0)",
            "pan(-200, 0)",
            "pan(200, 0)",
            "pan(200, 0)",
            "pan(0, -240)",
            "pan(0, 240)",
            "zoom(0.5)",
        ] * 3
        ms = [pg.evaluate(f"window.__orchestrace.{m}")["ms"] for m in moves]
        t = time.perf_counter()
        pg.evaluate("window.__orchestrace.view('graph')")
        graph = pg.evaluate("window.__orchestrace.draw()")["ms"]
        graph_total = (time.perf_counter() - t) * 1000
        gms = [
            pg.evaluate(f"window.__orchestrace.{m}")["ms"]
            for m in ["pan(-300, 0)", "zoom(0.5)", "pan(0, -200)"] * 3
        ]
        b.close()
    print(
        f"first frame: best {min(firsts):.0f} ms, median {statistics.median(firsts):.0f} ms over {len(firsts)} loads "
        f"(target < 2000 ms: {'met' if min(firsts) < 2000 else 'MISSED'})"
    )
    ms.sort()
    print(
        f"timeline pan/zoom frames: median {statistics.median(ms):.0f} ms, p90 {ms[int(0.9 * len(ms))]:.0f} ms, "
        f"max {ms[-1]:.0f} ms ({len(ms)} frames; target median < 150 ms: "
        f"{'met' if statistics.median(ms) < 150 else 'MISSED'})"
    )
    print(
        f"graph view: layout + first frame {graph_total:.0f} ms (frame {graph:.0f} ms); "
        f"pan/zoom median {statistics.median(gms):.0f} ms"
    )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
