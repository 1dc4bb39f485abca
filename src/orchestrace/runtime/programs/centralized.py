"""Centralized orchestrator with parallel workers: one antonym per worker, answers joined."""

from __future__ import annotations

from typing import Any

from ..backends.scripted import ScriptedBackend
from ..orchestrator import AgentSpec, BasePolicy, Result, RunState, Task
from . import Setup
from .antonyms import ANTONYM_EXAMPLES, ANTONYM_FEWSHOT, ANTONYM_SYSTEM, word
from .config import ON_ERROR, choice
from .config import words as read_words

WORDS = ["hot", "tall", "early", "happy"]
SCRIPT = {"hot": "cold", "tall": "short", "early": "late", "happy": "sad", "fast": "slow", "big": "small"}


class CentralizedPolicy(BasePolicy):
    """Spawn one worker per sub-task, delegate all at once, join the returns, stop."""

    name = "centralized"

    def __init__(self, words: list[str], on_error: str = "continue") -> None:
        super().__init__(on_error)
        self.words = words

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if s.round or s.agents:
            return []
        return [
            AgentSpec(
                f"worker_{i}",
                "worker",
                ANTONYM_SYSTEM,
                temperature=0.7,
                max_tokens=8,
                fewshot=ANTONYM_EXAMPLES,
            )
            for i in range(len(self.words))
        ]

    def delegate(self, s: RunState) -> list[Task]:
        if s.round:
            return []
        return [Task(f"worker_{i}", ANTONYM_FEWSHOT.format(w=w)) for i, w in enumerate(self.words)]

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        by_agent = {r.agent: word(r.text) for r in results}
        return "; ".join(f"{w}->{by_agent.get(f'worker_{i}') or '?'}" for i, w in enumerate(self.words))

    def stop(self, s: RunState) -> str | None:
        return super().stop(s) or ("done" if s.round >= 1 else None)


def build(config: dict[str, Any]) -> Setup:
    words = read_words(config, "words", WORDS, "centralized")
    on_error = choice(config, "on_error", "continue", ON_ERROR, "centralized")
    return Setup(
        policy=CentralizedPolicy(words, on_error),
        task="antonyms of: " + ", ".join(words),
        topology="centralized",
        scripted=lambda seed: ScriptedBackend(
            fn=lambda req: next(
                (v for k, v in SCRIPT.items() if f'"{k}"' in req.messages[-1]["content"]), "same"
            ),
            seed=seed,
        ),
    )
