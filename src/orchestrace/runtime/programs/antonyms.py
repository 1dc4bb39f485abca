"""The antonym task of the examples: the prompt, three example pairs that make the small local
model answer with one word (docs/local-llm.md), and how an answer word is read from a reply."""

from __future__ import annotations

import re

ANTONYM_SYSTEM = "You are a careful assistant. Answer with just one word."
ANTONYM_FEWSHOT = 'What is the opposite of the word "{w}"? Answer with just one word.'
#: Three example (word, antonym) pairs: with them the small local model answers with one word
#: (docs/local-llm.md).
ANTONYM_SHOTS = (("big", "small"), ("open", "closed"), ("light", "dark"))
ANTONYM_EXAMPLES = [
    m
    for q, a in ANTONYM_SHOTS
    for m in ({"role": "user", "content": ANTONYM_FEWSHOT.format(w=q)}, {"role": "assistant", "content": a})
]
_FILLER = {"the", "a", "an", "opposite", "of", "word", "is", "would", "be", "answer"}


def word(text: str | None) -> str | None:
    """The answer word, lower-cased: after "is" in "The opposite of X is Y", else the first word
    that is not filler (None if there is none)."""
    if not text:
        return None
    m = re.search(r"\bis\W+([A-Za-z]+)", text)
    if m:
        return m.group(1).lower()
    return next((w.lower() for w in re.findall(r"[A-Za-z]+", text) if w.lower() not in _FILLER), None)
