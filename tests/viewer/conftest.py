"""One headless Chromium (Debian's /usr/bin/chromium, never a downloaded browser) per test session."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("ORCHESTRACE_CHROMIUM", "/usr/bin/chromium")
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


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@dataclass
class Opened:
    page: Any
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    """open_page(path) -> Opened: a fresh page with console errors, dialogs and requests recorded."""
    contexts = []

    def _open(path: Path, *, width: int = 1400, height: int = 800, timeout: float = 60_000) -> Opened:
        ctx = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(ctx)
        page = ctx.new_page()
        o = Opened(page)
        page.on("console", lambda m: o.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: o.errors.append(str(e)))
        page.on("dialog", lambda d: (o.dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: o.requests.append(r.url))
        page.goto(path.as_uri(), timeout=timeout)
        page.wait_for_function("window.__orchestrace !== undefined", timeout=timeout)
        return o

    yield _open
    for c in contexts:
        c.close()


@pytest.fixture(scope="session")
def browse_world(tmp_path_factory) -> Any:
    """The trace browser's store and training run (tests/viewer/browse_kit.py), built once."""
    from concurrent.futures import ThreadPoolExecutor

    from .browse_kit import build

    # in a thread of its own: the runtime's asyncio.run cannot start inside the event loop that
    # playwright's sync API keeps running in this one once the browser is up
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(build, tmp_path_factory.mktemp("browse")).result()


@pytest.fixture(scope="session")
def browse_server(browse_world) -> Iterator[str]:
    """One browser server over ``browse_world`` for the session; yields its base URL (no slash)."""
    from orchestrace.viewer.browse.server import ui_server

    server, _ = ui_server(str(browse_world.store), [str(browse_world.run_dir)])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
