"""Every command in the README's bash blocks runs as written, from the repository root: the
blocks are parsed, and each ``orchestrace ...`` line runs in a folder holding a copy of
``examples/`` (and ``../shared/data`` when the public data is here), in README order, so later
commands read what earlier ones wrote. Commands that take minutes, a model, a server or the
user's home folder are skipped, each with its reason below."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.core.paths import data_dir

ROOT = Path(__file__).resolve().parents[2]

#: command prefix (after "orchestrace ") -> why the test does not run it
SKIP = {
    "gen -o corpus.jsonl -n 1000": "a million events (about a minute); the same command runs small in examples/",
    "train team": "loads SmolLM2-135M and trains its LoRA adapters for minutes; tests/learn_team train a tiny configuration",
    "train ": "a training run takes a minute or more (tests/learn and tests/learn_experiments train tiny configs)",
    "bench team": "trains a grid of train team cells (hours); tests/learn_team runs a tiny grid",
    "loop stop": "runs the local SmolLM2 model for minutes; tests/learn/test_loop.py runs a tiny loop",
    "serve": "serves until stopped; tests/learn_gateway serve it",
    "ui ": "serves until stopped; tests/viewer/test_browse_* serve it",
    "eval stop": "reads the policy `train stop` writes",
    "bank build": "samples the local SmolLM2 model (minutes) or a server",
    "bank traces": "feeds the loop's `train stop --traces`, skipped with it",
    "run vote": "runs the local SmolLM2 model when installed (the demo; the loop's run with its policy)",
    "run pec --base-url": "needs an OpenAI-compatible server",
    "import ~/": "reads the user's own Claude Code / Codex home folder",
    "report runs/stop": "reads the main job's output (tests/viewer/test_report.py builds one)",
}
NEEDS_DATA = "../shared/data"


def readme_commands() -> list[str]:
    return bash_commands((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_lists_its_commands():
    cmds = readme_commands()
    assert len(cmds) > 40
    assert all(any(c[len("orchestrace ") :].startswith(p) for c in cmds) for p in SKIP), "a stale skip"


@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", repo / "examples")
    shutil.copytree(
        ROOT / "tests" / "data" / "public", repo / "tests" / "data" / "public"
    )  # a clone has them
    data = data_dir(required=False)
    if data is not None:
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(data)
    elif os.environ.get("CI"):
        pytest.fail("CI is set and the public data (../shared/data or $ORCHESTRACE_DATA) is missing")
    monkeypatch.chdir(repo)
    runner = CliRunner()
    ran, skipped = [], []
    unmade: set[str] = set()  # outputs of skipped commands: what reads them is skipped too
    written: dict[str, str] = {}  # output -> the command that wrote it
    for cmd in readme_commands():
        rest = cmd[len("orchestrace ") :]
        args = shlex.split(rest)
        outs = {b for a, b in zip(args, args[1:], strict=False) if a in ("-o", "--out")}
        reason = next((why for p, why in SKIP.items() if rest.startswith(p)), None)
        if reason is None and NEEDS_DATA in cmd and data is None:
            reason = "public data not found"
        if reason is None and "..." in rest:
            reason = "an elided example"
        if reason is None and (read := next((a for a in args if a in unmade and a not in outs), None)):
            reason = f"reads {read}, which a skipped command writes"
        if reason is not None:
            skipped.append((cmd, reason))
            unmade |= outs
            continue
        unmade -= outs
        for o in outs:  # one command's output silently replacing another's (the README walk found it)
            assert o not in written and not os.path.exists(o), f"{cmd}\noverwrites {o} ({written.get(o)})"
        r = runner.invoke(app, args)
        assert r.exit_code == 0, f"{cmd}\n{r.output}"
        written.update((o, cmd) for o in outs)
        ran.append(cmd)
        if rest.startswith("replay "):
            assert "identical" in r.output and "byte for byte" in r.output
        if rest.startswith("ingest "):  # by now examples/runs/ holds the recording, its replay and 2 forks
            assert "3 new, 0 replaced, 0 unchanged trace(s), 1 duplicate(s)" in r.output
    assert len(ran) >= 25, ran  # 26 run, with or without the public data
    assert (repo / "run.html").exists() and (repo / "lake").is_dir()
    print(f"ran {len(ran)} README commands; skipped {len(skipped)}:")
    for cmd, why in skipped:
        print(f"  {cmd}: {why}")


def test_the_python_names_the_readme_gives_exist():
    """`orchestrace.store.parallel_map` was named in the README after it had moved to
    orchestrace.parallel: a new user's first import failed."""
    import importlib

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    names = sorted(set(re.findall(r"`(orchestrace(?:\.\w+)+)", text)))
    assert len(names) >= 5, names
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"README names {name}: {obj.__name__} has no {attr}"
                obj = getattr(obj, attr)
            break


def test_the_readme_python_blocks_run(tmp_path, monkeypatch):
    """The README's Python, as written, from a folder holding examples/ (it reads examples/run.json)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "run.events.jsonl.zst").exists()


def bash_commands(text: str) -> list[str]:
    """The ``orchestrace ...`` lines of the bash blocks of ``text``, comments cut."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.split(r"\s+#\s", line.strip(), maxsplit=1)[0].strip()
            if line.startswith("orchestrace "):
                out.append(line)
    return out


def run_without_overwriting(commands: list[str]) -> None:
    """Run ``commands`` in order in the current folder; each must exit 0 and write every ``-o``
    output it names, none of which an earlier command wrote (one command's output silently
    replacing another's is the defect the README walk found)."""
    runner = CliRunner()
    written: dict[str, str] = {}
    for cmd in commands:
        args = shlex.split(cmd[len("orchestrace ") :])
        outs = [b for a, b in zip(args, args[1:], strict=False) if a in ("-o", "--out")]
        for o in outs:
            assert o not in written and not os.path.exists(o), (
                f"{cmd}\noverwrites {o} ({written.get(o, 'there before')})"
            )
        r = runner.invoke(app, args)
        assert r.exit_code == 0, f"{cmd}\n{r.output}"
        for o in outs:
            assert os.path.exists(o), f"{cmd}\nwrote no {o}"
            written[o] = cmd


def test_the_real_log_walkthrough_runs_from_a_clone(tmp_path, monkeypatch):
    """docs/integration.md's chain on the vendored excerpts runs as written from a folder shaped like
    a fresh clone (examples/, tests/data/public/, no ../shared): the README's real-log sections read
    ../shared/data, which a clone does not have."""
    text = (ROOT / "docs" / "integration.md").read_text(encoding="utf-8")
    section = text.split("## From a fresh clone", 1)[1].split("\n## ", 1)[0]
    commands = bash_commands(section)
    assert len(commands) == 8 and all("../shared" not in c for c in commands), commands
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "examples", clone / "examples")
    shutil.copytree(ROOT / "tests" / "data" / "public", clone / "tests" / "data" / "public")
    assert not (tmp_path / "shared").exists()
    monkeypatch.delenv("ORCHESTRACE_DATA", raising=False)
    monkeypatch.chdir(clone)
    run_without_overwriting(commands)
    from orchestrace.core.io import load

    traces = load("real.credited.jsonl")
    assert sorted(t.metadata["source_format"] for t in traces) == [
        "chatdev",
        "chatdev",
        "claude-code",
        "codex",
    ]
    assert all("shapley/agent" in t.metadata["credit"] for t in traces)
    assert len(load("excerpts.jsonl.zst")) == 6 and any((clone / "real.trl").iterdir())


def test_an_overwritten_output_is_caught(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="overwrites a.jsonl"):
        run_without_overwriting(
            ["orchestrace gen -o a.jsonl -n 1 --size 5", "orchestrace gen -o a.jsonl -n 1 --size 5"]
        )


def test_the_install_page_names_the_disk_the_install_and_the_model_cache_take(tmp_path, monkeypatch):
    """The 2.7 GB .venv and the 517 MB model cache in ~/.cache/orchestrace were said only deep in
    docs/train_team.md; docs/install.md says them before installing, and names the folder and the
    variable the code really uses."""
    from orchestrace.learn.team.model import cache_root

    text = " ".join((ROOT / "docs" / "install.md").read_text(encoding="utf-8").split())
    assert "2.7 GB" in text and "517 MB" in text and "`./.venv`" in text
    monkeypatch.delenv("ORCHESTRACE_MODEL_CACHE", raising=False)
    default = cache_root()
    assert default == Path.home() / ".cache" / "orchestrace" and "`~/.cache/orchestrace/" in text
    monkeypatch.setenv("ORCHESTRACE_MODEL_CACHE", str(tmp_path))
    assert cache_root() == tmp_path and "`ORCHESTRACE_MODEL_CACHE=" in text
