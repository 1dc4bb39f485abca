"""A local-model backend shared by several runs (each its own event loop) queues calls in each."""

from __future__ import annotations

import asyncio

from orchestrace.runtime.backends.smollm2 import SmolLM2Backend


def test_lock_follows_the_running_loop() -> None:
    b = SmolLM2Backend()  # the model loads on first call only

    async def contended() -> tuple[asyncio.Lock, asyncio.Lock]:
        lock = b.lock
        async with lock:  # a second waiter binds the lock to this loop
            waiter = asyncio.create_task(_take(b))
            await asyncio.sleep(0)
        await waiter
        return lock, b.lock

    first, again = asyncio.run(contended())
    assert first is again  # one queue within a run
    second, _ = asyncio.run(contended())  # a later run: no "bound to a different event loop" error
    assert second is not first


async def _take(b: SmolLM2Backend) -> None:
    async with b.lock:
        pass
