"""orchestrace view / report as a user runs them: real subprocesses, real files, a real server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx

from orchestrace.cli import main
from orchestrace.core.io import save
from orchestrace.gen import generate


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI entry point in this process (as `orchestrace ARGS`): exit code, stdout, stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_view_writes_a_page(tmp_path: Path, reference_example: Path):
    out = tmp_path / "x.html"
    r = run("view", str(reference_example), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr and "8 events" in r.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and '"demo-trace-001"' in page


def test_view_default_name_and_index(tmp_path: Path):
    src = tmp_path / "corpus.jsonl.gz"
    save([generate(seed=s, size=20, topology="swarm") for s in range(3)], src)
    r = run("view", str(src), "--index", "2")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "corpus.html").read_text()
    assert '"gen-swarm-20-2"' in page
    r = run("view", str(src), "--index", "3")
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "fewer than 4 trace(s)" in r.stderr and "Traceback" not in r.stderr


def test_view_missing_file_is_one_line(tmp_path: Path):
    r = run("view", str(tmp_path / "nope.json"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "nope.json" in r.stderr


def test_view_serve_on_loopback(tmp_path: Path, reference_example: Path):
    p = subprocess.Popen(
        [sys.executable, "-m", "orchestrace", "view", str(reference_example), "--serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line
        url = m.group(0)
        r = httpx.get(url, timeout=10)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert '"demo-trace-001"' in r.text and r.text.startswith("<!DOCTYPE html>")
        assert httpx.get(url + "index.html", timeout=10).text == r.text
        assert httpx.get(url + "../../etc/passwd", timeout=10).status_code == 404
        assert httpx.get(url + "example_trace.json", timeout=10).status_code == 404
    finally:
        p.terminate()
        p.wait(timeout=10)
    assert not (tmp_path / "example_trace.html").exists()  # --serve alone writes no file


def test_report_command(tmp_path: Path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rows = [{"method": f"fixed-{k}", "accuracy": 0.5 + k / 100, "mean_samples": k} for k in (1, 4, 16)]
    (run_dir / "pareto.json").write_text(json.dumps(rows))
    r = run("report", str(run_dir), "-o", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(tmp_path / "rep" / "pareto.png")]
    assert (tmp_path / "rep" / "report.html").exists()
    r = run("report", str(tmp_path / "nothing"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "run directory not found" in r.stderr
    r = run("report", str(run_dir / "pareto.json"))  # a file said "run directory not found"
    assert (
        r.returncode == 2
        and "is a file: report reads a run folder" in r.stderr
        and "not found" not in r.stderr
    )
