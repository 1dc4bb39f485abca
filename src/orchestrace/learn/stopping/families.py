"""Question families for real sample banks: prompts, gold answers and answer canonicalisation.

The questions and gold answers are our own. Families with different answer distributions let
us train a stopping policy on some and evaluate it on one never seen:

- ``antonyms``: one word; wrong answers scatter over many strings, the right one stays most
  common (voting roughly doubles SmolLM2-135M's accuracy); failure mode: the word echoed back.
- ``countries``: the country of a city; fewer distinct answers, a strong single-sample rate.
- ``continents``: the continent of a country; few possible answers, wrong ones confident.
- ``capitals``: the capital of a country; many scattered wrong cities, voting helps a lot.

A sample is canonicalised (first line, lower case, punctuation stripped, aliases mapped to the
gold spelling) so that votes for the same answer are counted together; an empty answer is null.

The questions are task files shipped with the package (``learn/task_files/<name>.jsonl``, read by
``learn/tasks.py`` as any user's ``--tasks PATH``): a family is a view of its task set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..tasks import TaskSet, load_tasks, shipped_names


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """A task family: its questions, how to ask, and how to read an answer."""

    name: str
    questions: tuple[Question, ...]
    shots: tuple[tuple[str, str], ...]
    canonical: Callable[[str, Question], str | None]
    max_new_tokens: int

    def messages(self, q: Question) -> list[dict[str, str]]:
        """Few-shot chat: three example turns, then the question."""
        msgs: list[dict[str, str]] = []
        for ask, ans in self.shots:
            msgs += [{"role": "user", "content": ask}, {"role": "assistant", "content": ans}]
        msgs.append({"role": "user", "content": q.question})
        return msgs


def from_tasks(ts: TaskSet) -> Family:
    """A task set as a family (a question's aliases are its accepted answers, the gold first)."""
    canon = ts.verifier.canonical
    return Family(
        name=ts.name,
        questions=tuple(Question(t.id, t.question, t.gold, t.answers) for t in ts.items),
        shots=tuple((s.question, s.gold) for s in ts.shots),
        canonical=lambda text, q: canon(text, q.aliases),
        max_new_tokens=ts.max_new_tokens,
    )


FAMILIES: dict[str, Family] = {name: from_tasks(load_tasks(name)) for name in shipped_names()}


def family(name: str) -> Family:
    from ...core.errors import OrchestraceError

    if name not in FAMILIES:
        raise OrchestraceError("OT613", f"unknown task family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
