"""validate with worker processes: a JSONL file cut into pieces gives the output of one process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from orchestrace import validation
from orchestrace.core.io import dumps
from orchestrace.core.read import split_file
from orchestrace.gen import generate_corpus
from orchestrace.validation import validate_files, validate_processes


def _corpus(path: Path, n: int, size: int) -> None:
    """``n`` generated traces, one a line, with problems spread over the file (a line that is no
    JSON, a duplicate key, a negative time, edges backwards in time, an id met again with other
    content, a repeated trace, blank lines, the last line's time)."""
    lines = [dumps(t) for t in generate_corpus(n, seed=5, size=size)]
    docs = [orjson.loads(x) for x in lines]
    k = n // 8

    def edited(i: int, change) -> bytes:  # type: ignore[no-untyped-def]
        d = orjson.loads(lines[i])
        change(d)
        return orjson.dumps(d)

    def backwards(d: dict) -> None:  # three edges reversed: each runs back in time
        d["edges"][:3] = [{**e, "src": e["dst"], "dst": e["src"]} for e in d["edges"][:3]]

    lines[k] = b'{"trace_id": "cut", "events": ['
    lines[2 * k] = lines[2 * k].replace(b"{", b'{"trace_id": "twice",', 1)
    lines[3 * k] = edited(3 * k, lambda d: d["events"][3].update(t=-1.0))
    lines[4 * k] = edited(4 * k, backwards)
    lines[5 * k] = edited(5 * k, lambda d: d.update(task_id="other", trace_id=docs[1]["trace_id"]))
    lines[6 * k] = lines[k + 1]
    lines[7 * k] = edited(7 * k, backwards)
    lines[-1] = edited(n - 1, lambda d: d["events"][-1].update(t_end=-2.0))
    lines.insert(3, b"   ")
    lines.insert(6 * k, b"")
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize("max_findings", [200, 7, 0])
def test_pieces_give_the_results_of_one_process(tmp_path: Path, monkeypatch, max_findings: int) -> None:
    """Pieces of about three lines, over three processes: every result field the same as the
    file read whole, with the cap on findings reached inside a piece (7) or at once (0)."""
    f = tmp_path / "c.jsonl"
    _corpus(f, 40, 30)
    bad = tmp_path / "b.jsonl.gz"  # compressed: one piece, between the others
    bad.write_bytes(b"\x1f\x8b not gzip")
    files = [str(f), str(bad), str(f)]
    monkeypatch.setattr(validation, "PIECE_BYTES", f.stat().st_size // 13)
    assert len(split_file(str(f), validation.PIECE_BYTES)) >= 12
    assert validate_processes(files, 3) == 3
    one = list(validate_files(files, max_findings=max_findings, workers=1))
    three = list(validate_files(files, max_findings=max_findings, workers=3))
    assert [r.to_json() for r in three] == [r.to_json() for r in one]
    assert [(r.valid, r.traces, r.truncated) for r in three] == [
        (r.valid, r.traces, r.truncated) for r in one
    ]
    codes = {x.code for x in one[0].findings}
    if max_findings == 200:
        assert {"OT006", "OT005", "OT107", "OT204", "OT215", "OT216"} <= codes, codes
    assert one[0].traces == 40 and not one[0].valid


@pytest.mark.timeout(120)
def test_cli_output_and_exit_code_do_not_depend_on_workers(tmp_path: Path) -> None:
    """The command as a user runs it, on a 9 MB corpus (three 4 MB pieces) with invalid traces in
    each piece: the same bytes on stdout and the same exit code with 1 and 2 processes, and the
    lines of the findings counted from the start of the file."""
    f = tmp_path / "c.jsonl"
    _corpus(f, 24, 1200)
    assert f.stat().st_size > 2 * validation.PIECE_BYTES
    pieces = split_file(str(f), validation.PIECE_BYTES)
    assert len(pieces) >= 3
    starts = [p.first_line for p in pieces]
    out = {}
    for fmt in ("table", "json"):
        for w in ("1", "2"):
            cmd = [sys.executable, "-m", "orchestrace", "validate", str(f), "--format", fmt, "--workers", w]
            r = subprocess.run(cmd, capture_output=True, timeout=100)
            out[fmt, w] = (r.returncode, r.stdout)
        assert out[fmt, "1"] == out[fmt, "2"]
        assert out[fmt, "1"][0] == 1
    lines = {x["line"] for x in orjson.loads(out["json", "1"][1])[0]["findings"]}
    assert {sum(line >= s for s in starts) for line in lines} == set(range(1, len(pieces) + 1))
    assert max(lines) == 26  # numbered from the file's start, not the piece's
