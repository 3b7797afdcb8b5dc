"""SQA3D answer cleaning, EM / EM_R and question types, against a slow reference and LEO's outputs."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from evaluation_workers.metrics.answers import (
    QUESTION_TYPES,
    _clean_uncached,
    clean_answer,
    match_answer,
    question_type,
)

GOLDEN = json.loads((Path(__file__).parents[1] / "fixtures" / "sqa3d" / "leo_golden.json").read_text())


# The slow, obvious reference: one substitution per rule of METRICS.md, in LEO's
# order, each word on its own pass.
_REFERENCE_STEPS: list[tuple[str, str]] = [
    (r"[ ]+$", ""), (r"^[ ]+", ""), (r" {2,}", " "), (r"[^a-zA-Z0-9,'\s\-:]+", ""),
    *[(rf"\b{typo}\b", fixed) for typo, fixed in [
        ("letf", "left"), ("let", "left"), ("tehre", "there"), ("rigth", "right"), ("rght", "right"),
        ("behine", "behind"), ("tv", "TV"), ("chai", "chair"), ("wasing", "washing"),
        ("waslked", "walked"), ("oclock", "o'clock")]],
    (r"\bo'[ ]+clock\b", "o'clock"),
    (r"\b0\b", "zero"), (r"\bnone\b", "zero"),
    *[(rf"\b{n}\b", word) for n, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()) if n > 0],
    (r"\b23\b", "twenty-three"),
    (r"\b([a-zA-Z]+)([0-9])\b", r"\1"),
    (r"\ba\b ([a-zA-Z]+)", r"\1"), (r"\ban\b ([a-zA-Z]+)", r"\1"), (r"\bthe\b ([a-zA-Z]+)", r"\1"),
    (r"\bbackwards\b", "backward"),
]


def reference_clean(text: str) -> str:
    text = text.lower()
    for pattern, replacement in _REFERENCE_STEPS:
        text = re.sub(pattern, replacement, text)
    return text


def reference_match(pred: str, gts: list[str]) -> tuple[bool, bool]:
    if pred.strip() == "":
        return False, False
    em = any(pred == gt for gt in gts)
    p = re.sub(r"\s", "", pred)
    em_r = em or any(re.sub(r"\s", "", gt) in p or p in re.sub(r"\s", "", gt) for gt in gts)
    return em, em_r


_TOKENS = ["left", "LEFT", "letf", "let", "let's", "tehre", "rigth", "rght", "behine", "tv", "chai", "wasing",
           "waslked", "oclock", "o'", "clock", "none", "0", "1", "7", "12", "20", "21", "23", "1.5", "no1",
           "mat2", "ab12", "a", "an", "the", "A", "The", "backwards", "table", "coffee", "yes", "two", "é",
           "’", "ç", "\u00a0", "\t", "\n", " ", "  ", ",", ".", "?", "-", ":", "'", "_", "K"]


def _random_text(rng: random.Random) -> str:
    joiners = ["", " ", " ", "  ", "\n"]
    return "".join(rng.choice(_TOKENS) + rng.choice(joiners) for _ in range(rng.randint(0, 7)))


@pytest.mark.parametrize(("raw", "cleaned"), [
    ("Left", "left"),
    ("  left  ", "left"),
    ("left  \n", "left\n"),  # `$` also matches before a final newline, so those spaces go
    ("\tleft", "\tleft"),  # only spaces are stripped
    ("coffee    table", "coffee table"),
    ("Yes!", "yes"),
    ("café", "caf"),
    ("letf", "left"),
    ("let's", "left's"),
    ("rigth rght", "right right"),
    ("tv", "TV"),
    ("o' clock", "o'clock"),
    ("oclock", "o'clock"),
    ("2", "two"),
    ("None", "zero"),
    ("23", "twenty-three"),
    ("21", "21"),
    ("1.5", "fifteen"),  # the '.' goes first, leaving "15"
    ("no1", "no"),
    ("ab12", "ab12"),
    ("the table", "table"),
    ("there is a chair on the left", "there is chair on left"),
    ("a the cat", "cat"),
    ("a a b", "a b"),
    ("the", "the"),
    ("the 2 chairs", "two chairs"),
    ("Backwards", "backward"),
    ("?", ""),
    ("   ", ""),
])
def test_it_cleans_answers_as_worked_out_by_hand(raw: str, cleaned: str) -> None:
    assert clean_answer(raw) == cleaned
    assert reference_clean(raw) == cleaned


@pytest.mark.parametrize(("pred", "gts", "expected"), [
    ("left", ["left"], (True, True)),
    ("coffee table", ["table"], (False, True)),
    ("table", ["coffee table"], (False, True)),
    ("coffeetable", ["coffee table"], (False, True)),
    ("right", ["left"], (False, False)),
    ("", ["left"], (False, False)),  # LEO: (0, 1)
    ("\t\n", ["left"], (False, False)),  # LEO: (0, 1)
    ("table", ["coffee table", "table"], (True, True)),  # LEO: (0, 1), it stops at the first answer
])
def test_it_matches_answers_as_worked_out_by_hand(pred: str, gts: list[str],
                                                  expected: tuple[bool, bool]) -> None:
    assert match_answer(pred, gts) == expected
    assert reference_match(pred, gts) == expected


def test_it_counts_an_empty_or_whitespace_prediction_wrong_after_cleaning() -> None:
    for raw in ["", " ", "   ", "?", "...", "!!", " \t ", "\n", "é"]:
        assert match_answer(clean_answer(raw), [clean_answer("yes")]) == (False, False)


def test_it_agrees_with_the_reference_on_random_strings() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        raw = _random_text(rng)
        assert clean_answer(raw) == reference_clean(raw), raw
        assert _clean_uncached(raw) == reference_clean(raw), raw


def test_it_agrees_with_the_reference_on_random_matches() -> None:
    rng = random.Random(8)
    for _ in range(3000):
        gts = [clean_answer(_random_text(rng)) for _ in range(rng.randint(1, 3))]
        pred = clean_answer(rng.choice([_random_text(rng), rng.choice(gts) + rng.choice(["", " x", "x"])]))
        assert match_answer(pred, gts) == reference_match(pred, gts), (pred, gts)


def test_it_cleans_exactly_as_leo_does() -> None:
    for case in GOLDEN["cases"]:
        assert clean_answer(case["prediction"]) == case["leo_clean_prediction"], case
        assert [clean_answer(a) for a in case["answers"]] == case["leo_clean_answers"], case


def test_it_matches_as_leo_does_except_where_metrics_md_differs() -> None:
    deviations = {"empty prediction": 0, "exact match after a containment": 0}
    for case in GOLDEN["cases"]:
        pred, gts = case["leo_clean_prediction"], case["leo_clean_answers"]
        expected = (case["leo_em"], case["leo_em_r"])
        if not pred.split():
            expected = (False, False)
            deviations["empty prediction"] += case["leo_em_r"]
        elif pred in gts and not case["leo_em"]:
            expected = (True, True)
            deviations["exact match after a containment"] += 1
        assert match_answer(pred, gts) == expected, case
    assert all(deviations.values()), deviations  # the fixture exercises both deviations


def test_it_types_questions_as_sqa3d_does() -> None:
    for case in GOLDEN["questions"]:
        assert question_type(case["question"]) == case["official_type"], case


@pytest.mark.parametrize(("question", "kind"), [
    ("What's on the table?", "What"),
    ("what is left of me?", "What"),
    ("Whats that?", "Others"),
    ("Is the door open?", "Is"),
    ("How many chairs?", "How"),
    ("Can I sit?", "Can"),
    ("Which way?", "Which"),
    ("Are there windows?", "Others"),
    ("", "Others"),  # SQA3D's own code would crash here
    ("?", "Others"),
])
def test_it_types_questions_as_worked_out_by_hand(question: str, kind: str) -> None:
    assert question_type(question) == kind
    assert kind in QUESTION_TYPES
