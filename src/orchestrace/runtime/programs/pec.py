"""Planner -> executor -> critic. The executor has a calculator tool; the critic's verdict and
the planner's plan travel as messages; the loop ends when the critic accepts or after ``cycles``."""

from __future__ import annotations

import ast
import operator
import re
from typing import Any

from ..backends.scripted import ScriptedBackend
from ..orchestrator import AgentSpec, BasePolicy, Message, Result, RunState, Task
from . import Setup
from .config import ON_ERROR, choice, positive_int, text

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def calculator(expr: Any) -> float | int:
    """Evaluate + - * / and parentheses on numbers; anything else is an error (no eval)."""

    def ev(n: ast.AST) -> float | int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.operand))
        raise ValueError(f"not arithmetic: {ast.dump(n)[:40]}")

    return ev(ast.parse(str(expr), mode="eval"))


class PECPolicy(BasePolicy):
    name = "pec"
    ROLES = ("planner", "executor", "critic")

    def __init__(self, question: str, cycles: int = 2, on_error: str = "continue") -> None:
        super().__init__(on_error)
        self.question, self.cycles = question, cycles
        m = re.search(r"[\d\s+\-*/().]*\d[\d\s+\-*/().]*", question)
        self.expr = m.group(0).strip() if m else ""

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if s.agents or s.round:
            return []
        return [
            AgentSpec(
                "planner", "planner", "You plan how to solve problems in one short sentence.", max_tokens=32
            ),
            AgentSpec(
                "executor", "executor", "You carry out plans and state the final answer.", max_tokens=32
            ),
            AgentSpec(
                "critic",
                "critic",
                "You check answers. Reply OK if the answer is right, else say what is wrong.",
                max_tokens=24,
            ),
        ]

    def delegate(self, s: RunState) -> list[Task]:
        phase = self.ROLES[s.round % 3]
        if phase == "planner":
            return [Task("planner", f"Plan how to solve: {self.question}")]
        if phase == "executor":
            return [
                Task(
                    "executor",
                    f"Solve: {self.question}",
                    tools=[("calculator", self.expr)] if self.expr else [],
                )
            ]
        ans = s.latest("executor")
        return [
            Task(
                "critic",
                f"Question: {self.question}\nProposed answer: {ans[0].text if ans else ''}\nIs it right?",
            )
        ]

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        out = []
        for r in results:
            if r.role == "planner" and r.text:
                out.append(Message("planner", "executor", r.text))
            if r.role == "critic" and r.text and not self.accepted(r.text):
                out.append(Message("critic", "planner", r.text))
        return out

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        if not any(r.role == "critic" for r in results):
            return None
        ex = s.latest("executor")
        return ex[0].text if ex else None

    @staticmethod
    def accepted(text: str | None) -> bool:
        return bool(text) and bool(re.match(r"\W*(ok|yes|correct)\b", text or "", re.I))

    def stop(self, s: RunState) -> str | None:
        if r := super().stop(s):
            return r
        crit = s.latest("critic")
        if crit and s.round % 3 == 0 and self.accepted(crit[0].text):
            return "accepted"
        return "max_cycles" if s.round >= 3 * self.cycles else None


def build(config: dict[str, Any]) -> Setup:
    q = text(config, "question", "What is 17 * 23 + 4?", "pec")
    cycles = positive_int(config, "cycles", 2, "pec")
    return Setup(
        policy=PECPolicy(q, cycles, choice(config, "on_error", "continue", ON_ERROR, "pec")),
        task=q,
        topology="planner_executor_critic",
        tools={"calculator": calculator},
        scripted=lambda seed: ScriptedBackend(fn=_scripted_reply, seed=seed),
    )


def _scripted_reply(req: Any) -> str:
    """Offline stand-in: a plan, an executor right or wrong by the call's seed, a critic that
    checks the executor's number against the calculator."""
    last = req.messages[-1]["content"]
    if last.startswith("Plan how"):
        return "Compute the product, then add."
    if "Is it right?" in last:
        return "OK" if "395" in last else "No: recompute the product first."
    return "The answer is 395." if req.seed % 2 else "The answer is 394."
