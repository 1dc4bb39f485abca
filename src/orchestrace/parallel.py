"""Bulk work: the same function over many items, locally or as Ray tasks, same results.

``ray=None`` runs in this process, or in ``processes`` worker processes of this machine;
``"local"`` starts a private single-machine Ray instance
bound to loopback only; ``"auto"`` joins a cluster already started on this machine
(``ray start``); ``"HOST:PORT"`` or ``"ray://HOST:10001"`` joins a remote cluster.

Results do not depend on where a function runs: items keep their order, and a function that
needs randomness gets its own seed derived from (seed, item index) with ``numpy.SeedSequence``,
never from the worker it lands on.

Loopback (local mode): Ray binds to the machine's external address and its dashboard probes the
cloud metadata address unless told otherwise. ``start_local`` sets
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (node IP = 127.0.0.1), ``RAY_AUTH_MODE=disabled``,
``RAY_USAGE_STATS_ENABLED=0`` and starts Ray with ``HOME`` pointing at a private folder holding
``ray_bootstrap_config.yaml`` (``provider: {type: local}``), which Ray's processes inherit.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from .core.errors import OrchestraceError
from .core.read import file_size, piece_count

T = TypeVar("T")
R = TypeVar("R")

LOOPBACK_ENV: dict[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}
BOOTSTRAP_FILE = "ray_bootstrap_config.yaml"
BOOTSTRAP_TEXT = "provider: {type: local}\n"
LOCAL = "local"


def ray_home() -> str:
    """A private HOME folder holding Ray's bootstrap file (so nothing probes cloud metadata)."""
    import tempfile  # here and below: start-up time of every command (``python -X importtime``)

    home = os.path.join(tempfile.gettempdir(), f"orchestrace-ray-home-{os.getuid()}")
    os.makedirs(home, mode=0o700, exist_ok=True)
    path = os.path.join(home, BOOTSTRAP_FILE)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(BOOTSTRAP_TEXT)
    return home


def start_local(num_cpus: int | None = None, home: str | None = None) -> None:
    """Start a private Ray instance on this machine, bound to 127.0.0.1 only (no-op if Ray runs)."""
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():  # one Ray per process; a second start would fail
            return
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False  # imported before our settings: correct what it read
    os.environ.update(LOOPBACK_ENV)  # before Ray is imported: it reads them at import time
    import ray

    home = home or ray_home()
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = home  # Ray's processes inherit it; restored once they have started
    try:
        ray.init(
            num_cpus=num_cpus,
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            configure_logging=True,
        )
    finally:
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home


def ensure_ray(address: str = LOCAL, num_cpus: int | None = None) -> None:
    """Connect to Ray once per process (a second call with Ray running is a no-op)."""
    import ray

    if ray.is_initialized():
        return
    if address in ("", LOCAL):
        start_local(num_cpus)
        return
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise OrchestraceError("OT330", f"cannot join the Ray cluster at {address!r}: {e}") from None


def free_cpus(load: float | None = None) -> int:
    """CPUs this process may use that other jobs leave free: its CPUs minus the whole part of
    ``load`` (the 1-minute load average, read when not given). A worker pays only on a free
    core: with another job on it, two processes ran slower than one (docs/performance.md)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return cpus - int(load)


#: the most processes ``file_processes`` starts per CPU, whatever ``--workers`` asks
MAX_PER_CPU = 4


def file_processes(
    files: Sequence[str], workers: int | None, min_bytes: int, piece_bytes: int, load: float | None = None
) -> int:
    """How many processes share ``files``, a large JSONL file cut into pieces of about
    ``piece_bytes`` (``core.read.split_file``): ``workers`` (at most one per piece), or with None
    ``free_cpus(load)``, but 1 (this process) for an input under ``min_bytes``, where a worker
    costs more than it saves. The one rule of ingest and validate. At most ``MAX_PER_CPU`` per CPU:
    ``--workers 100000`` on a corpus of as many files started as many processes."""
    tasks = sum(piece_count(f, piece_bytes) for f in files)
    if workers is not None:
        return max(1, min(workers, tasks, MAX_PER_CPU * (os.cpu_count() or 1)))
    n = min(free_cpus(load), tasks)
    if n < 2 or sum(file_size(f) for f in files) < min_bytes:
        return 1
    return n


def item_seeds(seed: int, n: int) -> list[int]:
    """Independent 63-bit seeds for items 0..n-1, a function of (seed, index) only."""
    return [
        int(s.generate_state(1, np.uint64)[0] >> np.uint64(1)) for s in np.random.SeedSequence(seed).spawn(n)
    ]


def _call_batch(
    fn: Callable[..., Any], items: list[Any], seeds: list[int] | None, args: tuple[Any, ...]
) -> list[Any]:
    if seeds is None:
        return [fn(x, *args) for x in items]
    return [fn(x, s, *args) for x, s in zip(items, seeds, strict=True)]


#: what the workers of a pool share, set once when a worker starts: the function, its extra
#: arguments, every batch, the claim counters [next unclaimed batch, first batch not yet
#: allowed] and the folder the results are written to
_SHARED: tuple[Callable[..., Any], tuple[Any, ...], list[Any], Any, str] | None = None

#: seconds a worker asked to end gets before it is killed (SIGKILL)
STOP_GRACE_S = 1.0
#: signals blocked while a worker is forked, until it has its own handlers (``_serve``)
_FORK_MASK = {signal.SIGINT, signal.SIGTERM}


def _claim(claims: Any) -> int:
    """The next unclaimed batch, or -1 when none is left or allowed yet."""
    with claims.get_lock():
        i = claims[0]
        if i >= claims[1]:
            return -1
        claims[0] = i + 1
        return i


def _claim_and_call() -> int:
    """In a worker: claim a batch, run it, write its results to ``<folder>/<index>`` and return
    the index (-1: nothing claimed). A file, not the pipe: the caller reading a pipe needs the
    GIL for every 64 KB, which its busy main thread holds for 5 ms at a time, so a 14 MB result
    took up to a second to arrive. Pickled without the memo: a third of the time for columns of
    many strings (a cycle needs the memo)."""
    assert _SHARED is not None
    fn, args, batches, claims, folder = _SHARED
    i = _claim(claims)
    if i < 0:
        return i
    out = _call_batch(fn, *batches[i], args)
    with open(os.path.join(folder, str(i)), "wb") as f:
        fast = pickle.Pickler(f, pickle.HIGHEST_PROTOCOL)
        fast.fast = True  # no memo (deprecated, still in CPython 3.13)
        try:
            fast.dump(out)
        except (ValueError, RecursionError):
            f.seek(0)
            f.truncate()
            pickle.dump(out, f, pickle.HIGHEST_PROTOCOL)
    return i


def _take(folder: str, i: int) -> list[Any]:
    path = os.path.join(folder, str(i))
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return pickle.loads(data)


def _serve(
    conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], batches: list[Any], claims: Any, folder: str
) -> None:
    """A worker's life: for every request on ``conn``, claim and run a batch, answer with
    ``(index, error)``; a ``False`` request (or a closed pipe) ends it."""
    global _SHARED
    _SHARED = (fn, args, batches, claims, folder)
    # the caller forks with SIGINT and SIGTERM blocked: a handler it has (pytest's, Ray's, which
    # raises SystemExit) must not run in a worker, where the exception would unwind into a copy of
    # the caller's own stack and run its code (seen: a worker ran pytest's teardown of a Ray
    # fixture and hung the session); only with these set is it safe to take signals again
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the caller stops the pool, no traceback here
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_MASK)
    try:
        while conn.recv():
            try:
                answer: tuple[int, BaseException | None] = (_claim_and_call(), None)
            except Exception as e:  # the caller raises it, as if it had run the batch itself
                answer = (-1, e)
            try:
                conn.send(answer)
            except Exception:  # an error that does not pickle: its text still reaches the caller
                conn.send((-1, RuntimeError(repr(answer[1]))))
    except (EOFError, OSError):  # the caller has gone
        pass


def _stop(procs: list[Any], conns: list[Any], now: bool) -> None:
    """End every worker within a bounded time, whatever signal handlers or locks it inherited:
    ``now`` (an error, or the caller stopped early) kills them at once (SIGKILL: their batches
    have no reader, and a signal they could handle ran code they inherited); otherwise they are
    asked to end, given ``STOP_GRACE_S``, then killed. Reaped either way. A pool stopped with
    ``ProcessPoolExecutor.shutdown`` once waited for ever on a worker forked after Ray had
    started."""
    for p, c in zip(procs, conns, strict=True):
        try:
            if now:
                p.kill()
            else:
                c.send(False)
        except (OSError, ValueError):
            pass
    for p in procs:
        p.join(STOP_GRACE_S)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    for c in conns:
        c.close()


def _died() -> OrchestraceError:
    return OrchestraceError("OT331", "a worker process died (killed, or out of memory?): try fewer workers")


def _process_imap(
    batches: list[tuple[list[Any], list[int] | None]],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    processes: int,
    window: int,
) -> Iterator[Any]:
    """Batches over this process and ``processes - 1`` workers, results in order.

    This process computes the first batch; then whoever is free claims the next one: the
    workers, and this process whenever the result it must yield next is not there yet (its own
    results are never pickled). At most ``window`` batches past the one to yield next may be
    claimed, so memory stays bounded however many batches there are. On Linux the workers are
    forked: ``fn``, ``args`` and the batches (however large) are inherited, not pickled; elsewhere
    they are pickled once per worker. Only results cross between processes. A worker that dies
    (killed, out of memory) is an error (OT331), not a wait for a result that never comes; on any
    error or early stop the workers are stopped within a bounded time (``_stop``).
    """
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("fork" if sys.platform == "linux" else "spawn")
    n = len(batches)
    claims = ctx.Array("q", [1, min(n, window)])  # batch 0 is this process's: it is needed first
    import tempfile

    folder = tempfile.mkdtemp(prefix="orchestrace-results-")
    procs: list[Any] = []
    conns: list[Any] = []
    clean = False
    try:
        for _ in range(processes - 1):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(theirs, fn, args, batches, claims, folder), daemon=True)
            if hasattr(signal, "pthread_sigmask"):
                mask = signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_MASK)
                try:
                    p.start()
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            else:
                p.start()
            theirs.close()
            procs.append(p)
            conns.append(mine)
        asked = [0] * len(procs)  # requests each worker has not answered yet
        idle: list[
            int
        ] = []  # workers whose request found nothing allowed yet: asked again when the window moves

        def ask(w: int) -> None:
            try:
                conns[w].send(True)
            except OSError:  # its end of the pipe is closed: it has died
                raise _died() from None
            asked[w] += 1

        def collect(w: int) -> None:
            try:
                i, err = conns[w].recv()
            except (EOFError, OSError):
                raise _died() from None
            asked[w] -= 1
            if err is not None:
                raise err
            if i < 0:
                idle.append(w)
            else:
                done[i] = _take(folder, i)
                ask(w)

        for w in range(len(procs)):  # two requests per worker: one finishing a batch finds the next waiting
            ask(w)
            ask(w)
        done: dict[int, list[Any]] = {0: _call_batch(fn, *batches[0], args)}
        for j in range(n):
            with claims.get_lock():
                claims[1] = min(n, j + window)
                moved = claims[0] < claims[1]
            while moved and idle:
                ask(idle.pop())
            while j not in done:
                for w in range(len(procs)):
                    while asked[w] and conns[w].poll():
                        collect(w)
                if j in done:
                    break
                k = _claim(claims)
                if k >= 0:
                    done[k] = _call_batch(fn, *batches[k], args)
                    continue
                # j is being computed by a worker: wait for any answer, or a worker's death
                busy = [w for w in range(len(procs)) if asked[w]]
                ready = wait([conns[w] for w in busy] + [procs[w].sentinel for w in busy])
                for w in busy:
                    if conns[w] in ready or conns[w].poll():
                        collect(w)
                    elif procs[w].sentinel in ready:
                        raise _died()
            yield from done.pop(j)
        clean = True
    finally:  # an error here or in a worker, or the caller stopped early: stop the workers now
        _stop(procs, conns, now=not clean)
        shutil.rmtree(folder, ignore_errors=True)


def parallel_imap(
    fn: Callable[..., R],
    items: Iterable[Any],
    *,
    ray: str | None = None,
    processes: int = 1,
    args: tuple[Any, ...] = (),
    seed: int | None = None,
    batch: int = 1,
    window: int | None = None,
) -> Iterator[R]:
    """``fn(item, *args)`` (or ``fn(item, item_seed, *args)`` with ``seed``) for every item, in order.

    With ``ray`` each ``batch`` of items is one Ray task; without it, ``processes`` > 1 shares
    the batches between this process and ``processes - 1`` worker processes (``fn`` must be a
    module-level function). At most ``window`` batches are in flight, so results stream back
    without holding them all.
    """
    seq = list(items)
    seeds = item_seeds(seed, len(seq)) if seed is not None else None
    batches = [
        (seq[i : i + batch], None if seeds is None else seeds[i : i + batch])
        for i in range(0, len(seq), max(1, batch))
    ]
    if ray is None and processes > 1 and len(batches) > 1:
        yield from _process_imap(batches, fn, args, processes, max(1, window or 2 * processes))
        return
    if ray is None:
        for xs, ss in batches:
            yield from _call_batch(fn, xs, ss, args)
        return
    import ray as ray_mod

    ensure_ray(ray)
    remote = ray_mod.remote(_call_batch)
    fn_ref = ray_mod.put(fn)
    args_ref = ray_mod.put(args)
    if not window and ray in ("", LOCAL):
        # this machine's CPUs, not Ray's cluster_resources(): that asks the GCS through a second
        # client, and once (a test run on a loaded machine, GCS server up) it had not returned
        # after 10 minutes
        window = 2 * (os.cpu_count() or 1)
    window = window or max(2, 2 * int(ray_mod.cluster_resources().get("CPU", 1)))
    pending: deque[Any] = deque()
    todo = iter(batches)
    for xs, ss in todo:
        pending.append(remote.remote(fn_ref, xs, ss, args_ref))
        if len(pending) >= window:
            break
    while pending:
        out = ray_mod.get(pending.popleft())
        nxt = next(todo, None)
        if nxt is not None:
            pending.append(remote.remote(fn_ref, nxt[0], nxt[1], args_ref))
        yield from out


def parallel_map(
    fn: Callable[..., R],
    items: Sequence[Any],
    *,
    ray: str | None = None,
    processes: int = 1,
    args: tuple[Any, ...] = (),
    seed: int | None = None,
    batch: int = 1,
) -> list[R]:
    """All results of ``parallel_imap`` as a list (same order as ``items``)."""
    return list(parallel_imap(fn, items, ray=ray, processes=processes, args=args, seed=seed, batch=batch))
