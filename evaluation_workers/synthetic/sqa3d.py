"""SQA3D: a labels folder in the official layout and predictions of a chosen accuracy.

Questions follow the test split's mix of types (What, Is, How, Can, Which,
others, "what's" included) with answers of the kinds SQA3D has (objects,
colours, shapes, counts, directions, yes/no). Correct predictions are often
written the way models write them ("2", "The table.", "letf", "backwards"):
cleaning turns each back into the answer, so EM equals the accuracy asked for.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from evaluation_workers.metrics.answers import clean_answer

OBJECTS = ["table", "chair", "trash can", "coffee table", "whiteboard", "tv", "washing machine", "bed",
           "sink", "door", "window", "picture", "backpack", "towel", "cabinet", "desk", "pillow", "toilet",
           "lamp", "couch", "bookshelf", "monitor", "box", "refrigerator", "piano"]
COLORS = ["white", "black", "brown", "red", "green", "blue", "gray", "yellow"]
SHAPES = ["rectangular", "square", "round", "circular"]
COUNTS = ["zero", "one", "two", "three", "four", "five", "six"]
DIRECTIONS = ["left", "right", "forward", "backward"]
YES_NO = ["yes", "no"]
STATES = ["open", "closed", "on", "off"]
PARITY = ["even", "odd"]

# (question template, answer pool, SQA3D answer_type); {o} and {p} are objects.
TEMPLATES: dict[str, list[tuple[str, list[str], str]]] = {
    "What": [("What is on my left?", OBJECTS, "other"),
             ("What color is the {o} in front of me?", COLORS, "other"),
             ("What's the shape of the {o} to my right?", SHAPES, "other"),
             ("what's behind me?", OBJECTS, "other"),
             ("What can I sit on that is closest to me?", OBJECTS, "other")],
    "Is": [("Is the {o} on my right open?", STATES, "other"),
           ("Is the {o} to my left closer than the {p}?", YES_NO, "yes/no"),
           ("Is the number of {o}s in the room even or odd?", PARITY, "other")],
    "How": [("How many {o}s are in front of me?", COUNTS, "number"),
            ("How should I turn to face the {o}?", DIRECTIONS, "other")],
    "Can": [("Can I see the {o} without turning around?", YES_NO, "yes/no"),
            ("Can I reach the {o} with my left hand?", YES_NO, "yes/no")],
    "Which": [("Which direction should I go to wash my hands?", DIRECTIONS, "other"),
              ("Which is closer to me, the {o} or the {p}?", OBJECTS, "other")],
    "Others": [("Are there any {o}s on my right?", YES_NO, "yes/no"),
               ("If I turn around, what will be in front of me?", OBJECTS, "other"),
               ("Where is the {o}, left or right?", DIRECTIONS, "other"),
               ("Am I facing the {o}?", YES_NO, "yes/no"),
               ("Whats on top of the {o}?", OBJECTS, "other"),
               ("I want to sleep. Which way is the bed?", DIRECTIONS, "other")],
}
# The test split's mix: What 1147, Is 652, How 465, Can 338, Which 351, Others 566.
TYPE_WEIGHTS = {"What": 1147, "Is": 652, "How": 465, "Can": 338, "Which": 351, "Others": 566}
SITUATIONS = ["I am standing by the {o} on my right facing the {p}.",
              "I just sat down next to the {o} with the {p} behind me.",
              "I am washing my hands with the {o} to my left.",
              "I walked over to the {o} and the {p} is in front of me."]
_INFO = {"description": "This is v1.0 of the SQA3D dataset.", "url": "bigai.github.io/sqa3d",
         "version": "1.0", "year": 2022, "contributor": "SQA3D Team", "date_created": "2022-06-22 17:11:41"}
_LICENSE = {"url": "http://creativecommons.org/licenses/by/4.0/",
            "name": "Creative Commons Attribution 4.0 International License"}
_DIGITS = {word: str(n) for n, word in enumerate(COUNTS)}


def label_paths(folder: Path, split: str) -> tuple[Path, Path]:
    return (Path(folder) / f"v1_balanced_questions_{split}_scannetv2.json",
            Path(folder) / f"v1_balanced_sqa_annotations_{split}_scannetv2.json")


# The test split's questions come from 67 ScanNet scenes.
SCENES = 67


def write_labels(folder: Path, n_questions: int, seed: int, split: str = "test",
                 scenes: int = SCENES) -> dict[str, Path]:
    """Write ``n_questions`` questions and their answers, in the official pair of files; each
    question is asked in one of ``scenes`` scenes."""
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = sorted(rng.sample(range(10 * n_questions + 10), n_questions))
    types = rng.choices(list(TYPE_WEIGHTS), weights=list(TYPE_WEIGHTS.values()), k=n_questions)
    questions, annotations = [], []
    for offset, kind in zip(ids, types):
        qid = 220602000000 + offset
        scene = f"scene{rng.randrange(scenes):04d}_00"
        o, p = rng.sample(OBJECTS, 2)
        template, pool, answer_type = rng.choice(TEMPLATES[kind])
        situation = rng.choice(SITUATIONS).format(o=o, p=p)
        questions.append({"scene_id": scene, "situation": situation,
                          "alternative_situation": [rng.choice(SITUATIONS).format(o=p, p=o)],
                          "question": template.format(o=o, p=p), "question_id": qid})
        answer = rng.choice([o, p]) if "{p}" in template and pool is OBJECTS else rng.choice(pool)
        annotations.append({"scene_id": scene, "question_type": "N/A", "answer_type": answer_type,
                            "question_id": qid,
                            "answers": [{"answer": answer, "answer_confidence": "yes", "answer_id": 1}],
                            "rotation": {"_x": 0, "_y": 0, "_z": round(rng.uniform(-1, 1), 6), "_w": 0.5},
                            "position": {"x": round(rng.uniform(-3, 3), 6), "y": round(rng.uniform(-3, 3), 6),
                                         "z": 0}})
    header = {"info": _INFO, "license": _LICENSE, "data_type": "scannet", "data_subtype": "v2"}
    q_path, a_path = label_paths(folder, split)
    q_path.write_text(json.dumps({**header, "task_type": "Situated question answering",
                                  "questions": questions}))
    a_path.write_text(json.dumps({**header, "annotations": annotations}))
    return {"questions": q_path, "annotations": a_path}


def _as_a_model_writes(answer: str, rng: random.Random) -> str:
    """``answer`` written in one of the ways cleaning undoes, or as is."""
    variants = [answer, answer.capitalize(), answer.upper() + ".", f"the {answer}", f"A {answer}",
                f"  {answer}?", answer.replace(" ", "  "), _DIGITS.get(answer, answer),
                {"left": "letf", "right": "rigth", "backward": "backwards", "zero": "none",
                 "tv": "TV"}.get(answer, answer)]
    written = rng.choice(variants)
    return written if clean_answer(written) == clean_answer(answer) else answer


def _wrong_answer(answer: str, pool: list[str], rng: random.Random) -> str:
    others = [a for a in pool if clean_answer(a) != clean_answer(answer)]
    return rng.choice(others)


def _pool_of(answer: str) -> list[str]:
    for pool in (OBJECTS, COLORS, SHAPES, COUNTS, DIRECTIONS, YES_NO, STATES, PARITY):
        if answer in pool:
            return pool
    return OBJECTS


def write_predictions(labels_folder: Path, path: Path, accuracy: float, seed: int, *,
                      missing: float = 0.0, form: str | None = None) -> Path:
    """Write predictions for the labels in ``labels_folder``; EM on answered questions is ``accuracy``.

    Exactly ``round(accuracy * answered)`` answers are right (after cleaning).
    ``missing`` is the fraction of questions left out. ``form`` is "list",
    "object" or "jsonl" (default: "jsonl" for a .jsonl path, else "list").
    """
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"Expected accuracy in [0, 1], but got {accuracy}")
    rng = random.Random(seed)
    path = Path(path)
    form = form or ("jsonl" if path.suffix == ".jsonl" else "list")
    a_path = next(Path(labels_folder).glob("v1_balanced_sqa_annotations_*_scannetv2.json"))
    annotations = json.loads(a_path.read_text())["annotations"]
    kept = [a for a in annotations if rng.random() >= missing]
    right = set(rng.sample(range(len(kept)), round(accuracy * len(kept))))
    records = []
    for i, ann in enumerate(kept):
        truth = ann["answers"][0]["answer"]
        answer = (_as_a_model_writes(truth, rng) if i in right
                  else _wrong_answer(truth, _pool_of(truth), rng))
        records.append({"question_id": ann["question_id"], "answer": answer})
    rng.shuffle(records)
    path.parent.mkdir(parents=True, exist_ok=True)
    if form == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    elif form == "object":
        path.write_text(json.dumps({str(r["question_id"]): r["answer"] for r in records}))
    elif form == "list":
        path.write_text(json.dumps(records))
    else:
        raise ValueError(f"Expected form to be list, object or jsonl, but got {form!r}")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/labels/ and OUT/predictions.json")
    parser.add_argument("--questions", type=int, default=3519, help="number of questions (test split: 3519)")
    parser.add_argument("--accuracy", type=float, default=0.5, help="EM of the predictions, 0..1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", default="test", help="split name in the label file names")
    parser.add_argument("--missing", type=float, default=0.0, help="fraction of questions left unanswered")
    parser.add_argument("--format", choices=("list", "object", "jsonl"), default="list")


def generate(args: argparse.Namespace) -> dict[str, Any]:
    """Write labels and one predictions file under ``args.out``; return the paths."""
    out = Path(args.out)
    form = getattr(args, "format", "list")
    labels = out / "labels"
    write_labels(labels, args.questions, args.seed, getattr(args, "split", "test"))
    name = "predictions.jsonl" if form == "jsonl" else "predictions.json"
    predictions = write_predictions(labels, out / name, args.accuracy, args.seed + 1,
                                    missing=getattr(args, "missing", 0.0), form=form)
    return {"labels": labels, "predictions": predictions}


def write_demo(folder: Path, split: str) -> tuple[Path, Path]:
    """Small labels and a predictions file for the demo site (``manage.py load_demo``)."""
    written = generate(argparse.Namespace(out=Path(folder), questions=600, accuracy=0.47, seed=7, split=split))
    return written["labels"], written["predictions"]
