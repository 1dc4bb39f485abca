"""core.outputs: a place holding another run is refused; force names every file of that run."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.outputs import Place, claim_outputs, read_record, record_outputs, remove_files


def test_same_run_again_other_run_refused_force_replaces_it_whole(tmp_path: Path) -> None:
    shared = Place(str(tmp_path / "report" / "run.json"), [str(tmp_path / "report" / "plot.png")])
    mine = Place(str(tmp_path / "a.run.json"), [str(tmp_path / "a.bin"), str(tmp_path / "a-extra.bin")])
    files = [str(tmp_path / "a.bin"), str(tmp_path / "a-extra.bin"), str(tmp_path / "report" / "plot.png")]
    (tmp_path / "report").mkdir()
    for f in files:
        Path(f).write_bytes(b"old")
    inputs = {"seed": 0, "costs": (0.1, 0.2)}  # a tuple is stored as a list and still compares equal
    record_outputs("cmd", inputs, [mine, shared], [*files, mine.record, shared.record])
    assert claim_outputs("cmd", inputs, [mine, shared]) == []
    # another run aimed at the shared report folder only: refused, naming what differs
    other = Place(str(tmp_path / "b.run.json"), [str(tmp_path / "b.bin")])
    with pytest.raises(OrchestraceError) as e:
        claim_outputs("cmd", {"seed": 1, "costs": [0.1, 0.2]}, [other, shared])
    assert e.value.code == "OT632" and e.value.exit_code == 1 and "seed (0, now 1)" in e.value.message
    assert e.value.path == shared.record
    # with force, every file of the old run goes, also those outside the places claimed (a.bin)
    doomed = claim_outputs("cmd", {"seed": 1, "costs": [0.1, 0.2]}, [other, shared], force=True)
    assert sorted(doomed) == sorted([*files, mine.record, shared.record])
    assert all(Path(f).exists() for f in doomed)  # nothing removed until the caller writes
    remove_files(doomed)
    assert not any(Path(f).exists() for f in doomed)


def test_unrecorded_or_unreadable_record_is_not_a_run_of_ours(tmp_path: Path) -> None:
    place = Place(str(tmp_path / "p.run.json"), [str(tmp_path / "p.bin")])
    assert claim_outputs("cmd", {}, [place]) == []  # nothing there
    (tmp_path / "p.bin").write_bytes(b"x")
    with pytest.raises(OrchestraceError, match="no recorded run of `cmd` wrote"):
        claim_outputs("cmd", {}, [place])
    (tmp_path / "p.run.json").write_text("[1, 2")
    assert read_record(place.record) is None
    with pytest.raises(OrchestraceError, match="no recorded run"):
        claim_outputs("cmd", {}, [place])
