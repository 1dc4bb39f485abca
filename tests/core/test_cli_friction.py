"""The first hour's friction, as a user meets it: real subprocesses, real files."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrace.cli import main
from orchestrace.core.io import load


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI entry point in this process (as `orchestrace ARGS`, output piped): code, stdout, stderr."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()  # stats json writes bytes
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    out.flush()
    return subprocess.CompletedProcess(args, code, out.buffer.getvalue().decode(), err.getvalue())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    r = run("gen", "-o", str(out), "-n", "4", "--size", "30", "--seed", "7")
    assert r.returncode == 0, r.stderr
    return out


def test_stats_prints_one_corpus_total(corpus: Path) -> None:
    traces = load(corpus)
    r = run("stats", str(corpus))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("┏") == 1 and "corpus: 4 traces in 1 file(s)" in r.stdout
    row = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in r.stdout.splitlines()
        if line.count("│") == 3
    }
    assert int(row["events"]) == sum(len(t.events) for t in traces)
    assert int(row["edges"]) == sum(len(t.edges) for t in traces)
    assert int(row["type tool_call"]) == sum(e.type == "tool_call" for t in traces for e in t.events)
    assert not any(t.trace_id in r.stdout for t in traces)
    listed = run("stats", str(corpus), "--per-trace")
    assert listed.stdout.count("┏") == 2 and all(t.trace_id in listed.stdout for t in traces)
    (corpus.parent / "one.json").write_bytes(
        json.dumps(json.loads(corpus.read_text().splitlines()[0])).encode()
    )
    one = run("stats", str(corpus.parent / "one.json"))  # one trace: its own table, no total
    assert one.stdout.count("┏") == 1 and traces[0].trace_id in one.stdout and "corpus:" not in one.stdout
    doc = json.loads(run("stats", str(corpus), "--format", "json").stdout)
    assert len(doc["traces"]) == 4 and doc["corpus"]["traces"] == 4
    assert doc["corpus"]["events"] == sum(len(t.events) for t in traces)
    assert doc["corpus"]["by_type"]["tool_call"] == int(row["type tool_call"])


def test_view_says_which_trace_of_a_corpus_it_shows(corpus: Path, tmp_path: Path) -> None:
    ids = [t.trace_id for t in load(corpus)]
    r = run("view", str(corpus), "-o", str(tmp_path / "v.html"))
    assert r.returncode == 0, r.stderr
    assert f"holds 4 traces; showing #0 '{ids[0]}'" in r.stderr and "--trace ID" in r.stderr
    r = run("view", str(corpus), "--trace", ids[2], "-o", str(tmp_path / "v.html"))
    assert r.returncode == 0 and f"showing #2 '{ids[2]}'" in r.stderr
    assert f'"trace_id":"{ids[2]}"' in (tmp_path / "v.html").read_text()
    r = run("view", str(corpus), "--trace", "nope", "-o", str(tmp_path / "v.html"))
    assert r.returncode == 2 and "no trace with id 'nope'" in r.stderr and ids[0] in r.stderr
    single = tmp_path / "one.json"
    single.write_text(corpus.read_text().splitlines()[1])
    r = run("view", str(single), "-o", str(tmp_path / "v.html"))
    assert r.returncode == 0 and "holds" not in r.stderr


def test_view_reads_a_store_and_says_what_a_broken_one_is(corpus: Path, tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    assert run("ingest", str(corpus), "-s", str(store)).returncode == 0
    ids = [t.trace_id for t in load(corpus)]
    r = run("view", str(store), "--trace", ids[3], "-o", str(tmp_path / "v.html"))
    assert r.returncode == 0, r.stderr
    assert f"'{ids[3]}' (choose" in r.stderr and f'"trace_id":"{ids[3]}"' in (tmp_path / "v.html").read_text()
    bad = tmp_path / "other.duckdb"
    bad.write_bytes(corpus.read_bytes())
    r = run("view", str(bad))
    assert r.returncode != 0 and "not a DuckDB store" in r.stderr and "UTF-8" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_analyze_write_says_what_it_wrote(corpus: Path, tmp_path: Path) -> None:
    dest = tmp_path / "measured.jsonl"
    r = run("analyze", str(corpus), "-o", str(dest), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert f"wrote 4 trace(s) with their metrics -> {dest}" in r.stderr
    assert len(json.loads(r.stdout)["traces"]) == 4 and len(load(dest)) == 4


def test_a_glob_that_matches_nothing_does_not_abort_validate(corpus: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("validate", str(tmp_path / "nomatch" / "*.json"), str(corpus), str(empty), "--format", "json")
    assert r.returncode == 2  # an input that names no file is an I/O error, as a missing file is
    out = json.loads(r.stdout)
    assert [(o["path"], o["valid"]) for o in out] == [
        (str(tmp_path / "nomatch" / "*.json"), False),
        (str(corpus), True),
        (str(empty), False),
    ]
    assert out[0]["findings"][0]["message"] == "glob matches no file" and out[1]["traces"] == 4
    assert out[2]["findings"][0]["code"] == "OT001"
    text = run("validate", str(tmp_path / "nomatch" / "*.json"), str(corpus))
    assert "glob matches no file" in text.stdout and "1/2 file(s) valid" in text.stdout


def test_help_has_no_raw_rst_and_one_line_command_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from orchestrace.cli import app

    monkeypatch.setenv("COLUMNS", "400")  # wide: every summary fits on its row unless it holds a line break
    groups: dict[str, list[str]] = {}
    pages: dict[str, str] = {}

    def walk(cmd: Any, path: list[str]) -> None:  # typer's vendored click command
        pages[" ".join(path)] = run(*path, "--help").stdout
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd)
            groups[" ".join(path)] = names = cmd.list_commands(ctx)
            for name in names:
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(typer.main.get_command(app), [])
    assert len(pages) > 30 and all(pages.values())
    assert [name for name, page in pages.items() if "``" in page] == []
    for name, subs in groups.items():
        panel = pages[name].split("Commands")[1].split("╰")[0]
        rows = [line for line in panel.splitlines() if line.startswith("│")]
        assert len(rows) == len(subs), (name, rows)


def test_a_usage_error_is_one_line(corpus: Path, tmp_path: Path) -> None:
    """typer's own usage errors (a missing option, an unknown option or command) as one line, not
    its boxed usage text, and exit 2."""
    cases = [
        (
            ("export", str(corpus), "-o", str(tmp_path / "s.jsonl")),
            "orchestrace export: Missing option '--to'",
        ),
        (("validate",), "orchestrace validate: Missing argument 'paths'"),
        (("validate", "--nope", str(corpus)), "No such option: --nope"),
        (("gen", "-o"), "Option '-o' requires an argument"),
        (("train", "stopp"), "No such command 'stopp'"),
    ]
    for args, said in cases:
        r = run(*args)
        assert r.returncode == 2 and r.stdout == "", args
        assert len(r.stderr.strip().splitlines()) == 1 and said in r.stderr and "-h for help" in r.stderr, (
            r.stderr
        )
        assert "╭" not in r.stderr and "Usage:" not in r.stderr
    assert run("validate", str(corpus)).returncode == 0 and run("--version").returncode == 0


CLAUDE_LOG = Path(__file__).resolve().parents[1] / "data/public/claude-code/test/test_data/real_projects"


def test_a_foreign_agent_log_is_named_with_how_to_import_it(tmp_path: Path) -> None:
    """A Claude Code session given where a trace belongs: one line naming the format and the
    import command, not a finding per record (validate listed 200, ingest 180 lines)."""
    log = tmp_path / "my session.jsonl"  # a space: the suggested command quotes the path
    log.write_bytes(next(CLAUDE_LOG.glob("*/*.jsonl")).read_bytes())
    said = f"a claude-code log, not an orchestration trace: import it first (orchestrace import '{log}'"
    r = run("validate", str(log))
    assert r.returncode == 1 and said in r.stdout and len(r.stdout.strip().splitlines()) == 3, r.stdout
    for args in (
        ("analyze", str(log)),
        ("stats", str(log)),
        ("view", str(log), "-o", str(tmp_path / "v.html")),
        ("export", str(log), "--to", "survey", "-o", str(tmp_path / "s.jsonl")),
        ("ingest", str(log), "-s", str(tmp_path / "t.duckdb"), "-q"),
    ):
        r = run(*args)
        assert r.returncode == 1 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, (
            args,
            r.stderr,
        )
    broken = tmp_path / "broken.jsonl"  # a trace file that is merely broken keeps its own finding
    broken.write_text('{"trace_id": "x"}\n')
    r = run("validate", str(broken))
    assert r.returncode == 1 and "missing required field 'task_id'" in r.stdout and "import" not in r.stdout


def test_a_store_given_where_trace_files_go(corpus: Path, tmp_path: Path) -> None:
    """stats and export read a store as analyze does; validate says what a store is instead of
    'invalid UTF-8'."""
    store = tmp_path / "traces.duckdb"
    assert run("ingest", str(corpus), "-s", str(store)).returncode == 0
    r = run("validate", str(store))
    assert r.returncode == 2 and "a DuckDB store, not a trace file" in r.stdout and "UTF-8" not in r.stdout
    from_store = json.loads(run("stats", str(store), "--format", "json").stdout)
    from_file = json.loads(run("stats", str(corpus), "--format", "json").stdout)
    assert (
        from_store["corpus"]["events"]
        == from_file["corpus"]["events"]
        == sum(len(t.events) for t in load(corpus))
    )
    r = run("export", str(store), "--to", "jsonl", "-o", str(tmp_path / "out.jsonl"))
    assert r.returncode == 0, r.stderr
    assert sorted(t.trace_id for t in load(tmp_path / "out.jsonl")) == sorted(
        t.trace_id for t in load(corpus)
    )


def test_piped_commands_leave_stderr_clean(corpus: Path, tmp_path: Path) -> None:
    """Piped (stderr not a terminal), the progress bar drew nothing but an empty line on stderr,
    validate printed 'OT001 : file not found' and parquet 'lake//traces/'."""
    log = tmp_path / "one.events.jsonl"  # an event log: its traces are not counted up front
    assert run("gen", "-o", str(log), "--size", "20", "--seed", "1").returncode == 0
    r = run("analyze", str(log))
    assert r.returncode == 0 and r.stderr == "", repr(r.stderr)
    r = run("analyze", str(tmp_path / "missing.jsonl"))
    assert r.returncode == 2 and r.stderr.startswith(str(tmp_path)) and r.stderr.count("\n") == 1, repr(
        r.stderr
    )
    r = run("validate", str(tmp_path / "missing.json"))
    assert "  OT001 file not found" in r.stdout, r.stdout
    store = tmp_path / "traces.duckdb"
    assert run("ingest", str(corpus), "-s", str(store)).returncode == 0
    r = run("parquet", "-s", str(store), "-o", str(tmp_path / "lake") + "/")
    assert r.returncode == 0 and f"-> {tmp_path}/lake/traces/" in r.stderr and "//" not in r.stderr, r.stderr


PUBLIC = Path(__file__).resolve().parents[1] / "data/public"


def test_piped_bars_of_train_import_and_gen_leave_stderr_to_what_was_written(tmp_path: Path) -> None:
    """Piped, rich's bars drew their final state (gen's 'generating' line) or an empty line
    (train's, import's) on stderr; now stderr holds only what was written, or the one error."""
    r = run("gen", "-o", str(tmp_path / "g.jsonl"), "-n", "50", "--size", "10")
    lines = r.stderr.splitlines()
    assert r.returncode == 0 and len(lines) == 1 and lines[0].startswith("wrote 50 trace(s), "), r.stderr
    r = run("import", str(PUBLIC / "codex"), str(PUBLIC / "chatdev"), "-o", str(tmp_path / "i.jsonl"))
    assert r.returncode == 0 and r.stderr == "" and "imported 3 trace(s) (1 codex, 2 chatdev)" in r.stdout, (
        r.stderr
    )
    r = run("train", "stop", "--traces", str(tmp_path / "none" / "*.events.jsonl"))
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"OT615 error: no trace files match '{tmp_path / 'none' / '*.events.jsonl'}'"
    ], r.stderr


def test_a_bank_name_with_a_typo_lists_the_embedded_banks() -> None:
    r = run("bank", "info", "antonym")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert (
        "antonym: OT001 error: no such bank file, nor an embedded bank of that name (antonyms, " in r.stderr
    )


@pytest.mark.parametrize(
    ("target", "opt", "said"),
    [
        (
            "samples",
            "samples=abc",
            "OT420 error: option samples must be an integer, got 'abc'",
        ),  # int(): exit 3
        (
            "samples",
            "partition=maybe",
            "OT420 error: option partition must be true or false",
        ),  # read as false
        ("samples", "seed=-1", "OT420 error: option seed must be >= 0, got -1"),
        ("trl", "max_prompt_chars=-5", "OT420 error: option max_prompt_chars must be >= 1, got -5"),
        ("samples", "eps=abc", "OT420 error: option eps must be a number, got 'abc'"),
        (
            "otlp",
            "epoch=abc",
            "OT020 error: otlp option epoch must be a number of seconds",
        ),  # float(): exit 3
        # ignored: grpo's advantages exported as if alpha meant something
        ("samples", "alpha=0.5", "OT413 error: grpo does not read option(s) 'alpha'"),
    ],
)
def test_an_export_option_that_is_no_value_of_its_kind_is_named(
    corpus: Path, tmp_path: Path, target: str, opt: str, said: str
) -> None:
    out = tmp_path / ("o.json" if target == "otlp" else "o")
    r = run("export", str(corpus), "--to", target, "--opt", opt, "-o", str(out))
    assert r.returncode == 2 and said in r.stderr and "internal" not in r.stderr, r.stderr


def test_stats_with_an_unknown_format_is_a_usage_error(corpus: Path) -> None:
    r = run("stats", str(corpus), "-f", "bogus")  # printed the table and exited 0
    assert r.returncode == 2 and "--format must be table or json, got 'bogus'" in r.stderr
