"""Registry (auto-detection, third-party entry points) and secret redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrace import importers
from orchestrace.cli import app
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load
from orchestrace.export.otlp import iter_otlp
from orchestrace.importers.redact import redact
from orchestrace.importers.values import content_hash


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("export OPENAI_API_KEY=sk-proj-Abcdefghijklmnop1234567890", "Abcdefghijklmnop1234567890"),
        ("key sk-ant-api03-xyzxyzxyzxyzxyzxyzxyz", "xyzxyzxyzxyzxyzxyzxyz"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
        ("git clone https://bob:s3cr3tpass@github.com/x/y.git", "s3cr3tpass"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        ('{"password": "correct-horse-battery"}', "correct-horse-battery"),
        ("hf_abcdefghijklmnopqrstuvwxyz", "hf_abcdefghijklmnopqrstuvwxyz"),
    ],
)
def test_redact_removes_secrets(text: str, leak: str) -> None:
    out = redact(text)
    assert leak not in out and "[REDACTED]" in out


def test_redact_keeps_ordinary_text() -> None:
    text = "Ran 12 tests in 0.3s; see https://github.com/x/y and the password policy doc."
    assert redact(text) == text
    assert content_hash("abc") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_unknown_format_and_undetectable_file(tmp_path: Path) -> None:
    with pytest.raises(OrchestraceError, match="unknown import format"):
        importers.get("nope")
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    assert importers.detect(f) is None
    res = CliRunner().invoke(app, ["import", str(f), "-o", str(tmp_path / "o.jsonl")])
    assert isinstance(res.exception, OrchestraceError) and "no importable log found" in str(res.exception)


def test_third_party_importer_via_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real distribution on sys.path registering an importer in the entry-point group."""
    (tmp_path / "toylog_importer.py").write_text(
        "from orchestrace.importers.staging import ImportStaging\n"
        "NAME = 'toylog'\n"
        "def sniff(path):\n    return str(path).endswith('.toylog')\n"
        "def load(path, *, keep_content=False):\n"
        "    b = ImportStaging(keep_content=keep_content)\n"
        "    for i, line in enumerate(open(path).read().split()):\n"
        "        b.add('message', line, float(i), content=line)\n"
        "    yield b.build(trace_id='toy', task_id='toy', system='toy')\n"
    )
    dist = tmp_path / "toylog_importer-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toylog-importer\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[orchestrace.importers]\ntoylog = toylog_importer\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "run.toylog"
    log.write_text("alice bob alice")
    assert "toylog" in importers.names()
    assert importers.detect(log) == "toylog"
    out = tmp_path / "toy.jsonl"
    res = CliRunner().invoke(app, ["import", str(log), "-o", str(out)])
    assert res.exit_code == 0, res.output
    (tr,) = load(out)
    assert [e.agent for e in tr.events] == ["alice", "bob", "alice"]
    assert all(e.content is None for e in tr.events)


def test_otlp_options_from_cli_strings(data: Path) -> None:
    tr = next(importers.load(data / "who-and-when/Who&When/Hand-Crafted/1.json", keep_content=True))
    with_content = json.dumps(next(iter_otlp([tr], include_content="true", epoch="1700000000")))
    without = json.dumps(next(iter_otlp([tr], include_content="false")))
    assert '\\"content\\":' in with_content and '\\"content\\":' not in without
    with pytest.raises(OrchestraceError, match="unknown otlp option"):
        next(iter_otlp([tr], colour="red"))


def test_truncated_json_run_is_reported_and_the_rest_imported(data: Path, tmp_path: Path) -> None:
    src = data / "who-and-when/Who&When/Hand-Crafted/1.json"
    cut = tmp_path / "1.json"
    cut.write_bytes(src.read_bytes()[:3000])
    other = tmp_path / "notes.cfg"
    other.write_text("[x]\n")
    out = tmp_path / "o.jsonl"
    good = data / "who-and-when/Who&When/Hand-Crafted/2.json"
    res = CliRunner().invoke(app, ["import", str(cut), str(good), str(other), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "1.json: line 8: unexpected end of input" in res.output and "looks truncated" in res.output
    assert "notes.cfg: unknown log format" in res.output
    assert len(load(out)) == 1


def test_detect_imports_no_heavy_module(data: Path) -> None:
    """Sniffing every public file must not import the Agents SDK (seconds) nor a module of a format
    whose file endings do not fit; it runs in a fresh interpreter to see sys.modules as it is."""
    import subprocess
    import sys

    code = (
        "import sys, collections\n"
        "from orchestrace import importers\n"
        f"fs = importers.walk([{str(data)!r}])\n"
        "c = collections.Counter(importers.detect(f) for f in fs)\n"
        "assert 'agents' not in sys.modules, 'Agents SDK imported'\n"
        "print(c['chatdev'], c['codex'], c['who-and-when'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7", "2", "158"]
