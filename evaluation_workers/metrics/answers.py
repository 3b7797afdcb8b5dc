"""SQA3D answer matching: LEO's answer cleaning, EM / EM_R, and question types.

The rules are METRICS.md's "SQA3D" section. The cleaning reproduces LEO's
``clean_answer`` (embodied-generalist ``data/data_utils.py``) step for step, in
its order, so that the cleaned strings are the ones LEO compares; the tests
check this against outputs of the official function. Three of LEO's steps can
never change anything and are left out, each for a reason given below.

The work is per string (no arrays): a test split has a few thousand short
answers, so precompiled patterns and a cache of cleaned strings keep a whole
split well under a second.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

QUESTION_TYPES = ("What", "Is", "How", "Can", "Which", "Others")
"""Breakdown groups, in display order; "Others" takes every other first word."""

_FIRST_WORD_TYPES = {"what": "What", "is": "Is", "how": "How", "can": "Can", "which": "Which"}


def question_type(question: str) -> str:
    """The SQA3D question type of ``question``, from its first word.

    SQA3D's rule (``MCAN/load_data.py``): lower-case; delete ',', '.' and '?';
    put a space before "'s" so that "what's" begins with "what"; the first
    whitespace-separated word decides. A question with no word is "Others".
    """
    text = question.lower().replace(",", "").replace(".", "").replace("?", "").replace("'s", " 's")
    words = text.split(maxsplit=1)
    return _FIRST_WORD_TYPES.get(words[0], "Others") if words else "Others"


# LEO's steps, in LEO's order. Patterns act on str, so `\s` is Unicode whitespace
# and `$` also matches just before a final "\n" (LEO's trailing-space strip
# therefore removes "a  \n"'s spaces); both quirks are kept on purpose.
_TRAILING_SPACES = re.compile(r"[ ]+$")
_LEADING_SPACES = re.compile(r"^[ ]+")
_SPACE_RUNS = re.compile(r" {2,}")
# LEO next turns ". " followed by more spaces into ". ": a no-op, since runs of
# spaces were collapsed just before.
_NOT_KEPT = re.compile(r"[^a-zA-Z0-9,'\s\-:]+")
# LEO next maps 'ç' to 'c' and '’' to "'": no-ops, since the line above has
# already deleted both characters.

# Whole-word replacements. LEO applies one pattern at a time; a single
# alternation is equivalent because every pattern is a whole word between word
# boundaries and no replacement is (or creates) a later pattern's word.
_TYPOS = {
    "letf": "left", "let": "left", "tehre": "there", "rigth": "right", "rght": "right",
    "behine": "behind", "tv": "TV", "chai": "chair", "wasing": "washing", "waslked": "walked",
    "oclock": "o'clock",
}
_NUMBERS = {
    "0": "zero", "none": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five",
    "6": "six", "7": "seven", "8": "eight", "9": "nine", "10": "ten", "11": "eleven", "12": "twelve",
    "13": "thirteen", "14": "fourteen", "15": "fifteen", "16": "sixteen", "17": "seventeen",
    "18": "eighteen", "19": "nineteen", "20": "twenty", "23": "twenty-three",
}


def _word_table(table: dict[str, str]) -> tuple[re.Pattern[str], dict[str, str]]:
    # Longest first so that no alternative shadows a longer one at the same place.
    words = sorted(table, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b"), table


_TYPO_WORDS, _TYPO_MAP = _word_table(_TYPOS)
_O_SPACE_CLOCK = re.compile(r"\bo'[ ]+clock\b")
_NUMBER_WORDS, _NUMBER_MAP = _word_table(_NUMBERS)
_GLUED_DIGIT = re.compile(r"\b([a-zA-Z]+)[0-9]\b")  # "no1", "mat2": drop the digit
# Articles go one after another, not as one alternation: "a the cat" must lose
# "a" first, then "the" in a later pass ("cat"); one pass would leave "the cat".
_ARTICLES = tuple(re.compile(rf"\b{article}\b ([a-zA-Z]+)") for article in ("a", "an", "the"))
_BACKWARDS = re.compile(r"\bbackwards\b")

# A cleaned answer that needs none of the steps: lower-case ASCII letters and
# single inner spaces only, with no typo, number word, article or "backwards".
_PLAIN = re.compile(r"[a-z]+(?: [a-z]+)*")
_PLAIN_STOP_WORDS = frozenset(_TYPOS) | {"none", "a", "an", "the", "backwards"}


def _clean_uncached(text: str) -> str:
    text = text.lower()
    text = _TRAILING_SPACES.sub("", text)
    text = _LEADING_SPACES.sub("", text)
    text = _SPACE_RUNS.sub(" ", text)
    text = _NOT_KEPT.sub("", text)
    text = _TYPO_WORDS.sub(lambda m: _TYPO_MAP[m.group()], text)
    text = _O_SPACE_CLOCK.sub("o'clock", text)
    text = _NUMBER_WORDS.sub(lambda m: _NUMBER_MAP[m.group()], text)
    text = _GLUED_DIGIT.sub(r"\1", text)
    for article in _ARTICLES:
        text = article.sub(r"\1", text)
    return _BACKWARDS.sub("backward", text)


# Answers repeat a lot ("yes", "left", "two"); only short ones are cached, so a
# long-lived worker cannot be made to hold large submitted strings.
_CACHED_LENGTH = 64


@functools.lru_cache(maxsize=65536)
def _clean_cached(text: str) -> str:
    if _PLAIN.fullmatch(text) and _PLAIN_STOP_WORDS.isdisjoint(text.split(" ")):
        return text
    return _clean_uncached(text)


def clean_answer(text: str) -> str:
    """The answer as LEO's ``clean_answer`` leaves it (METRICS.md, "Answer cleaning").

    In order: lower-case; strip spaces (not tabs or newlines) at both ends;
    collapse runs of spaces; delete characters other than ASCII letters,
    digits, ',', "'", whitespace, '-', ':'; fix LEO's list of typos ("tv"
    becomes "TV", as LEO does); "o' clock" -> "o'clock"; numbers 0-20 and 23 and
    "none" to words; drop a digit glued to the end of a word; drop "a", "an",
    then "the" before any word; "backwards" -> "backward".
    """
    return _clean_cached(text) if len(text) <= _CACHED_LENGTH else _clean_uncached(text)


def _squeezed(text: str) -> str:
    """``text`` without any whitespace, for EM_R's containment test."""
    return "".join(text.split())


def match_answer(pred: str, gts: Sequence[str]) -> tuple[bool, bool]:
    """EM and EM_R of one cleaned prediction against cleaned ground-truth answers.

    EM: ``pred`` equals one of ``gts``. EM_R: EM, or for some answer one of the
    two, with all whitespace removed, contains the other. A ``pred`` that is
    empty or only whitespace is wrong on both (LEO's containment would call it
    right: METRICS.md closes that loophole). Unlike LEO's loop, which returns at
    the first answer that matches only by containment, EM looks at every
    answer; the two agree whenever a question has one answer, as in SQA3D.
    """
    pred_squeezed = _squeezed(pred)
    if not pred_squeezed:
        return False, False
    if pred in gts:
        return True, True
    for gt in gts:
        gt_squeezed = _squeezed(gt)
        if pred_squeezed in gt_squeezed or gt_squeezed in pred_squeezed:
            return False, True
    return False, False
