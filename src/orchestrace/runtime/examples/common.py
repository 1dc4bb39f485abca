"""What the examples share: the setup a runner needs, answer normalisation, the antonym prompt."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..backends.scripted import ScriptedBackend
from ..orchestrator import Policy


@dataclass
class Setup:
    policy: Policy
    task: str
    topology: str
    tools: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    policies: dict[str, Callable[[], Policy]] = field(default_factory=dict)
    scripted: Callable[[int], ScriptedBackend] | None = None


ANTONYM_SYSTEM = "You are a careful assistant. Answer with just one word."
ANTONYM_FEWSHOT = 'What is the opposite of the word "{w}"? Answer with just one word.'


def word(text: str | None) -> str | None:
    """The first alphabetic word of an answer, lower-cased (None if there is none)."""
    if not text:
        return None
    m = re.search(r"[A-Za-z]+", text)
    return m.group(0).lower() if m else None


def majority(answers: list[str | None]) -> str | None:
    """Most common normalised answer; ties go to the one seen first (deterministic)."""
    words = [w for w in (word(a) for a in answers) if w]
    if not words:
        return None
    counts = Counter(words)
    best = max(counts.values())
    return next(w for w in words if counts[w] == best)
