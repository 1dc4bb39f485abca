"""Store fixtures: a hand-built trace, a small generated corpus in three formats, one Ray instance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_kit import hand_trace

from orchestrace.core.io import save
from orchestrace.core.model import Trace
from orchestrace.gen import generate_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[Trace]]:
    """12 generated traces (6 topologies) in .jsonl, .json and .events.jsonl.gz files, plus the hand trace."""
    d = tmp_path_factory.mktemp("corpus")
    traces = generate_corpus(12, seed=3, size=60)
    files = [d / "a.jsonl", d / "b.json", d / "c.events.jsonl.gz", d / "hand.json"]
    save(traces[:10], files[0])
    save(traces[10], files[1])
    save(traces[11], files[2])
    save(hand_trace(), files[3])
    return files, [*traces, hand_trace()]


@pytest.fixture(scope="session")
def ray_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One local Ray instance (2 CPUs, loopback only) for the whole test session."""
    from orchestrace.parallel import BOOTSTRAP_FILE, BOOTSTRAP_TEXT, start_local

    home = tmp_path_factory.mktemp("rayhome")
    (home / BOOTSTRAP_FILE).write_text(BOOTSTRAP_TEXT)
    start_local(num_cpus=2, home=str(home))
    yield "local"
    import ray

    ray.shutdown()
