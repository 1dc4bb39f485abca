"""What the report figures show: a handful of named learning curves, the written policies marked."""

from __future__ import annotations

from orchestrace.learn.stopping.report import curve_series, policy_marks


def test_learning_curves_show_the_main_policies_and_the_sweep_ends() -> None:
    costs = (0.0005, 0.001, 0.002, 0.004, 0.03)
    curves = {n: [] for n in ["learned", "learned+agg"] + [f"learned(c={c:g})" for c in costs]}
    curves.update({f"learned+agg(c={c:g})": [] for c in costs})
    assert curve_series(curves) == ["learned", "learned+agg", "learned(c=0.0005)", "learned(c=0.03)"]
    assert curve_series({"learned": []}) == ["learned"]


def test_policy_marks_number_the_written_policies_at_their_points() -> None:
    report = {
        "results": [
            {"method": "fixed-40", "accuracy": 0.7, "mean_samples": 40.0},
            {"method": "learned", "accuracy": 0.69, "mean_samples": 4.5},
            {"method": "learned+agg(target=5)", "accuracy": 0.71, "mean_samples": 4.9},
        ],
        "policies_written": {
            "learned": "out/p.safetensors",
            "learned+agg(target=5)": "out/p-agg-target.safetensors",
        },
    }
    marks = policy_marks(report)
    assert [(m.mark, m.method, m.path, m.mean_samples) for m in marks] == [
        ("1", "learned", "out/p.safetensors", 4.5),
        ("2", "learned+agg(target=5)", "out/p-agg-target.safetensors", 4.9),
    ]
