"""One folder walk (``core.paths.walk_dir``) for import and the trace commands, one trace writer
(``core.io.save``) for every command that writes traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrace.cli.inputs import expand_paths
from orchestrace.core.io import load, save
from orchestrace.core.paths import glob_paths, walk_dir
from orchestrace.gen import generate
from orchestrace.importers import walk
from orchestrace.learn.stopping.traces import trace_paths


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    (d / "b").mkdir(parents=True)
    (d / ".git").mkdir()
    for rel, seed in (("b/2.json", 2), ("1.json", 1), (".partial-3.json", 3), (".git/4.json", 4)):
        save(generate(seed=seed, size=5), d / rel)
    return d


def test_import_and_trace_commands_walk_a_folder_alike(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    expected = [str(d / "1.json"), str(d / "b" / "2.json")]
    assert list(walk_dir(d)) == expected
    assert walk([d]) == expected
    # the trace commands read hidden files too (a .partial- output being written, .git): not now
    assert list(expand_paths([str(d)])) == expected
    # and a pattern names the same files, for the trace commands and for the trainers' --traces
    pattern = str(d / "**" / "*.json")
    assert glob_paths(pattern) == list(expand_paths([pattern])) == trace_paths(pattern) == expected


def test_save_streams_jsonl_and_writes_nothing_for_no_trace(tmp_path: Path) -> None:
    def traces():
        yield generate(seed=1, size=5)
        assert not (tmp_path / "all.jsonl").exists(), "the output appears only when complete"
        yield generate(seed=2, size=5)

    assert save(traces(), tmp_path / "all.jsonl") == 2
    assert [t.trace_id for t in load(tmp_path / "all.jsonl")] == [
        generate(seed=s, size=5).trace_id for s in (1, 2)
    ]
    assert save(iter(()), tmp_path / "none.json") == 0 and not (tmp_path / "none.json").exists()
    with pytest.raises(Exception, match="exactly one trace, got 2"):
        save([generate(seed=1, size=5)] * 2, tmp_path / "two.json")
    assert sorted(os.listdir(tmp_path)) == ["all.jsonl"]
