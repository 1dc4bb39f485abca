"""Outputs one run owns, so that one command does not silently overwrite part of another's.

A command that writes several files under one name (a policy and its siblings, a report folder)
records what run wrote them: the command, its inputs and every file, in a small JSON record at
each place it writes (``<policy>.run.json``, ``<report dir>/run.json``). Before writing, it claims
those places: the same command with the same inputs is the same run and rewrites its own files
(re-running is fine); anything else there (another run's record, or files no record names: an
older version, a hand-made copy) is refused, and ``force`` removes every file of the old runs
before the new one writes, so no sibling of the old run (an ``-agg`` policy, a report) is left
beside the new one. ``train stop --traces ... -o runs/stop/policy`` replaced the main job's
policies and report and left its ``-agg`` policies, which later commands read as one run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import BadInput
from .paths import make_dirs


@dataclass(frozen=True)
class RunRecord:
    """What a run wrote at a place: its command, its inputs (JSON values) and its files."""

    command: str
    inputs: dict[str, Any]
    files: list[str]


@dataclass(frozen=True)
class Place:
    """Where a run writes: its record file and every file a run of the command may leave there
    (also those the given options do not write, so a different run's leftovers are seen)."""

    record: str
    files: Sequence[str]


def read_record(path: str) -> RunRecord | None:
    """The record at ``path``; None when there is none or it is not one (an unrecorded place)."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        return RunRecord(str(raw["command"]), dict(raw["inputs"]), [str(p) for p in raw["files"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _plain(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs as a record stores them (tuples as lists), so a re-run compares equal."""
    return json.loads(json.dumps(inputs, sort_keys=True))


def _differences(old: RunRecord, command: str, inputs: dict[str, Any]) -> str:
    if old.command != command:
        return f"written by `{old.command}`"
    keys = sorted(k for k in {*old.inputs, *inputs} if old.inputs.get(k) != inputs.get(k))
    return "other " + ", ".join(f"{k} ({old.inputs.get(k)!r}, now {inputs.get(k)!r})" for k in keys)


def claim_outputs(
    command: str, inputs: dict[str, Any], places: Sequence[Place], *, force: bool = False
) -> list[str]:
    """Refuse (OT632, exit 1) to write at ``places`` holding another run. With ``force``, the files
    of the runs found there (those their records name, and the unrecorded files at the places),
    for the caller to ``remove_files`` once it is about to write: a run that fails before that
    leaves the old one whole. The same command with the same ``inputs`` is the same run: none."""
    inputs = _plain(inputs)
    doomed: set[str] = set()
    for place in places:
        old = read_record(place.record)
        if old is not None and old.command == command and old.inputs == inputs:
            continue
        present = [p for p in (*place.files, place.record, *(old.files if old else ())) if os.path.isfile(p)]
        if not present:
            continue
        if not force:
            why = (
                f"holds the output of another run ({_differences(old, command, inputs)})"
                if old is not None
                else f"holds files that no recorded run of `{command}` wrote ({present[0]})"
            )
            raise BadInput(
                "OT632",
                f"{why}; writing here would replace part of it. Write to another folder or name, or pass "
                "--force to replace that run (all its files)",
                path=place.record if old is not None else present[0],
            )
        doomed.update(present)
    return sorted(doomed)


def remove_files(paths: Sequence[str]) -> None:
    """Remove the files of the runs being replaced (``claim_outputs`` with ``force``)."""
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def record_outputs(
    command: str, inputs: dict[str, Any], places: Sequence[Place], files: Sequence[str]
) -> list[str]:
    """Write the run's record at each place (``files``: everything the run wrote, records
    included); returns the record paths."""
    text = json.dumps(
        {"command": command, "inputs": _plain(inputs), "files": list(files)}, indent=1, sort_keys=True
    )
    for place in places:
        if d := os.path.dirname(place.record):
            make_dirs(d)
        with open(place.record, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return [place.record for place in places]
