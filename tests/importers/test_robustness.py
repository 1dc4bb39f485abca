"""Mangled real logs (lines dropped, duplicated, shuffled, cut, garbage) never crash an importer
and never produce an invalid trace: the result is either valid traces or a one-line user error."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from orchestrace import importers
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.validate import validate_trace

CASES = [
    ("claude-code/test/test_data/teammates/ef000000-0000-4000-8000-000000000001.jsonl", "claude-code"),
    (
        "claude-code/test/test_data/real_projects/-src-experiments-claude_p/29ccd257-68b1-427f-ae5f-6524b7cb6f20.jsonl",
        "claude-code",
    ),
    ("claude-code/test/test_data/sidechain.jsonl", "claude-code"),
    ("codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl", "codex"),
    ("chatdev/WareHouse/FlappyBird_THUNLP_20230726121145/20230726121145.log", "chatdev"),
    ("who-and-when/Who&When/Hand-Crafted/1.json", "who-and-when"),
]


def _mangle(lines: list[bytes], rng: random.Random) -> list[bytes]:
    out = list(lines)
    for _ in range(rng.randint(1, 8)):
        op = rng.choice(["drop", "dup", "swap", "cut", "garbage", "blank"])
        if not out:
            break
        i = rng.randrange(len(out))
        if op == "drop":
            out.pop(i)
        elif op == "dup":
            out.insert(i, out[i])
        elif op == "swap":
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        elif op == "cut":
            out[i] = out[i][: rng.randrange(len(out[i]) + 1)]
        elif op == "garbage":
            out.insert(
                i,
                rng.choice(
                    [b"{", b"[1,2]", b"null", b'{"type": 7}', b'{"type":"user","message":5}', b"\xff\xfe"]
                ),
            )
        else:
            out.insert(i, b"   ")
    return out


@pytest.mark.parametrize(("rel", "fmt"), CASES)
def test_mangled_logs_import_or_fail_cleanly(data: Path, tmp_path: Path, rel: str, fmt: str) -> None:
    src = data / rel
    side = src.with_suffix("")
    lines = src.read_bytes().splitlines()
    rng = random.Random(1234)
    imported, refused = 0, 0
    for k in range(30):
        d = tmp_path / f"case{k}"
        d.mkdir()
        f = d / src.name
        f.write_bytes(b"\n".join(_mangle(lines, rng)) + b"\n")
        if side.is_dir():  # keep the sub-agent logs next to the mangled session
            shutil.copytree(side, d / side.name)
        try:
            traces = list(importers.load(f, fmt))
        except OrchestraceError as e:  # a user error: coded, one line
            assert e.code.startswith("OT") and "\n" not in str(e), (k, str(e))
            refused += 1
            continue
        imported += len(traces)
        for tr in traces:
            errs = [str(x) for x in validate_trace(tr) if x.severity == "error"]
            assert errs == [], (k, errs[:3])
    # a mangled JSON document (Who&When) is refused; line logs import what is left, so the
    # validity check above ran
    expected = (imported, refused) == (0, 30) if fmt == "who-and-when" else imported >= 30
    assert expected, (imported, refused)


def test_a_log_whose_file_name_is_not_utf8_is_imported(tmp_path: Path) -> None:
    """Its path went into metadata.source (and a ChatDev name into the trace id) as surrogate
    escapes: the trace could not be written, "str is not valid UTF-8" (exit 3)."""
    import os

    from orchestrace.core.io import load

    src = (
        Path(__file__).parents[1]
        / "data"
        / "public"
        / "who-and-when"
        / "Who&When"
        / "Hand-Crafted"
        / "1.json"
    )
    name = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"w\xfe.json"))
    shutil.copy(src, name)
    out = tmp_path / "out.jsonl"
    importers.import_files([(name, "who-and-when")], str(out))
    (tr,) = load(out)
    assert tr.metadata["source"].endswith("w\\xfe.json") and validate_trace(tr) == []
