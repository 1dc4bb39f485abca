"""orchestrace report: input formats, Pareto fronts, per-agent costs, PNGs and the HTML page."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest
from PIL import Image

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import save
from orchestrace.core.stats import pareto_front
from orchestrace.gen import generate
from orchestrace.viewer.report import (
    MAX_RUNS,
    build_report,
    curve_name,
    read_learning_curve,
    read_pareto,
    shown_runs,
)


def png_ok(path: Path) -> bool:
    img = np.asarray(Image.open(path).convert("L"), dtype=float)
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and img.std() > 5 and min(img.shape) > 200


def test_pareto_front_by_hand():
    pts = [(2, 0.6), (1, 0.5), (2, 0.7), (3, 0.65), (4, 0.9), (5, 0.9)]
    # (2, 0.6) loses to (2, 0.7); (3, 0.65) to (2, 0.7); (5, 0.9) to (4, 0.9)
    assert pareto_front(pts) == [(1, 0.5), (2, 0.7), (4, 0.9)]


def test_curve_names():
    assert curve_name({"method": "ac-beta(0.95)"}) == "ac-beta"
    assert curve_name({"method": "fixed-5"}) == curve_name({"method": "fixed-40"}) == "fixed-k"
    assert curve_name({"method": "esc@w5"}) == "esc"
    assert curve_name({"method": "learned", "family": "ours"}) == "ours"


def eval_rows() -> list[dict]:
    rows = [
        {"method": f"fixed-{k}", "accuracy": 0.5 + 0.01 * k, "mean_samples": float(k), "questions": 100}
        for k in (1, 5, 10, 20, 40)
    ]
    rows += [
        {
            "method": "ac-beta(0.95)",
            "accuracy": 0.88,
            "mean_samples": 8.0,
            "questions": 100,
            "accuracy_ci95": [0.82, 0.93],
            "mean_samples_ci95": [7.1, 9.0],
        },
        {
            "method": "ac-beta(0.99)",
            "accuracy": 0.9,
            "mean_samples": 12.0,
            "questions": 100,
            "accuracy_ci95": [0.84, 0.95],
            "mean_samples_ci95": [11.0, 13.0],
        },
        {"method": "<script>alert(1)</script>", "accuracy": 0.7, "mean_samples": 3.0, "questions": 100},
    ]
    return rows


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "pareto.json").write_text(json.dumps(eval_rows()))
    curves = {  # the layout orchestrace.learn.stopping.report writes
        "reinforce": [{"iteration": i, "batch_reward": 0.1 * i, "eval_samples": 40 - i} for i in range(20)],
        "grpo": [{"iteration": i, "batch_reward": 0.12 * i} for i in range(20)],
    }
    (run / "learning_curves.json").write_text(json.dumps(curves))
    analysis = {
        "by_agent": {"planner": {"tokens_in": 900, "tokens_out": 100, "usd": 0.01, "busy_s": 3.0}},
        "traces": [{"trace_id": "t1", "critical_steps": 4, "tokens": 1000}],
    }
    (run / "analysis.json").write_text(json.dumps(analysis))
    save([generate(seed=s, size=60, topology="centralized") for s in range(3)], run / "traces" / "runs.jsonl")
    return run


def test_report_writes_pngs_and_html(run_dir: Path):
    res = build_report(run_dir)
    names = sorted(p.name for p in res.pngs)
    assert names == ["agent_costs.png", "learning_curve__learning_curves.png", "pareto.png"]
    assert all(png_ok(p) for p in res.pngs)
    page = res.html.read_text()
    assert res.html == run_dir / "report" / "report.html"
    assert page.count("data:image/png;base64,") == 3  # self-contained
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "Pareto front: 4 points" in page  # fixed-1 (0.51@1), <script> (0.7@3), ac-beta 0.88@8, 0.9@12
    assert "t1" in page and "planner" in page and "orchestrator" in page
    # a second run does not read its own output
    assert sorted(p.name for p in build_report(run_dir).pngs) == names


def test_agent_costs_add_up_the_traces(run_dir: Path, tmp_path: Path):
    (run_dir / "analysis.json").unlink()
    (run_dir / "pareto.json").unlink()
    (run_dir / "learning_curves.json").unlink()
    res = build_report(run_dir, tmp_path / "out")
    assert [p.name for p in res.pngs] == ["agent_costs.png"]
    traces = [generate(seed=s, size=60, topology="centralized") for s in range(3)]
    # counted from the events, not by the breakdown the report itself calls
    mine = [e for t in traces for e in t.events if e.agent == "orchestrator"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert f"<td>orchestrator</td><td>{len(mine)}</td>" in page
    assert f"{float(sum(e.tokens for e in mine)):.4g}" in page


def test_learning_curve_formats(tmp_path: Path):
    p = tmp_path / "learning_curve.json"
    p.write_text(json.dumps([{"step": 1, "reward": 0.1, "seed": 0}, {"step": 1, "reward": 0.3, "seed": 1}]))
    d = read_learning_curve(p)
    assert d["x"] == "step" and len(d["records"]) == 2
    p.write_text(json.dumps({"records": [{"epoch": 0, "loss": 1.0}], "x": "epoch", "title": "t"}))
    assert read_learning_curve(p)["x"] == "epoch"
    p.write_text(json.dumps({"a": [{"iteration": 0, "r": 1.0}], "b": [{"iteration": 1, "r": 2.0}]}))
    d = read_learning_curve(p)
    assert d["x"] == "iteration" and [r["run"] for r in d["records"]] == ["a", "b"]


def test_learning_curves_draw_a_handful_of_runs(tmp_path: Path):
    """Ten runs are more lines than a reader tells apart: the plot draws the file's ``shown`` runs,
    else the first MAX_RUNS by name; the HTML table still lists every run."""
    p = tmp_path / "learning_curves.json"
    runs = {f"run{k}": [{"iteration": i, "r": i * k} for i in range(3)] for k in range(10)}
    p.write_text(json.dumps(runs))
    assert shown_runs(read_learning_curve(p)) == sorted(runs)[:MAX_RUNS] and MAX_RUNS < 10
    records = [{**r, "run": n} for n, rs in runs.items() for r in rs]
    p.write_text(
        json.dumps({"records": records, "shown": ["run7", "gone", "run2"], "labels": {"run7": "seven"}})
    )
    d = read_learning_curve(p)
    assert shown_runs(d) == ["run7", "run2"] and d["labels"] == {"run7": "seven"}
    res = build_report(tmp_path)
    assert [q.name for q in res.pngs] == ["learning_curve__learning_curves.png"] and png_ok(res.pngs[0])
    assert all(f"<td>run{k}</td>" in res.html.read_text() for k in range(10))
    p.write_text(json.dumps({"records": records, "shown": "run7"}))
    with pytest.raises(OrchestraceError) as e:
        read_learning_curve(p)
    assert e.value.pointer == "/shown"


def test_pareto_marks_read_and_checked(tmp_path: Path):
    p = tmp_path / "pareto.json"
    mark = {"mark": "1", "method": "learned", "path": "runs/stop/policy.safetensors"}
    p.write_text(json.dumps({"points": eval_rows(), "marks": [{**mark, "accuracy": 0.8, "mean_samples": 5}]}))
    assert read_pareto(p)["marks"][0]["path"] == mark["path"]
    assert png_ok(build_report(tmp_path).pngs[0])
    p.write_text(json.dumps({"points": eval_rows(), "marks": [{**mark, "accuracy": 0.8}]}))
    with pytest.raises(OrchestraceError) as e:
        read_pareto(p)
    assert e.value.pointer == "/marks/0" and "mean_samples" in str(e.value)


def test_learn_package_output_reads(tmp_path: Path):
    from stopkit import stop_report

    from orchestrace.learn.stopping.evaluation import ResultRow
    from orchestrace.learn.stopping.report import write_report

    report = stop_report(
        results=msgspec.convert(eval_rows()[:-1], list[ResultRow]),
        learning_curves={
            "ppo": [
                {"iteration": i, "batch_reward": i / 10, "eval_reward": 0.5, "eval_samples": 10 - i / 5}
                for i in range(10)
            ]
        },
    )
    write_report(report, str(tmp_path / "learnrun"))
    res = build_report(tmp_path / "learnrun")
    assert {p.name for p in res.pngs} == {"pareto.png", "learning_curve__learning_curves.png"}
    assert "curves: ac-beta, fixed-k ·" in res.html.read_text()


def test_report_errors(tmp_path: Path):
    with pytest.raises(OrchestraceError) as e:
        build_report(tmp_path / "missing")
    assert e.value.code == "OT001"
    (tmp_path / "empty").mkdir()
    with pytest.raises(OrchestraceError, match="pareto"):
        build_report(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pareto.json").write_text(
        json.dumps(
            [{"method": "a", "accuracy": 0.5, "cost": 1}, {"method": "b", "accuracy": "high", "cost": 2}]
        )
    )
    with pytest.raises(OrchestraceError) as e:
        build_report(bad)
    assert e.value.pointer == "/1" and "pareto.json" in str(e.value)
    assert e.value.exit_code == 1  # bad input (docs/input-limits.md), not usage
    # a key that is no string was an internal error (unhashable); rows that are no objects drew nothing
    for name, doc, pointer in (
        ("pareto.json", {"points": [{"cost": 1, "accuracy": 0.5}], "x": ["cost"]}, "/x"),
        ("pareto.json", {"points": [{"cost": 1, "accuracy": 0.5}], "y": {"a": 1}}, "/y"),
        ("learning_curve.json", {"records": [{"step": 1, "reward": 1}], "x": ["step"]}, "/x"),
        ("analysis.json", [1], "/traces/0"),
    ):
        odd = tmp_path / f"odd-{name}-{pointer[1:2]}"
        odd.mkdir()
        (odd / name).write_text(json.dumps(doc))
        with pytest.raises(OrchestraceError) as e:
            build_report(odd)
        assert (e.value.code, e.value.pointer, e.value.exit_code) == ("OT010", pointer, 1)
    # one byte-order mark is accepted, as by every reader (it was "not valid JSON")
    (bad / "pareto.json").write_bytes(
        b"\xef\xbb\xbf" + json.dumps([{"method": "a", "accuracy": 0.5, "cost": 1}]).encode()
    )
    assert build_report(bad).html.is_file()
    (bad / "pareto.json").write_text("{not json")
    with pytest.raises(OrchestraceError, match="not valid JSON") as e:
        build_report(bad)
    assert (e.value.code, e.value.exit_code) == ("OT003", 1)  # was OT001, exit 2 (a file that cannot be read)


def test_report_on_the_main_jobs_folder_and_on_its_report_folder(tmp_path: Path):
    """``train stop`` writes its JSON and plots to runs/stop/report/: ``report runs/stop`` (as the
    README says) and ``report runs/stop/report`` both write runs/stop/report/report.html, and
    leave the main job's own pareto.png (with its policy marks) alone."""
    for arg in ("stop", "stop/report"):
        runs = tmp_path / arg.replace("/", "-") / "runs"
        rep = runs / "stop" / "report"
        rep.mkdir(parents=True)
        (rep / "pareto.json").write_text(json.dumps({"points": eval_rows()[:-1]}))
        (rep / "learning_curves.json").write_text(
            json.dumps({"ppo": [{"iteration": i, "r": i} for i in range(5)]})
        )
        (rep / "pareto.png").write_bytes(b"the main job's plot")
        res = build_report(runs / arg)
        assert res.html == rep / "report.html" and res.html.exists()
        assert sorted(p.name for p in res.pngs) == ["report_learning_curves.png", "report_pareto.png"]
        assert not (rep / "report").exists()
        assert (rep / "pareto.png").read_bytes() == b"the main job's plot"


def test_report_skips_the_call_cache_beside_a_recorded_run(tmp_path: Path):
    """A recorded run's folder holds the trace and its call cache (``*.cache.jsonl``): the report
    reads the trace and leaves the cache alone (it is no trace; reading it as one fails)."""
    import shutil

    examples = Path(__file__).resolve().parents[2] / "examples" / "runs"
    run = tmp_path / "runs"
    shutil.copytree(examples, run)
    assert sorted(p.name for p in run.iterdir()) == ["debate-s1.cache.jsonl", "debate-s1.events.jsonl"]
    res = build_report(run)
    assert [p.name for p in res.pngs] == ["agent_costs.png"]
    assert "debater_0" in res.html.read_text()


def test_pareto_plot_reads_at_a_glance(tmp_path: Path):
    # `report runs/stop` drew "accuracy against mean_samples" (raw keys), 95% CI bars on every point
    # overlapping into a block between 6 and 8 samples, pale dots nothing explained, and mark numbers
    # on top of each other
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from orchestrace.viewer.report import pareto_plot

    def row(method: str, acc: float, samples: float) -> dict:
        ci = {"accuracy_ci95": [acc - 0.06, acc + 0.06], "mean_samples_ci95": [samples - 0.3, samples + 0.3]}
        return {"method": method, "accuracy": acc, "mean_samples": samples, "questions": 87, **ci}

    rows = [row(f"fixed-{k}", 0.5 + 0.01 * k, float(k)) for k in (1, 3, 5, 7, 9)] + [row("fixed-6", 0.4, 6.0)]
    rows += [
        row("learned", 0.600, 6.1),
        row("learned(target=5)", 0.601, 6.15),
        row("learned+agg", 0.602, 6.05),
    ]
    marks = [
        {"mark": str(i), "method": m["method"], "path": f"out/p{i}.safetensors", "accuracy": m["accuracy"],
         "mean_samples": m["mean_samples"]}
        for i, m in enumerate(rows[-3:], 1)
    ]  # fmt: skip
    p = tmp_path / "pareto.json"
    p.write_text(json.dumps({"points": rows, "marks": marks, "labels": {"fixed-k": "fixed-k majority"}}))
    fig = pareto_plot(read_pareto(p))
    ax = fig.axes[0]
    assert ax.get_title() == "Accuracy against mean samples per question"
    assert ax.get_xlabel() == "mean samples per question" and ax.get_ylabel() == "accuracy"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fixed-k majority" in legend and "fixed-k" not in legend
    assert "pale: a method's other settings (off its own front)" in legend
    assert "95% CI of accuracy: about ±0.06 (median; each in the table)" in legend
    assert not ax.containers  # no error bars drawn
    assert not any("_" in text for text in [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *legend[:4]])
    fig.canvas.draw()
    boxes = [Text.get_window_extent(t) for t in ax.texts if t.get_text() in ("1", "2", "3")]  # not the line
    assert len(boxes) == 3
    assert not any(
        a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )
    plt.close(fig)
