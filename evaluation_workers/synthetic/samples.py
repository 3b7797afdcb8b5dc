"""Small downloadable samples of every accepted form, built from a split's public manifest.

Each built-in track lists its own as ``Track.samples`` (``samples_of``); the format pages offer them (``/benchmarks/<track>/format/``): each uses ids and
sizes of the split (scene ids and vertex counts, sample ids, question ids),
so it passes ``validate`` against that split's manifest, and shows the exact
layout a real file has. The content is arbitrary (it scores near zero).
"""

from __future__ import annotations

import gzip
import io
import json
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.tracks.base import Sample

# track -> form -> (file name, one line that says what it is)
FORMS: dict[str, dict[str, tuple[str, str]]] = {
    "openscan": {
        "official": ("sample_official.zip", "official layout: <aspect>/<scene_id>.npz with pred_masks, pred_scores, "
                                            "pred_classes"),
        "text": ("sample_text.zip", "ScanNet's text layout: <aspect>/<scene_id>.txt and one mask file per line"),
        "compact": ("sample_compact.npz", "compact .npz (openscan-compact/1): masks as runs, stored once per scene"),
    },
    "mmscan-vg": {
        "json": ("sample.json", "JSON list of {sample_id, pred_bboxes, pred_scores}"),
        "json.gz": ("sample.json.gz", "the same JSON, gzip-compressed"),
        "npz": ("sample.npz", "binary .npz: sample_id, offsets, pred_bboxes, pred_scores"),
    },
    "sqa3d": {
        "list": ("sample_list.json", "JSON list of {question_id, answer}"),
        "object": ("sample_object.json", "JSON object {\"<question_id>\": answer}"),
        "jsonl": ("sample.jsonl", "JSON Lines, one {question_id, answer} per line"),
    },
}
SAMPLE_ITEMS = 8  # prompts or questions in a sample


def _openscan_masks(vertices: int) -> np.ndarray:
    """(V, 3) bool: three runs of vertices, each at least 100 long when the scene allows."""
    masks = np.zeros((vertices, 3), dtype=bool)
    for m, (start, length) in enumerate([(0, vertices // 10), (vertices // 3, vertices // 20), (vertices // 2, 150)]):
        masks[start : start + max(length, 1), m] = True
    return masks


def _openscan_scene(manifest: dict[str, Any]) -> tuple[str, list[str]]:
    """The split's smallest scene and the aspects it is labelled in."""
    scene = min(manifest["scenes"], key=lambda s: (manifest["scenes"][s], s))
    return scene, [a for a, scenes in manifest["aspects"].items() if scene in scenes]


def _openscan_official(manifest: dict[str, Any]) -> bytes:
    scene, aspects = _openscan_scene(manifest)
    masks = _openscan_masks(int(manifest["scenes"][scene]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for aspect in aspects:
            k = len(manifest["vocabulary"][aspect])
            buf = io.BytesIO()
            np.savez_compressed(buf, pred_masks=masks, pred_scores=np.array([0.9, 0.5, 0.3]),
                                pred_classes=(np.arange(3) % k) + 1)
            zf.writestr(f"{aspect}/{scene}.npz", buf.getvalue())
    return out.getvalue()


def _openscan_text(manifest: dict[str, Any]) -> bytes:
    scene, aspects = _openscan_scene(manifest)
    masks = _openscan_masks(int(manifest["scenes"][scene]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for aspect in aspects:
            k = len(manifest["vocabulary"][aspect])
            lines = []
            for m in range(masks.shape[1]):
                name = f"pred_mask/{scene}_{m}.txt"
                zf.writestr(f"{aspect}/{name}", "\n".join("1" if v else "0" for v in masks[:, m]) + "\n")
                lines.append(f"{name} {m % k + 1} {[0.9, 0.5, 0.3][m]}")
            zf.writestr(f"{aspect}/{scene}.txt", "\n".join(lines) + "\n")
    return out.getvalue()


def _openscan_compact(manifest: dict[str, Any]) -> bytes:
    from evaluation_workers.convert.openscan_compact import convert

    with tempfile.TemporaryDirectory() as tmp:
        official = Path(tmp) / "official.zip"
        official.write_bytes(_openscan_official(manifest))
        arrays = convert(official, manifest)
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def _mmscan_items(manifest: dict[str, Any]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    items = []
    for sid in manifest["sample_ids"][:SAMPLE_ITEMS]:
        n = 3
        boxes = np.column_stack([rng.uniform(0, 6, (n, 3)), rng.uniform(0.2, 2.0, (n, 3)),
                                 rng.uniform(-np.pi, np.pi, (n, 1)), np.zeros((n, 2))])
        items.append((str(sid), boxes.round(4), np.sort(rng.uniform(0, 1, n).round(4))[::-1]))
    return items


def _mmscan_json(manifest: dict[str, Any]) -> bytes:
    return json.dumps([{"sample_id": sid, "pred_bboxes": b.tolist(), "pred_scores": s.tolist()}
                       for sid, b, s in _mmscan_items(manifest)], indent=1).encode()


def _mmscan_npz(manifest: dict[str, Any]) -> bytes:
    items = _mmscan_items(manifest)
    out = io.BytesIO()
    np.savez(out, sample_id=np.array([sid for sid, _, _ in items]),
             offsets=np.cumsum([0] + [len(s) for _, _, s in items], dtype=np.int64),
             pred_bboxes=np.concatenate([b for _, b, _ in items]).astype(np.float32),
             pred_scores=np.concatenate([s for _, _, s in items]).astype(np.float32))
    return out.getvalue()


def _sqa3d_answers(manifest: dict[str, Any]) -> list[tuple[int, str]]:
    pool = ["left", "right", "yes", "no", "two", "chair", "table", "behind"]
    return [(int(q), pool[i % len(pool)]) for i, q in enumerate(manifest["question_ids"][:SAMPLE_ITEMS])]


BUILDERS: dict[tuple[str, str], Callable[[dict[str, Any]], bytes]] = {
    ("openscan", "official"): _openscan_official,
    ("openscan", "text"): _openscan_text,
    ("openscan", "compact"): _openscan_compact,
    ("mmscan-vg", "json"): _mmscan_json,
    ("mmscan-vg", "json.gz"): lambda m: gzip.compress(_mmscan_json(m), mtime=0),
    ("mmscan-vg", "npz"): _mmscan_npz,
    ("sqa3d", "list"): lambda m: json.dumps([{"question_id": q, "answer": a} for q, a in _sqa3d_answers(m)],
                                            indent=1).encode(),
    ("sqa3d", "object"): lambda m: json.dumps({str(q): a for q, a in _sqa3d_answers(m)}, indent=1).encode(),
    ("sqa3d", "jsonl"): lambda m: "".join(json.dumps({"question_id": q, "answer": a}) + "\n"
                                          for q, a in _sqa3d_answers(m)).encode(),
}


def samples_of(track: str) -> dict[str, Sample]:
    """The ``Track.samples`` of a built-in track."""
    return {form: Sample(name, text, BUILDERS[(track, form)]) for form, (name, text) in FORMS[track].items()}
