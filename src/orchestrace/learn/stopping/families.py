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
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ...runtime.examples.common import ANTONYM_FEWSHOT


@cache
def word_lists() -> dict[str, list]:
    """The families' word lists (``data/word_lists.json``: rows of [asked item, gold, alternatives...])."""
    res = resources.files("orchestrace.learn.stopping") / "data" / "word_lists.json"
    return json.loads(res.read_text(encoding="utf-8"))


_PUNCT = re.compile(r"[^\w\s'-]")
_SPACE = re.compile(r"\s+")


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


def _clean(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = _PUNCT.sub(" ", line.lower()).replace("_", " ")
    return _SPACE.sub(" ", line).strip(" '-")


def _canon_word(text: str, q: Question) -> str | None:
    """First word of the first line; an accepted synonym counts as the gold word."""
    words = _clean(text).split()
    if not words:
        return None
    w = words[0]
    return q.gold if w in q.aliases else w


def _canon_phrase(text: str, q: Question) -> str | None:
    """The first line (at most four words, without a leading 'the'); aliases map to gold."""
    s = _clean(text)
    for prefix in ("the ", "it is in ", "in "):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    if not s:
        return None
    s = " ".join(s.split()[:4])
    if s in q.aliases:
        return q.gold
    return s


def _antonym_question(word: str) -> str:
    return ANTONYM_FEWSHOT.format(w=word)  # the prompt the runtime examples ask


def _city_question(city: str) -> str:
    return f"In which country is the city of {city.title()}? Answer with just the country name."


def _plural_question(word: str) -> str:
    return f'What is the plural of the word "{word}"? Answer with just one word.'


def _comparative_question(word: str) -> str:
    return f'What is the comparative form of the adjective "{word}"? Answer with just one word.'


def _parse_words(rows: list[list[str]], prefix: str, ask: Callable[[str], str]) -> tuple[Question, ...]:
    """``[word, gold, alternative...]`` rows -> questions (the first row of a word wins)."""
    out: dict[str, Question] = {}
    for word, *answers in rows:
        if word not in out:
            out[word] = Question(f"{prefix}-{word}", ask(word), answers[0], tuple(answers))
    return tuple(out.values())


def _parse_cities() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for city, *answers in word_lists()["cities"]:
        if city not in out:
            slug = city.replace(" ", "-")
            out[city] = Question(f"city-{slug}", _city_question(city), answers[0], tuple(answers))
    return tuple(out.values())


def _country_name(slug: str) -> str:
    """'bosnia_and_herzegovina' -> 'Bosnia and Herzegovina' (small words stay lower case)."""
    small = {"and", "of", "the"}
    return " ".join(w if w in small else w.title() for w in slug.split("_"))


def _continent_question(country: str) -> str:
    return f"On which continent is the country {_country_name(country)}? Answer with just the continent name."


def _parse_continents() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for row in word_lists()["continents"]:
        answers = row["answers"]
        for c in row["countries"]:
            out[c] = Question(
                f"cont-{c.replace('_', '-')}", _continent_question(c), answers[0], tuple(answers)
            )
    return tuple(out.values())


_WITH_THE = frozenset(word_lists()["countries_with_the"])  # slugs asked as "the ..."


def _capital_question(country: str) -> str:
    name = ("the " if country in _WITH_THE else "") + _country_name(country)
    return f"What is the capital city of {name}? Answer with just the city name."


def _parse_capitals() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for country, *answers in word_lists()["capitals"]:
        slug = country.replace(" ", "_")
        out[slug] = Question(
            f"cap-{slug.replace('_', '-')}", _capital_question(slug), answers[0], tuple(answers)
        )
    return tuple(out.values())


def _language_question(country: str) -> str:
    name = ("the " if country in _WITH_THE else "") + _country_name(country)
    return f"What is the main language spoken in {name}? Answer with just the language name."


# a language named in its own tongue counts as that language
_ENDONYMS = {"french": "français", "spanish": "español", "portuguese": "português", "italian": "italiano"}


def _parse_languages() -> tuple[Question, ...]:
    out: dict[str, Question] = {}
    for country, *answers in word_lists()["languages"]:
        answers += [_ENDONYMS[a] for a in answers if a in _ENDONYMS]
        slug = country.replace(" ", "_")
        out[slug] = Question(
            f"lang-{slug.replace('_', '-')}", _language_question(slug), answers[0], tuple(answers)
        )
    return tuple(out.values())


FAMILIES: dict[str, Family] = {
    "antonyms": Family(
        name="antonyms",
        questions=_parse_words(word_lists()["antonyms"], "ant", _antonym_question),
        shots=(
            (_antonym_question("cold"), "hot"),
            (_antonym_question("tiny"), "huge"),
            (_antonym_question("mean"), "nice"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
    "countries": Family(
        name="countries",
        questions=_parse_cities(),
        shots=(
            (_city_question("nagoya"), "Japan"),
            (_city_question("graz"), "Austria"),
            (_city_question("recife"), "Brazil"),
        ),
        canonical=_canon_phrase,
        max_new_tokens=8,
    ),
    "continents": Family(
        name="continents",
        questions=_parse_continents(),
        shots=(
            (_continent_question("japan"), "Asia"),
            (_continent_question("peru"), "South America"),
            (_continent_question("ghana"), "Africa"),
        ),
        canonical=_canon_phrase,
        max_new_tokens=8,
    ),
    "capitals": Family(
        name="capitals",
        questions=_parse_capitals(),
        shots=(
            (_capital_question("italy"), "Rome"),
            (_capital_question("kenya"), "Nairobi"),
            (_capital_question("peru"), "Lima"),
        ),
        canonical=_canon_phrase,
        max_new_tokens=8,
    ),
    "languages": Family(
        name="languages",
        questions=_parse_languages(),
        shots=(
            (_language_question("germany"), "German"),
            (_language_question("japan"), "Japanese"),
            (_language_question("peru"), "Spanish"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
    "plurals": Family(
        name="plurals",
        questions=_parse_words(word_lists()["plurals"], "plur", _plural_question),
        shots=(
            (_plural_question("car"), "cars"),
            (_plural_question("man"), "men"),
            (_plural_question("story"), "stories"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
    "comparatives": Family(
        name="comparatives",
        questions=_parse_words(word_lists()["comparatives"], "comp", _comparative_question),
        shots=(
            (_comparative_question("slow"), "slower"),
            (_comparative_question("funny"), "funnier"),
            (_comparative_question("many"), "more"),
        ),
        canonical=_canon_word,
        max_new_tokens=6,
    ),
}


def family(name: str) -> Family:
    from ...core.errors import OrchestraceError

    if name not in FAMILIES:
        raise OrchestraceError("OT613", f"unknown task family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
