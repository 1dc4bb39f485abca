"""ConSol's SPRT (arXiv 2503.17587, PyPI ``consol`` 0.3.0): hand-computed cases, then the real
package's code against ours when ``consol`` is installed (``pip install --no-deps consol==0.3.0``
is enough: ``bench/consol_crosscheck.py`` imports it without LangChain)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from orchestrace.learn.stopping.banks import NULL, SynthParams, default_bank, synthetic_bank
from orchestrace.learn.stopping.features import prefix_table
from orchestrace.learn.stopping.rules import SPRT_EPS, Sprt, consol_sprt

# ln(0.5001 / 0.5) = ln 1.0002 = +1.99980e-4 per vote of the leader,
# ln(0.4999 / 0.5) = ln 0.9998 = -2.00020e-4 per vote of the runner-up.
UP, DOWN = 1.9998000267e-4, -2.0002000267e-4
# log A = ln((1 - beta) / alpha) = ln(0.050024 / 0.05) = ln 1.00048 = 4.79885e-4
# log B = ln(beta / (1 - alpha)) = ln(0.949976 / 0.95) = -2.52635e-5
LOG_A, LOG_B = 4.7988484e-4, -2.5263477e-5


def pt_of(seq: str):
    ids: dict[str, int] = {}
    return prefix_table(np.array([NULL if ch == "." else ids.setdefault(ch, len(ids)) for ch in seq]))


@pytest.mark.parametrize(
    ("first", "second", "passes"),
    [
        (2, 0, False),  # 2 UP = 3.9996e-4 < log A
        (3, 0, True),  # 3 UP = 5.9994e-4 >= log A
        (4, 1, True),  # 4 UP + DOWN = 5.9990e-4
        (4, 2, False),  # 4 UP + 2 DOWN = 3.9988e-4
        # a lead of 3 passes while 3 UP + s (UP + DOWN) = 5.9994e-4 - 4.0e-8 s >= log A, s <= 3001
        (3004, 3001, True),
        (3005, 3002, False),
        # the H0 boundary: n (UP + DOWN) = -4.0e-8 n <= log B once n >= 632 (unreachable in 40)
        (631, 631, False),
        (632, 632, True),
    ],
)
def test_sprt_statistic_by_hand(first: int, second: int, passes: bool) -> None:
    llr = first * UP + second * DOWN
    assert (llr >= LOG_A or llr <= LOG_B) is passes
    assert Sprt().test(first, second) is passes


def test_sprt_sweep_leads_and_trials_by_hand() -> None:
    # beta = 1 - 0.05 - eps: log A = ln(1 + eps / 0.05); the lead needed is ceil(log A / UP)
    leads = [Sprt(beta=1 - 0.05 - e).trials(0, 0, 40) for e in SPRT_EPS]
    assert leads == [1, 2, 2, 3, 3, 4, 5, 7, 10, 15]  # e.g. eps 1e-4: ln 1.002 / UP = 9.99 -> 10
    s = Sprt()
    assert [s.trials(1, 1, 40), s.trials(2, 1, 40), s.trials(4, 1, 40), s.trials(0, 0, 2)] == [3, 2, 0, 2]
    # the budget caps the loop: a, b, a, b never leads by 3
    assert consol_sprt()(pt_of("abab" * 3), 10) == 10
    # nulls cost a draw and never vote: 3 draws (a . a) -> lead 2 -> 1 more (a) -> 4
    assert consol_sprt()(pt_of("a.aa" + "b" * 6), 40) == 4


def _bench() -> ModuleType:
    # scripts/install.sh installs it: under CI the cross-check must run
    if not os.environ.get("CI") and importlib.util.find_spec("consol") is None:
        pytest.skip("consol not installed (pip install --no-deps consol==0.3.0)")
    path = Path(__file__).resolve().parents[2] / "bench" / "consol_crosscheck.py"
    spec = importlib.util.spec_from_file_location("consol_crosscheck", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench() -> tuple[ModuleType, ModuleType]:
    b = _bench()
    return b, b.load_consol()


def test_real_consol_decisions_and_draw_sizes(bench: tuple[ModuleType, ModuleType]) -> None:
    b, cs = bench
    c = cs.SprtConfidenceModel().config  # consol's defaults are ours (its max_trials: 256)
    assert (c.p1, c.alpha, c.beta, c.max_trials) == (Sprt().p1, Sprt().alpha, Sprt().beta, 256)
    for _, ours, model in b.configs(cs)[:4]:
        assert b.grid_test(ours, model) == (3321, 0)  # first + second <= 80
        assert b.grid_trials(ours, b.solver(cs, model)) == (11480, 0)  # budget 40


def test_real_consol_replay(bench: tuple[ModuleType, ModuleType]) -> None:
    b, cs = bench
    for bank in (default_bank("countries"), synthetic_bank(150, SynthParams(), seed=5)):
        r = b.replay_bank(cs, bank)
        assert (r.stop_diff, r.answer_diff, r.beyond) == (0, 0, 0)
        assert r.ours_mean == r.consol_mean
    # consol's max_trials counts parsed answers: with nulls it may draw past the budget
    r = b.replay_bank(cs, synthetic_bank(100, SynthParams(null_rate=0.3, samples=80), seed=2))
    assert (r.stop_diff, r.answer_diff) == (0, 0) and r.beyond > 0 and r.consol_mean > r.ours_mean


def test_real_consol_tie_break_is_pandas_mode(bench: tuple[ModuleType, ModuleType]) -> None:
    b, cs = bench
    model = cs.SprtConfidenceModel(max_trials=4)
    # never three ahead: both stop at the budget on a 2-2 tie; consol answers the smaller label
    assert b.consol_run(cs, model, ["b", "a", "b", "a", "a", "a"]) == ("a", 4)
    pt = pt_of("baba")
    assert consol_sprt()(pt, 4) == 4 and pt.majority[3] == 0  # ours: b, seen first
    assert b.consol_run(cs, model, ["x", "x", "y", "x", "x"]) == (
        "x",
        4,
    )  # (2,1) after 3 wants 2, capped at 1
    assert consol_sprt()(pt_of("xxyxx"), 4) == 4
