"""What the report figures show: a handful of named learning curves, the written policies marked."""

from __future__ import annotations

import os

from stopkit import stop_report

from orchestrace.learn.stopping.evaluation import ResultRow
from orchestrace.learn.stopping.report import StopReport, curve_series, policy_marks


def test_learning_curves_show_the_main_policies_and_the_sweep_ends() -> None:
    costs = (0.0005, 0.001, 0.002, 0.004, 0.03)
    curves = {n: [] for n in ["learned", "learned+agg"] + [f"learned(c={c:g})" for c in costs]}
    curves.update({f"learned+agg(c={c:g})": [] for c in costs})
    assert curve_series(curves) == ["learned", "learned+agg", "learned(c=0.0005)", "learned(c=0.03)"]
    assert curve_series({"learned": []}) == ["learned"]


def test_policy_marks_number_the_written_policies_at_their_points() -> None:
    report = stop_report(
        results=[
            ResultRow("fixed-40", 0.7, 40.0, 9),
            ResultRow("learned", 0.69, 4.5, 9),
            ResultRow("learned+agg(target=5)", 0.71, 4.9, 9),
        ],
        policies_written={
            "learned": "out/p.safetensors",
            "learned+agg(target=5)": "out/p-agg-target.safetensors",
        },
    )
    marks = policy_marks(report)
    assert [(m.mark, m.method, m.path, m.mean_samples) for m in marks] == [
        ("1", "learned", "out/p.safetensors", 4.5),
        ("2", "learned+agg(target=5)", "out/p-agg-target.safetensors", 4.9),
    ]


def _report_with_sweep() -> StopReport:
    hist = [{"iteration": i, "batch_reward": 0.1 * i, "eval_samples": 40.0 - i} for i in (1, 10, 20)]
    curves = {
        n: hist for n in ["learned", "learned+agg"] + [f"learned(c={c:g})" for c in (0.0005, 0.01, 0.03)]
    }
    curves.update({f"learned+agg(c={c:g})": hist for c in (0.0005, 0.03)})
    return stop_report(
        eval_bank="plurals+comparatives",
        target_samples=5,
        cost=0.003,
        results=[
            ResultRow("fixed-1", 0.52, 1.0, 9),
            ResultRow("fixed-40", 0.615, 40.0, 9),
            ResultRow("consol-sprt", 0.61, 8.3, 9),
            ResultRow("learned", 0.607, 5.67, 9),
            ResultRow("learned(target=5)", 0.596, 5.14, 9),
            ResultRow("learned+agg", 0.641, 8.31, 9),
        ],
        policies_written={
            "learned": "out/policy.safetensors",
            "learned(target=5)": "out/policy-target.safetensors",
            "learned+agg": "out/policy-agg.safetensors",
        },
        learning_curves=curves,
    )


def test_pareto_figure_names_every_written_policy_in_a_legend_outside_the_axes() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from orchestrace.learn.stopping.report import pareto_figure

    fig = pareto_figure(_report_with_sweep())
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [lab for lab in labels if lab[0].isdigit()] == [
        "1: policy.safetensors (learned)",
        "2: policy-target.safetensors (learned(target=5))",
        "3: policy-agg.safetensors (learned+agg)",
    ]
    assert {"ConSol SPRT", "fixed-40 majority accuracy", "budget: 5 samples"} <= set(labels)
    assert not any(lab.startswith("pale") for lab in labels)  # every point is on its method's front here
    # each star sits at its policy's measured point, numbered as the command prints it
    stars = {a.get_text(): a.xy for a in ax.texts}
    assert stars == {"1": (5.67, 0.607), "2": (5.14, 0.596), "3": (8.31, 0.641)}
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_learning_curves_figure_draws_four_named_series_with_the_legend_below() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from orchestrace.learn.stopping.report import learning_curves_figure

    curves = _report_with_sweep().learning_curves
    fig = learning_curves_figure(curves, cost=0.003)
    drawn = [line.get_label() for line in fig.axes[0].get_lines()]
    assert drawn == [
        "majority vote, c=0.003 (main policy)",
        "learned aggregator, c=0.003 (main policy)",
        "majority vote, c=0.0005 (sweep: most samples)",
        "majority vote, c=0.03 (sweep: fewest samples)",
    ]
    assert len(fig.axes[1].get_lines()) == 4
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == drawn
    assert legend.get_title().get_text().startswith("4 of 7 trained policies")
    fig.canvas.draw()
    assert legend.get_window_extent().y1 <= min(a.get_window_extent().y0 for a in fig.axes)
    plt.close(fig)


def test_report_json_carries_the_marks_and_the_shown_curves(tmp_path) -> None:
    import json

    from orchestrace.learn.stopping.report import write_report
    from orchestrace.viewer.report import read_learning_curve, read_pareto, shown_runs

    paths = write_report(_report_with_sweep(), str(tmp_path))
    names = ["pareto.png", "pareto.json", "learning_curves.png", "learning_curves.json"]
    assert paths == [str(tmp_path / n) for n in names] and all(map(os.path.exists, paths))
    pareto = read_pareto(tmp_path / "pareto.json")
    assert [(m["mark"], m["path"]) for m in pareto["marks"]] == [
        ("1", "out/policy.safetensors"),
        ("2", "out/policy-target.safetensors"),
        ("3", "out/policy-agg.safetensors"),
    ]
    curves = read_learning_curve(tmp_path / "learning_curves.json")
    assert shown_runs(curves) == ["learned", "learned+agg", "learned(c=0.0005)", "learned(c=0.03)"]
    assert curves["labels"]["learned(c=0.03)"] == "majority vote, c=0.03 (sweep: fewest samples)"
    # every curve is still in the file, not only the drawn ones
    runs = {r["run"] for r in json.loads((tmp_path / "learning_curves.json").read_text())["records"]}
    assert len(runs) == 7


def _boxes_overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_pareto_figure_explains_its_pale_dots_and_keeps_close_marks_apart() -> None:
    # the pale dots (settings off a method's front) had no legend entry, and the numbers of marks a
    # few pixels apart were printed on top of each other
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from orchestrace.learn.stopping.report import pareto_figure

    report = stop_report(
        eval_bank="plurals+comparatives",
        results=[
            ResultRow("fixed-1", 0.52, 1.0, 9),
            ResultRow("fixed-2", 0.50, 2.0, 9),  # off the fixed-k front: a pale dot
            ResultRow("fixed-40", 0.615, 40.0, 9),
            ResultRow("learned", 0.600, 5.20, 9),
            ResultRow("learned(target=5)", 0.601, 5.22, 9),
            ResultRow("learned+agg", 0.602, 5.18, 9),
        ],
        pareto={"fixed-k": [[1.0, 0.52], [40.0, 0.615]]},
        policies_written={
            "learned": "out/policy.safetensors",
            "learned(target=5)": "out/policy-target.safetensors",
            "learned+agg": "out/policy-agg.safetensors",
        },
    )
    fig = pareto_figure(report)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "pale: a method's other settings (off its own front)" in labels
    assert ax.get_title() == "held-out plurals+comparatives: accuracy against mean samples per question"
    fig.canvas.draw()
    numbers = [t for t in ax.texts if t.get_text() in ("1", "2", "3")]
    assert len(numbers) == 3
    boxes = [Text.get_window_extent(t) for t in numbers]  # the number, not its line
    assert not any(_boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(fig)
