"""The embedded continents, capitals, languages, plurals and comparatives banks: real SmolLM2-135M samples of our own questions.

The accuracies asserted here are recomputed from the bank files and must match the figures in
``learn/stopping/data/README.md``; majority of 40 must beat one sample (the reason the families exist).
"""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrace.learn.stopping.banks import DEFAULT_BANKS, Bank, default_bank, load_bank
from orchestrace.learn.stopping.families import FAMILIES

# name -> (questions, mean single-sample accuracy, majority-of-40 accuracy) as in the README
DOCUMENTED = {
    "continents": (177, 0.657, 0.847),
    "capitals": (188, 0.106, 0.186),
    "languages": (162, 0.45, 0.586),
    "plurals": (207, 0.605, 0.715),
    "comparatives": (142, 0.374, 0.465),
}


def _accuracies(bank: Bank) -> tuple[float, float]:
    """Mean over samples of 'this sample is the gold', and 'the majority of all 40 is the gold'
    (nulls never vote; ties go to the answer seen first, as in ``baselines.py``)."""
    single, majority = [], []
    for q in bank.questions:
        single.append(sum(s == q.gold for s in q.samples) / len(q.samples))
        votes = Counter(s for s in q.samples if s is not None)
        majority.append(bool(votes) and votes.most_common(1)[0][0] == q.gold)
    return sum(single) / len(single), sum(majority) / len(majority)


def test_default_banks_keep_order_and_add_families() -> None:
    assert DEFAULT_BANKS[:2] == ("antonyms", "countries")
    assert set(DOCUMENTED) <= set(DEFAULT_BANKS)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_embedded_bank_matches_its_family(name: str) -> None:
    bank = default_bank(name)
    fam = FAMILIES[name]
    assert len(bank) == DOCUMENTED[name][0] == len(fam.questions)
    assert all(len(q.samples) == 40 for q in bank.questions)
    ids = [q.id for q in bank.questions]
    assert len(set(ids)) == len(ids)
    # the bank was built from exactly these questions, golds and prompts, in this order
    assert [(q.id, q.question, q.gold) for q in bank.questions] == [
        (q.id, q.question, q.gold) for q in fam.questions
    ]
    # every non-null sample is already canonical: aliases were mapped to the gold spelling
    for bq, q in zip(bank.questions, fam.questions, strict=True):
        assert not set(bq.samples) & set(q.aliases[1:]) - {q.gold}
    assert load_bank(name).questions[-1].id == ids[-1]


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_majority_of_40_beats_one_sample(name: str) -> None:
    single, majority = _accuracies(default_bank(name))
    _, doc_single, doc_majority = DOCUMENTED[name]
    assert round(single, 3) == doc_single
    assert round(majority, 3) == doc_majority
    assert majority > single + 0.05


def test_continent_answers_are_canonicalised() -> None:
    fam = FAMILIES["continents"]
    by_id = {q.id: q for q in fam.questions}
    kenya, brazil, fiji = by_id["cont-kenya"], by_id["cont-brazil"], by_id["cont-fiji"]
    assert kenya.question == "On which continent is the country Kenya? Answer with just the continent name."
    assert fam.canonical("Africa.", kenya) == "africa"
    assert fam.canonical("East Africa", kenya) == "africa"
    assert fam.canonical("The continent of Asia", kenya) == "continent of asia"
    assert fam.canonical("South America\nBrazil is large", brazil) == "south america"
    assert fam.canonical("Latin America", brazil) == "south america"
    assert fam.canonical("Australia", fiji) == "oceania"
    assert fam.canonical("Asia", fiji) == "asia"
    assert fam.canonical("", fiji) is None
    assert by_id["cont-bosnia-and-herzegovina"].question.startswith(
        "On which continent is the country Bosnia and Herzegovina?"
    )
    # the example turns' countries are not asked
    assert not {"cont-japan", "cont-peru", "cont-ghana"} & set(by_id)


def test_capital_answers_are_canonicalised() -> None:
    fam = FAMILIES["capitals"]
    by_id = {q.id: q for q in fam.questions}
    us, bolivia, ukraine = by_id["cap-united-states"], by_id["cap-bolivia"], by_id["cap-ukraine"]
    assert us.question == "What is the capital city of the United States? Answer with just the city name."
    assert fam.canonical("Washington, D.C.", us) == "washington"
    assert fam.canonical("Washington DC", us) == "washington"
    assert fam.canonical("New York City", us) == "new york city"
    assert fam.canonical("La Paz", bolivia) == "sucre"
    assert fam.canonical("Sucre", bolivia) == "sucre"
    assert fam.canonical("Kiev", ukraine) == "kyiv"
    assert fam.canonical("Bogotá!", by_id["cap-colombia"]) == "bogota"
    assert fam.canonical("St. George's", by_id["cap-grenada"]) == "st george's"
    assert fam.canonical("  \n", us) is None
    assert not {"cap-italy", "cap-kenya", "cap-peru"} & set(by_id)


def test_language_answers_are_canonicalised() -> None:
    fam = FAMILIES["languages"]
    by_id = {q.id: q for q in fam.questions}
    mali, korea, china = by_id["lang-mali"], by_id["lang-south-korea"], by_id["lang-china"]
    assert (
        korea.question
        == "What is the main language spoken in South Korea? Answer with just the language name."
    )
    assert by_id["lang-united-states"].question.startswith(
        "What is the main language spoken in the United States?"
    )
    assert fam.canonical("French.", mali) == "french"
    assert fam.canonical("Français", mali) == "french"  # the language's own name counts
    assert fam.canonical("Bambara", mali) == "french"  # an accepted official language counts
    assert fam.canonical("Korean language", korea) == "korean"  # first word only
    assert fam.canonical("Mandarin", korea) == "mandarin"
    assert fam.canonical("Mandarin Chinese", china) == "chinese"
    assert fam.canonical("Español", by_id["lang-mexico"]) == "spanish"
    assert fam.canonical("", mali) is None
    assert not {"lang-germany", "lang-japan", "lang-peru"} & set(by_id)


def test_word_form_families_parse_and_canonicalise() -> None:
    plurals, comparatives = FAMILIES["plurals"], FAMILIES["comparatives"]
    by_id = {q.id: q for q in plurals.questions + comparatives.questions}
    mouse, cactus, sheep = by_id["plur-mouse"], by_id["plur-cactus"], by_id["plur-sheep"]
    assert mouse.question == 'What is the plural of the word "mouse"? Answer with just one word.'
    assert plurals.canonical("Mice.", mouse) == "mice"
    assert plurals.canonical("mouses", mouse) == "mouses"
    assert plurals.canonical("Cactuses", cactus) == "cacti"  # an accepted alternative counts as gold
    assert plurals.canonical("sheep\nThe word sheep", sheep) == "sheep"
    good, far = by_id["comp-good"], by_id["comp-far"]
    assert good.question == 'What is the comparative form of the adjective "good"? Answer with just one word.'
    assert comparatives.canonical("Better!", good) == "better"
    assert comparatives.canonical("gooder", good) == "gooder"
    assert comparatives.canonical("further", far) == "farther"
    assert comparatives.canonical("", far) is None
    # the example turns' words are not asked, and every word is asked once
    assert not {"plur-car", "plur-man", "plur-story", "comp-slow", "comp-funny", "comp-many"} & set(by_id)
    for fam in (plurals, comparatives):
        words = [q.id for q in fam.questions]
        assert len(words) == len(set(words))
