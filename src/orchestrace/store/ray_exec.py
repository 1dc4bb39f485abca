"""Ray for bulk work: the same function over many items, locally or as Ray tasks, same results.

``ray=None`` runs in this process; ``"local"`` starts a private single-machine Ray instance
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
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Annotated, Any, TypeVar

import numpy as np
import typer
from typer.core import TyperCommand

from ..core.errors import OrchestraceError

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

#: The ``--ray [ADDRESS]`` option for any command that does bulk work: ``--ray`` alone starts a
#: local loopback-only instance, ``--ray ADDRESS`` joins a cluster. Register the command with
#: ``app.command(name, cls=RayCommand)`` so the address may be left out, and pass the value on
#: as ``parallel_map(..., ray=value)``.
RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Run the bulk work as Ray tasks. Alone (last, or before another option): a local "
        'instance on loopback. With an address: "auto", HOST:PORT or ray://HOST:10001.',
    ),
]


class RayCommand(TyperCommand):
    """A typer command whose ``--ray`` option may be given without a value (meaning "local").

    Typer's parser has no optional-value options, so a bare ``--ray`` (last, or followed by
    another option) gets ``local`` inserted after it before parsing.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, a in enumerate(args):
            out.append(a)
            if a == "--":
                out.extend(args[i + 1 :])
                break
            if a == "--ray" and (i + 1 == len(args) or args[i + 1].startswith("-")):
                out.append(LOCAL)
        return super().parse_args(ctx, out)


def ray_home() -> str:
    """A private HOME folder holding Ray's bootstrap file (so nothing probes cloud metadata)."""
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


def parallel_imap(
    fn: Callable[..., R],
    items: Iterable[Any],
    *,
    ray: str | None = None,
    args: tuple[Any, ...] = (),
    seed: int | None = None,
    batch: int = 1,
    window: int | None = None,
) -> Iterator[R]:
    """``fn(item, *args)`` (or ``fn(item, item_seed, *args)`` with ``seed``) for every item, in order.

    With ``ray`` each ``batch`` of items is one Ray task and at most ``window`` tasks are in
    flight, so results stream back without holding them all.
    """
    seq = list(items)
    seeds = item_seeds(seed, len(seq)) if seed is not None else None
    batches = [
        (seq[i : i + batch], None if seeds is None else seeds[i : i + batch])
        for i in range(0, len(seq), max(1, batch))
    ]
    if ray is None:
        for xs, ss in batches:
            yield from _call_batch(fn, xs, ss, args)
        return
    import ray as ray_mod

    ensure_ray(ray)
    remote = ray_mod.remote(_call_batch)
    fn_ref = ray_mod.put(fn)
    args_ref = ray_mod.put(args)
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
    args: tuple[Any, ...] = (),
    seed: int | None = None,
    batch: int = 1,
) -> list[R]:
    """All results of ``parallel_imap`` as a list (same order as ``items``)."""
    return list(parallel_imap(fn, items, ray=ray, args=args, seed=seed, batch=batch))


def map_traces(
    fn: Callable[..., R],
    source: str | Sequence[str],
    *,
    ray: str | None = None,
    seed: int | None = None,
    where: str | None = None,
    batch: int = 16,
) -> list[R]:
    """``fn(trace[, seed])`` over every trace of a store (path ending .duckdb) or of trace files.

    Traces are read here and shipped to the tasks, so workers on other machines need no
    access to the files; results come in store order (trace id) or file order.
    """
    from .db import traces_of

    paths = [source] if isinstance(source, str) else list(source)
    traces = [tr for p in paths for tr in traces_of(p, where=where)]
    return parallel_map(fn, traces, ray=ray, seed=seed, batch=batch)


# ---------------------------------------------------------------- Ray Data over Parquet


def read_parquet(folder: str, table: str = "events", *, ray: str = LOCAL) -> Any:
    """A Ray Dataset over one exported table (hive partitions ``system=``/``date=`` become columns)."""
    import ray.data

    ensure_ray(ray)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    path = os.path.join(folder, table)
    if not os.path.isdir(path):
        raise OrchestraceError(
            "OT001", f"no exported table {table!r} here (run `orchestrace parquet`)", path=folder
        )
    return ray.data.read_parquet(path)


def agent_cost_ray(folder: str, *, ray: str = LOCAL) -> dict[str, dict[str, float]]:
    """Per-agent events, tokens and USD over an exported Parquet folder, computed with Ray Data.

    Each block is aggregated where it is read (no shuffle); the small per-block tables are
    summed here, so the cost is one pass over the data whatever the number of blocks.
    """
    ds = read_parquet(folder, "events", ray=ray).select_columns(
        ["agent", "tokens_in", "tokens_out", "cost_usd"]
    )
    parts = ds.map_batches(_partial_agent_cost, batch_format="pyarrow").take_all()
    out: dict[str, dict[str, float]] = {}
    for r in parts:
        acc = out.setdefault(r["agent"], {"events": 0, "tokens": 0, "usd": 0.0})
        acc["events"] += int(r["events"])
        acc["tokens"] += int(r["tokens"])
        acc["usd"] += float(r["usd"])
    return dict(sorted(out.items()))


def _partial_agent_cost(batch: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    tokens = pc.add(pc.fill_null(batch["tokens_in"], 0), pc.fill_null(batch["tokens_out"], 0))
    t = pa.table({"agent": batch["agent"], "tokens": tokens, "usd": pc.fill_null(batch["cost_usd"], 0.0)})
    g = t.group_by("agent").aggregate([("agent", "count"), ("tokens", "sum"), ("usd", "sum")])
    return g.rename_columns({"agent_count": "events", "tokens_sum": "tokens", "usd_sum": "usd"})
