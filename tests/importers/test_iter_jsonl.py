"""iter_jsonl reads a plain log whole and a compressed one streamed: same records, same counts."""

from __future__ import annotations

import gzip
from pathlib import Path

from orchestrace.importers.reading import ImportStats, iter_jsonl

LOG = b'{"a": 1}\n\n  \n{"n": 99999999999999999999}\n{"n": 12345678901234567890123, "x": [1]}\n[2]\n{"cut": \n{"b": 2}\n{"tail": '


def _read(path: Path) -> tuple[list[tuple[int, object]], dict[str, object]]:
    stats = ImportStats()
    return list(iter_jsonl(path, stats)), stats.to_dict()


def test_plain_and_gzip_read_alike(tmp_path: Path) -> None:
    plain = tmp_path / "log.jsonl"
    plain.write_bytes(LOG)
    packed = tmp_path / "log.jsonl.gz"
    packed.write_bytes(gzip.compress(LOG, mtime=0))
    records, stats = _read(plain)
    assert (records, stats) == _read(packed)
    assert records == [(1, {"a": 1}), (6, [2]), (8, {"b": 2})]  # integers past 64 bits left out
    assert stats["bad_lines"] == [7, 9] and stats["truncated"] is True
    assert stats["bad_values"] == {"record beyond the input limits": 2}


def test_head_lines_end_as_splitlines_ends_them(tmp_path: Path) -> None:
    """The sniffers' head reader finds lines lazily; \\r, \\r\\n and \\n each end one, as
    bytes.splitlines says (\\x0b and \\x0c do not: that line is no JSON), and a line cut at
    64 KB is not a record."""
    from orchestrace.importers.reading import first_json_lines, iter_head_json

    head = b'{"a": 1}\r{"b": 2}\r\n\r\n  \n[3]\n{bad\n\x0b{"c": 4}\x0c\n'
    log = tmp_path / "log.jsonl"
    log.write_bytes(head + b'{"long": "' + b"x" * 70000 + b'"}\n')
    assert list(iter_head_json(log)) == [{"a": 1}, {"b": 2}, [3]]
    assert first_json_lines(log, 2) == [{"a": 1}, {"b": 2}]


def test_a_byte_order_mark_starts_the_first_record(tmp_path: Path) -> None:
    from orchestrace.importers.reading import first_json_lines

    log = tmp_path / "log.jsonl"
    log.write_bytes(b'\xef\xbb\xbf{"a": 1}\n{"b": 2}\n')
    assert _read(log) == ([(1, {"a": 1}), (2, {"b": 2})], {"records": {}})
    assert first_json_lines(log, 1) == [{"a": 1}]
