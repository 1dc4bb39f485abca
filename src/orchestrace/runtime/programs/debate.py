"""Debate: debaters answer, read each other's answers, answer again; majority vote decides.

Stops on consensus, after ``rounds`` rounds, or early (cancelling debaters still talking) once
a strict majority of all debaters agrees in the final round.
"""

from __future__ import annotations

from typing import Any

from ...core.stats import majority
from ..backends.scripted import ScriptedBackend
from ..orchestrator import AgentSpec, BasePolicy, Message, Result, RunState, Task
from . import Setup
from .antonyms import ANTONYM_EXAMPLES, ANTONYM_FEWSHOT, ANTONYM_SYSTEM, word
from .config import ON_ERROR, choice, flag, positive_int, text


class DebatePolicy(BasePolicy):
    name = "debate"

    def __init__(
        self, question: str, n: int = 3, rounds: int = 3, on_error: str = "continue", early: bool = True
    ) -> None:
        super().__init__(on_error)
        self.question, self.n, self.rounds, self.early = question, n, rounds, early

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if s.agents or s.round:
            return []
        return [
            AgentSpec(
                f"debater_{i}",
                "debater",
                ANTONYM_SYSTEM,
                temperature=0.9,
                max_tokens=8,
                fewshot=ANTONYM_EXAMPLES,
            )
            for i in range(self.n)
        ]

    def delegate(self, s: RunState) -> list[Task]:
        prompt = (
            self.question
            if s.round == 0
            else "Considering the other answers, give your final answer in one word."
        )
        return [Task(name, prompt) for name in s.agents]

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        return [
            Message(r.agent, other, r.text)
            for r in results
            if r.text
            for other in s.agents
            if other != r.agent
        ]

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        return majority(word(r.text) for r in results)

    def stop(self, s: RunState) -> str | None:
        if r := super().stop(s):
            return r
        now = [word(r.text) for r in s.results if r.round == s.round]
        if self.early and s.round == self.rounds - 1 and now:
            top = majority(now)
            if top is not None and sum(w == top for w in now) * 2 > self.n:
                return "majority"
        last = s.latest()
        if last and s.round > last[0].round:
            words = [word(r.text) for r in last]
            if len(set(words)) == 1 and words[0] is not None and len(words) == self.n:
                return "consensus"
        return "max_rounds" if s.round >= self.rounds else None


def build(config: dict[str, Any]) -> Setup:
    w = text(config, "word", "hot", "debate")
    n = positive_int(config, "n", 3, "debate")
    rounds = positive_int(config, "rounds", 3, "debate")
    on_error = choice(config, "on_error", "continue", ON_ERROR, "debate")
    early = flag(config, "early", True, "debate")
    return Setup(
        policy=DebatePolicy(ANTONYM_FEWSHOT.format(w=w), n, rounds, on_error, early),
        task=f"opposite of {w!r}",
        topology="debate",
        policies={
            "no-early-stop": lambda: DebatePolicy(
                ANTONYM_FEWSHOT.format(w=w), n, rounds, on_error, early=False
            )
        },
        scripted=lambda seed: ScriptedBackend(choices=["cold", "cold", "cool", "warm", "Cold."], seed=seed),
    )
