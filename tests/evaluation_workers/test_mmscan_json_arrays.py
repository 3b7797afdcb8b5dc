"""MMScan JSON predictions read straight into arrays (``json_arrays``) equal the general reader's, bit for bit.

Files of the usual shape take the array path; every other file is handed to
the general reader (``json_form.read_values``), which accepts, refuses and
words it as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation_workers.errors import PredictionFormatError
from evaluation_workers.limits import Budget
from evaluation_workers.synthetic.mmscan_vg import make_data
from evaluation_workers.tracks.mmscan_vg import json_arrays, json_form

BOX = [0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
B = json.dumps(BOX)
IDS = ["a", "b", "scène", "场景"]
KNOWN = {sid: i for i, sid in enumerate(IDS)}


def _general(text: str, known: dict[str, int] = KNOWN) -> json_form.Predictions:
    """The general reader alone: the standard parser's values, checked one by one."""
    raw = json.loads(text)
    return json_form.read_values(raw, "true" in text or "false" in text, known, "pred.json")


def _load(tmp_path: Path, text: str | bytes, known: dict[str, int] = KNOWN) -> json_form.Predictions:
    path = tmp_path / "pred.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return json_form.load(path, known, Budget(1 << 30, "pred.json"))


def _same(a: json_form.Predictions, b: json_form.Predictions) -> None:
    for name in ("sample", "boxes", "scores"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name  # bit for bit: -0.0 and the last bit of every double
    assert (a.missing, a.entries, a.warnings) == (b.missing, b.entries, b.warnings)


def test_the_synthetic_devkit_file_takes_the_array_path_and_equals_the_general_reader(tmp_path: Path) -> None:
    labels, preds = make_data(300, seed=3, empty_fraction=0.1, tilted_fraction=0.5)
    known = {x["sample_id"]: i for i, x in enumerate(labels)}
    text = json.dumps(preds)
    flat = json_arrays.read(text.encode())
    assert flat is not None and flat.boxes.shape == (sum(len(p["pred_scores"]) for p in preds), 9)
    _same(_load(tmp_path, text, known), _general(text, known))


# Decimal texts as a researcher's code may print them: up to 25 significant digits, any exponent, signs.
DIGITS = st.text("0123456789", min_size=1, max_size=25)
DECIMALS = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole.lstrip('0') or '0'}{'.' + frac if frac else ''}{exp}",
    st.sampled_from(["", "-"]), DIGITS, st.one_of(st.just(""), DIGITS),
    st.one_of(st.just(""), st.integers(-330, 310).map(lambda e: f"e{e}"), st.integers(-30, 30).map(lambda e: f"E{e:+d}")),
)
NUMBERS = st.one_of(
    DECIMALS,
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(2**63), 2**64 - 1).map(str),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(NUMBERS, min_size=10, max_size=10), min_size=0, max_size=6), st.booleans())
def test_every_decimal_becomes_the_nearest_double_as_the_standard_parser_reads_it(
        rows: list[list[str]], column: bool) -> None:
    boxes = ", ".join("[" + ", ".join(r[:9]) + "]" for r in rows)
    scores = ", ".join(f"[{r[9]}]" if column else r[9] for r in rows)
    text = f'[{{"sample_id": "a", "pred_bboxes": [{boxes}], "pred_scores": [{scores}]}}]'
    flat = json_arrays.read(text.encode())
    # Integers beyond 64 bits (simdjson keeps integers as integers) and decimals beyond the doubles go to
    # the general reader, which refuses the latter as not finite.
    beyond = any((not set(v) & set(".eE") and not -(2**63) <= int(v) < 2**64) or not np.isfinite(float(v))
                 for r in rows for v in r)
    assert (flat is None) == beyond
    if flat is None:
        return
    # As the standard parser reads them: "-0" is the integer 0, so +0.0; "-0.0" is -0.0.
    want_boxes = np.array([[float(json.loads(v)) for v in r[:9]] for r in rows], dtype=np.float64).reshape(-1, 9)
    want_scores = np.array([float(json.loads(r[9])) for r in rows], dtype=np.float64)
    assert flat.boxes.tobytes() == want_boxes.tobytes()
    assert flat.scores.tobytes() == want_scores.tobytes()


def test_legitimate_variants_take_the_array_path_with_the_same_result(tmp_path: Path) -> None:
    """(N, 1) scores, scalar extra keys (warned once), escaped and non-ASCII ids, empty lists, spacing."""
    items = [
        {"sample_id": "a", "pred_bboxes": [BOX, [1, 2, 3, 4, 5, 6, -0.0, 1e-320, 2**63]], "pred_scores": [[0.5], [1]]},
        {"sample_id": "sc\u00e8ne", "scan_id": "scene0000_00", "text": "the chair", "rank": 3, "ok": True,
         "none": None, "pred_bboxes": [], "pred_scores": []},
        {"pred_scores": [0.25], "pred_bboxes": [BOX], "sample_id": "\u573a\u666f"},
    ]
    for text in (json.dumps(items), json.dumps(items, indent=3), json.dumps(items, ensure_ascii=False)):
        flat = json_arrays.read(text.encode())
        assert flat is not None
        (tmp_path / "as_file.json").write_text(text, encoding="utf-8")
        from_file = json_arrays.read_file(tmp_path / "as_file.json")  # what json_form.load reads a plain file with
        assert from_file is not None and from_file.ids == flat.ids and from_file.unknown == flat.unknown
        assert from_file.boxes.tobytes() == flat.boxes.tobytes() and from_file.scores.tobytes() == flat.scores.tobytes()
        got = _load(tmp_path, text)
        _same(got, _general(text))
        assert got.warnings == ["pred.json: ignored unknown keys in 1 items: none, ok, rank, scan_id, text"]
        assert got.missing == ["b"]


# Files the array path hands over: the general reader's result or message, as before.
HANDED_OVER = [
    ("rows of 8 and 10 numbers (18 in all)", '[{"sample_id": "a", "pred_bboxes": [[0,0,0,1,1,1,0,0], '
     '[0,0,0,1,1,1,0,0,0,0]], "pred_scores": [0.5, 0.5]}]', r"Expected each box to be a list of 9 numbers"),
    ("a list inside a row of 9 elements", '[{"sample_id": "a", "pred_bboxes": [[0,0,0,1,1,1,0,[],[0,0]]], '
     '"pred_scores": [0.5]}]', r"Expected numbers, but got \[\]"),
    ("a list inside the scores", '[{"sample_id": "a", "pred_bboxes": [' + B + '], "pred_scores": [[0.5, []]]}]',
     r"shape \(N,\) or \(N, 1\)"),
    ("a box as an object", '[{"sample_id": "a", "pred_bboxes": [{"a": 1}], "pred_scores": [0.5]}]',
     r"Expected each box to be a list of 9 numbers"),
    ("a string of 9 characters as a box", '[{"sample_id": "a", "pred_bboxes": ["123456789"], "pred_scores": [0.5]}]',
     r"Expected each box to be a list of 9 numbers"),
    ("a repeated key in an item", '[{"sample_id": "a", "pred_bboxes": [], "pred_scores": [], "pred_bboxes": ['
     + B + "]}]", r"one score per box, but got 0 scores for 1 box$"),
    ("more scores than boxes", '[{"sample_id": "a", "pred_bboxes": [' + B + '], "pred_scores": [' + ", ".join(["0.5"] * 14)
     + "]}]", r"one score per box, but got 14 scores for 1 box$"),
    ("true as a number", '[{"sample_id": "a", "pred_bboxes": [[0,0,0,true,1,1,0,0,0]], "pred_scores": [0.5]}]',
     r"Expected numbers, but got true"),
    ("NaN", '[{"sample_id": "a", "pred_bboxes": [[0,0,0,NaN,1,1,0,0,0]], "pred_scores": [0.5]}]',
     r"pred_bboxes: Expected finite numbers"),
    ("1e400", '[{"sample_id": "a", "pred_bboxes": [[0,0,0,1e400,1,1,0,0,0]], "pred_scores": [0.5]}]',
     r"pred_bboxes: Expected finite numbers"),
    ("an integer beyond 64 bits", '[{"sample_id": "a", "pred_bboxes": [[0,0,0,1' + "0" * 30 + ',1,1,0,0,0]], '
     '"pred_scores": [0.5]}]', None),
    ("objects nested 40 deep in another key", '[{"sample_id": "a", "x": ' + '{"x":' * 40 + "1" + "}" * 40
     + ', "pred_bboxes": [], "pred_scores": []}]', r"nested at most 32 levels"),
    ("a list in another key", '[{"sample_id": "a", "tags": [1, 2], "pred_bboxes": [], "pred_scores": []}]', None),
    ("a bracket in a string", '[{"sample_id": "a", "text": "[the] chair", "pred_bboxes": [], "pred_scores": []}]',
     None),
    ("the object form", '{"a": {"pred_bboxes": [' + B + '], "pred_scores": [0.5]}}', None),
    ("a lone surrogate in an id", '[{"sample_id": "\\ud800", "pred_bboxes": [], "pred_scores": []}]', r"unknown"),
    ("an id that is a number", '[{"sample_id": 7, "pred_bboxes": [], "pred_scores": []}]',
     r"item 1: Expected `sample_id` to be a string, but got 7"),
]


@pytest.mark.parametrize(("case", "text", "message"), HANDED_OVER, ids=[c[0] for c in HANDED_OVER])
def test_other_files_go_to_the_general_reader(tmp_path: Path, case: str, text: str, message: str | None) -> None:
    assert json_arrays.read(text.encode()) is None
    (tmp_path / "as_file.json").write_text(text)
    assert json_arrays.read_file(tmp_path / "as_file.json") is None
    if message is None:
        _same(_load(tmp_path, text), _general(text))
        return
    with pytest.raises(PredictionFormatError, match=message):
        _load(tmp_path, text)


def test_a_file_that_does_not_parse_is_worded_by_the_general_reader(tmp_path: Path) -> None:
    text = '[{"sample_id": "a", "pred_bboxes": [], "pred_scores": [],}]'
    assert json_arrays.read(text.encode()) is None
    with pytest.raises(PredictionFormatError, match=r"does not parse: a syntax error at line 1"):
        _load(tmp_path, text)
