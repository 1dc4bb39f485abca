"""Cross-check ``learn/baselines.py``'s ConSol SPRT against the real PyPI ``consol`` 0.3.0.

Calls consol's own code, not a copy: ``SprtConfidenceModel.test`` (the SPRT statistic),
``ConfidentSolver._determine_trials`` (how many samples to draw next) and
``ConfidentSolver.invoke`` (its whole sampling loop and final ``mode()`` answer), the last one
driven by a replay "LLM" whose ``batch`` returns a bank's samples in bank order (null samples
come back as unparsed outputs, which consol drops and re-asks for).

consol's package ``__init__`` imports LangChain's LLM clients. With ``pip install --no-deps
consol==0.3.0`` (no LangChain) the four client modules are replaced by empty modules during the
import only; the SPRT path never touches them (``__init__``, which builds the LLM, is skipped).

    /tmp/consol-venv/bin/python -m venv ... && pip install consol==0.3.0 msgspec orjson ...
    PYTHONPATH=src /tmp/consol-venv/bin/python bench/consol_crosscheck.py
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import time
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrace.learn.stopping.banks import Bank, SynthParams, default_bank, synthetic_bank
from orchestrace.learn.stopping.features import prefix_table
from orchestrace.learn.stopping.rules import SPRT_EPS, Sprt, consol_sprt

LANGCHAIN = ("langchain_core", "langchain_openai", "langchain_ollama", "langchain_google_genai")
BUDGET = 40
GRID = 80  # first + second <= GRID


def load_consol() -> types.ModuleType:
    """``consol.confident_solver``; empty LangChain stand-ins only while importing, if absent."""
    stubs = {
        n: types.ModuleType(n)
        for n in LANGCHAIN
        if n not in sys.modules and importlib.util.find_spec(n) is None
    }
    sys.modules.update(stubs)
    try:
        import consol.confident_solver as cs
    finally:
        for n in stubs:
            sys.modules.pop(n, None)
    return cs


def configs(cs: types.ModuleType) -> list[tuple[str, Sprt, Any]]:
    """(name, ours, consol's model): the defaults and every beta of our Pareto sweep."""
    out = [("default", Sprt(), cs.SprtConfidenceModel(max_trials=BUDGET))]
    for e in SPRT_EPS:
        b = 1 - 0.05 - e
        out.append((f"eps={e:g}", Sprt(beta=b), cs.SprtConfidenceModel(max_trials=BUDGET, beta=b)))
    return out


def solver(cs: types.ModuleType, model: Any) -> Any:
    """A ConfidentSolver without its LLM (``__init__`` only builds the LangChain client)."""
    s = object.__new__(cs.ConfidentSolver)
    s.confidence_model = model
    return s


def grid_test(ours: Sprt, model: Any) -> tuple[int, int]:
    """(states, disagreements) of the accept/continue decision for first + second <= GRID."""
    n = bad = 0
    for f in range(GRID + 1):
        for s in range(GRID + 1 - f):
            n += 1
            bad += ours.test(f, s) != bool(model.test(f, s))
    return n, bad


def grid_trials(ours: Sprt, sol: Any) -> tuple[int, int]:
    """(states, disagreements) of the next draw size, budget BUDGET, over every reachable
    (first, second, drawn so far) with first + second <= drawn < BUDGET (third answers and
    nulls make drawn exceed first + second)."""
    n = bad = 0
    for f in range(BUDGET + 1):
        for s in range(BUDGET + 1 - f):
            for drawn in range(f + s, BUDGET):
                n += 1
                mine = min(ours.trials(f, s, BUDGET), BUDGET - drawn)
                bad += mine != sol._determine_trials(f, s, BUDGET, drawn)
    return n, bad


class Exhausted(BaseException):
    """The bank holds no more samples (a BaseException: consol's retry loop catches Exception)."""


class Replay:
    """Stands in for ``llm.with_structured_output(..., include_raw=True)``: the next samples."""

    def __init__(self, samples: Sequence[str | None], output_cls: type) -> None:
        self.samples, self.output_cls, self.drawn = list(samples), output_cls, 0

    def batch(self, inputs: list[Any], **_: Any) -> list[dict[str, Any]]:
        k = len(inputs)
        if self.drawn + k > len(self.samples):
            raise Exhausted
        out = [
            {
                "parsed": None if x is None else self.output_cls(answer=x),
                "raw": types.SimpleNamespace(usage_metadata={"output_tokens": 1}),
            }
            for x in self.samples[self.drawn : self.drawn + k]
        ]
        self.drawn += k
        return out


@dataclass
class Replayed:
    bank: str
    questions: int
    nulls: int  # questions with a null among their samples
    ours_acc: float
    ours_mean: float
    consol_acc: float
    consol_mean: float  # samples consol drew (LLM calls, nulls included)
    stop_diff: int  # questions where the stopping points are inconsistent
    answer_diff: int  # same stopping point, different answer, no tie to explain it
    ties: int  # same stopping point, answers differ by tie-breaking only
    beyond: int  # consol drew past BUDGET calls (its cap counts parsed answers only)


def consol_run(cs: types.ModuleType, model: Any, samples: Sequence[str | None]) -> tuple[str, int]:
    """consol's ``invoke`` on one question: (its answer, samples it drew)."""
    sol = solver(cs, model)
    sol.llm_with_structured_output = replay = Replay(samples, cs.AbstractOutput)
    with contextlib.redirect_stderr(io.StringIO()):  # its tqdm bar
        answer = sol.invoke([types.SimpleNamespace(content="")])
    return str(answer), replay.drawn


def replay_bank(cs: types.ModuleType, bank: Bank, ours: Sprt = Sprt()) -> Replayed:
    """Both stopping rules over every question of ``bank``, samples in bank order."""
    rule = consol_sprt(ours)
    model = cs.SprtConfidenceModel(max_trials=BUDGET, p1=ours.p1, alpha=ours.alpha, beta=ours.beta)
    r = Replayed(bank.name, len(bank), 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0)
    ours_ok, ours_n, con_ok, con_n = [], [], [], []
    for q in bank.questions:
        has_null = any(x is None for x in q.samples)
        r.nulls += has_null
        pt = prefix_table(q.answers[:BUDGET])
        n = rule(pt, BUDGET)
        mine = q.labels[int(pt.majority[n - 1])]
        theirs, drawn = consol_run(cs, model, q.samples)
        ours_n.append(n)
        con_n.append(drawn)
        ours_ok.append(q.is_correct(q.labels.index(mine)))
        con_ok.append(q.is_correct(q.labels.index(theirs)))
        r.beyond += drawn > BUDGET
        # consol's cap counts parsed answers; ours counts draws (nulls cost a draw, spec §6):
        # below the budget both must stop on the same draw, at it consol may go on.
        same = drawn == n if n < BUDGET or not has_null else drawn >= n
        if not same:
            r.stop_diff += 1
        elif drawn == n and mine != theirs:
            counts = pt.counts[n - 1]
            tied = counts[q.labels.index(mine)] == counts[q.labels.index(theirs)]
            r.ties += bool(tied)
            r.answer_diff += not tied
    r.ours_acc, r.ours_mean = float(np.mean(ours_ok)), float(np.mean(ours_n))
    r.consol_acc, r.consol_mean = float(np.mean(con_ok)), float(np.mean(con_n))
    return r


def banks() -> list[Bank]:
    return [
        default_bank("antonyms"),
        default_bank("countries"),
        synthetic_bank(1000, SynthParams(), seed=0, name="synthetic"),
        # 80 samples so that consol can re-ask for the nulls it drops
        synthetic_bank(500, SynthParams(null_rate=0.2, samples=80), seed=1, name="synthetic-null0.2"),
    ]


def main() -> int:
    t0 = time.perf_counter()
    if importlib.util.find_spec("consol") is None:
        print("consol is not installed: pip install --no-deps consol==0.3.0", file=sys.stderr)
        return 2
    cs = load_consol()
    import consol

    print(
        f"consol from {consol.__file__}; LangChain importable: {importlib.util.find_spec('langchain_core') is not None}"
    )
    c, o = cs.SprtConfidenceModel().config, Sprt()
    print(f"consol defaults: p1={c.p1} alpha={c.alpha} beta={c.beta!r} max_trials={c.max_trials}")
    print(f"ours:            p1={o.p1} alpha={o.alpha} beta={o.beta!r} (budget {BUDGET})")
    total = int((c.p1, c.alpha, c.beta) != (o.p1, o.alpha, o.beta))
    print(f"\n(a) accept/continue, first + second <= {GRID}; (b) next draw size, budget {BUDGET}")
    print(
        f"{'config':<14}{'beta':>12}{'test states':>13}{'diff':>6}{'trials states':>15}{'diff':>6}{'lead to stop':>14}"
    )
    for name, ours, model in configs(cs):
        nt, bt = grid_test(ours, model)
        nr, br = grid_trials(ours, solver(cs, model))
        lead = ours.trials(0, 0, BUDGET)
        print(f"{name:<14}{ours.beta:>12.6f}{nt:>13}{bt:>6}{nr:>15}{br:>6}{lead:>14}")
        total += bt + br
    print(f"\n(c) full stopping rule replayed through consol's invoke(), budget {BUDGET}, default SPRT")
    print(
        f"{'bank':<19}{'Q':>5}{'w/ null':>8}{'ours acc':>9}{'ours n':>8}{'consol acc':>11}"
        f"{'consol n':>9}{'stop diff':>10}{'ans diff':>9}{'ties':>5}{'>40':>5}"
    )
    for bank in banks():
        r = replay_bank(cs, bank)
        print(
            f"{r.bank:<19}{r.questions:>5}{r.nulls:>8}{r.ours_acc:>9.4f}{r.ours_mean:>8.3f}"
            f"{r.consol_acc:>11.4f}{r.consol_mean:>9.3f}{r.stop_diff:>10}{r.answer_diff:>9}"
            f"{r.ties:>5}{r.beyond:>5}"
        )
        total += r.stop_diff + r.answer_diff
    print(
        "\nties: same stopping draw, answers differ only by tie-breaking (consol: pandas mode(),"
        " smallest label; ours: first seen).\n>40: questions where consol drew past 40 calls"
        " because its max_trials counts parsed answers (ours counts every draw)."
    )
    print(f"time: {time.perf_counter() - t0:.1f} s")
    print(f"disagreements: {total}")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
