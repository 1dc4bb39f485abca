"""The four runtime commands through the real CLI entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrace.cli import main
from orchestrace.core.io import load_one
from orchestrace.core.validate import validate_path


def _cli(args, capsys):
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    return code, capsys.readouterr()


def test_run_replay_fork_repair(tmp_path, capsys):
    path = str(tmp_path / "deb.events.jsonl")
    code, cap = _cli(["run", "debate", "--backend", "scripted", "--seed", "2", "-o", path], capsys)
    assert code == 0 and "recorded" in cap.out
    assert validate_path(path).valid
    code, cap = _cli(["replay", path], capsys)
    assert code == 0 and "identical" in cap.out and "0 live calls" in cap.out and "byte for byte" in cap.out
    ret = next(e for e in load_one(path).events if e.type == "return")
    out = str(tmp_path / "f.events.jsonl")
    code, cap = _cli(["fork", path, "--at", ret.id, "--do", "replace:icy", "-o", out], capsys)
    assert code == 0 and f"shares the first {ret.id[1:]} events" in cap.out
    assert validate_path(out).valid
    # a run cut short: the last record is half written
    data = open(path, "rb").read()
    cut = tmp_path / "cut.events.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    code, cap = _cli(["repair", str(cut)], capsys)
    assert code == 0 and "repaired" in cap.out
    assert validate_path(str(tmp_path / "cut.repaired.events.jsonl")).valid


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "nosuch"], "unknown program"),
        (["run", "debate", "--backend", "gpu"], "unknown backend"),
        (["run", "debate", "--set", "novalue"], "KEY=VALUE"),
        (["repair", "missing.events.jsonl"], "file not found"),
    ],
)
def test_user_errors_are_one_line_not_tracebacks(tmp_path, monkeypatch, capsys, args, needle):
    monkeypatch.chdir(tmp_path)
    code, cap = _cli(args, capsys)
    assert code == 2
    assert needle in cap.err and len(cap.err.strip().splitlines()) == 1


def test_cli_process_exit_code_on_bad_fork(tmp_path):
    path = tmp_path / "c.events.jsonl"
    from orchestrace.runtime.runner import run

    run("centralized", str(path), backend={"kind": "scripted"})
    cmd = [
        sys.executable,
        "-c",
        "from orchestrace.cli import main; main()",
        "fork",
        str(path),
        "--at",
        "e1",
        "--do",
        "resample",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2 and "OT607" in p.stderr and "Traceback" not in p.stderr


def test_a_run_whose_every_call_failed_is_a_failed_run(tmp_path, capsys):
    """Nothing listens on the port: pec's 6 agent turns (planner, executor, critic over 2 cycles)
    fail after 3 attempts each (2 retries), 18 connection errors: exit 1, status error, one cause."""
    import socket

    with socket.socket() as s:  # a loopback port that was free a moment ago and is closed now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = str(tmp_path / "pec.events.jsonl")
    code, cap = _cli(["run", "pec", "--base-url", f"http://127.0.0.1:{port}/v1", "-o", path], capsys)
    assert code == 1
    assert "status: error" in cap.out and "live calls 18" in cap.out
    (cause,) = [line for line in cap.err.splitlines() if line.startswith("error:")]
    assert cause.startswith("error: all 6 agent turns failed; the first: connection")
    tr = load_one(path)  # the trace is still written, valid, and says so
    assert tr.metadata["outcome"]["status"] == "error"
    assert sum(e.type == "return" and e.status == "error" for e in tr.events) == 18


def test_repair_of_a_trace_that_is_no_event_log_says_what_repair_takes(tmp_path, capsys):
    """A .json trace given to repair said 'no event survives in this log', as if it were a broken log."""
    trace = str(tmp_path / "run.json")
    assert _cli(["gen", "-o", trace, "--size", "20"], capsys)[0] == 0
    code, cap = _cli(["repair", trace], capsys)
    assert code == 2 and len(cap.err.strip().splitlines()) == 1
    assert "repair salvages an event log (.events.jsonl)" in cap.err and "orchestrace validate" in cap.err
    empty = tmp_path / "empty.events.jsonl"  # an event log with nothing in it keeps its own message
    empty.write_text("")
    code, cap = _cli(["repair", str(empty)], capsys)
    assert code == 2 and "no event survives in this log" in cap.err


def test_a_config_key_the_program_does_not_read_is_named(tmp_path, capsys):
    """--set widht=2 (a typo) ran with the default width and said nothing."""
    out = str(tmp_path / "v.events.jsonl")
    code, cap = _cli(
        ["run", "vote", "--backend", "scripted", "--set", "widht=2", "--set", "budget=4", "-o", out], capsys
    )
    assert code == 0 and "recorded" in cap.out
    assert (
        "warning: vote did not read --set widht (it reads " in cap.err
        and "width" in cap.err
        and "budget" in cap.err
    )
    assert load_one(out).metadata["runtime"]["config"] == {
        "widht": 2,
        "budget": 4,
    }  # kept, as annotations are
    code, cap = _cli(["run", "vote", "--backend", "scripted", "--set", "width=2", "-o", out], capsys)
    assert code == 0 and "warning" not in cap.err


def test_a_run_written_to_a_folder_says_so(tmp_path, capsys):
    """-o DIR/ was an internal error (IsADirectoryError, exit 3)."""
    code, cap = _cli(["run", "vote", "--backend", "scripted", "-o", str(tmp_path)], capsys)
    assert code == 2 and "is a folder: the run writes one event log" in cap.err and "internal" not in cap.err


def test_a_run_written_under_a_file_says_so(tmp_path, capsys):
    """-o FILE/x.events.jsonl was FileExistsError (exit 3), after the program and backend loaded."""
    (tmp_path / "f").write_text("")
    code, cap = _cli(
        ["run", "vote", "--backend", "scripted", "-o", str(tmp_path / "f" / "x.events.jsonl")], capsys
    )
    assert code == 2 and "a folder on its path, is a file" in cap.err and "internal" not in cap.err
