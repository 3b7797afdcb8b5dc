"""EmbodiedScan / MMScan challenge ``.pkl`` -> MMScan's binary ``.npz`` form.

EmbodiedScan's grounding metric with ``format_only=True``
(``embodiedscan/eval/metrics/grounding_metric.py``) dumps ``test_results.json``,
a list in the test annotations' order of ``{"bboxes_3d": (N, 9), "scores_3d": (N,)}``;
its packager (``tools/submit_results.py``) wraps that list as
``{"method", "team", "authors", "e-mail", "institution", "country", "results": [...]}``
and ``mmengine.dump``s it to ``submission.pkl`` (a pickle). Accepted here:
that dict, the bare list, ``results`` keyed by sample id, and the MMScan
devkit's evaluator input (items with ``pred_bboxes``, ``pred_scores`` of
shape (N,) or (N, 1)). Items carry no sample id, so a list is matched by
position to ``--sample-ids`` (a JSON list or one id a line, in the order the
model's test set was read), or else to the split manifest's ``sample_ids``.
A ``.json`` input is read as JSON; a ``.pkl`` only after a warning.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.convert.common import ConvertError, as_array, read_json, warn_pickle

FORM = "embodiedscan-pkl"
SUFFIXES = (".pkl",)
BOX_KEYS = ("bboxes_3d", "pred_bboxes")
SCORE_KEYS = ("scores_3d", "pred_scores", "target_scores_3d")
ID_KEYS = ("sample_id", "ID")


def load(path: Path) -> Any:
    if path.suffix.lower() == ".json":
        return read_json(path)
    warn_pickle(path)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 -- the researcher's own file, on their machine (see the warning)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError) as exc:
        raise ConvertError(f"{path.name}: Expected a pickle written by mmengine.dump, but unpickling failed: "
                           f"{exc}") from None


def _sample_ids(path: Path | None, manifest: dict[str, Any] | None) -> list[str] | None:
    if path is not None:
        text = Path(path).read_text(encoding="utf-8-sig")
        ids = read_json(path) if text.lstrip().startswith("[") else [line.strip() for line in text.splitlines()
                                                                      if line.strip()]
        if not all(isinstance(s, str) for s in ids):
            raise ConvertError(f"{Path(path).name}: Expected a list of sample id strings")
        return list(ids)
    return None if manifest is None else list(manifest["sample_ids"])


def _first(item: dict[str, Any], keys: tuple[str, ...], file: str, where: str) -> Any:
    for key in keys:
        if key in item:
            return item[key]
    raise ConvertError(f"{file}: {where}: Expected a key {' or '.join(f'`{k}`' for k in keys)}, but got keys "
                       f"{', '.join(map(str, item)) or 'none'}")


def arrays_of(data: Any, file: str, ids: list[str] | None) -> dict[str, np.ndarray]:
    """The binary form's arrays (sample_id, offsets, pred_bboxes, pred_scores) of the loaded content."""
    results = data["results"] if isinstance(data, dict) and "results" in data else data
    if isinstance(results, dict):
        pairs = [(str(k), v) for k, v in results.items()]
    elif isinstance(results, (list, tuple)):
        own = [next((it[k] for k in ID_KEYS if isinstance(it, dict) and k in it), None) for it in results]
        if all(isinstance(s, str) for s in own):
            pairs = [(str(s), it) for s, it in zip(own, results)]
        elif ids is None:
            raise ConvertError(f"{file}: Expected sample ids for a list of {len(results):,} results (they carry "
                               "none): give --sample-ids or the split's --manifest")
        elif len(ids) != len(results):
            raise ConvertError(f"{file}: Expected one result per sample id ({len(ids):,}, in order), but got "
                               f"{len(results):,} results")
        else:
            pairs = list(zip(ids, results))
    else:
        raise ConvertError(f"{file}: Expected the packager's dict with `results`, or a list of results, but got "
                           f"{type(results).__name__}")
    boxes, scores, counts = [], [], [0]
    for n, (sid, item) in enumerate(pairs, start=1):
        where = f"result {n} ({sid})"
        if not isinstance(item, dict):
            raise ConvertError(f"{file}: {where}: Expected a dict of boxes and scores, but got {type(item).__name__}")
        b = as_array(_first(item, BOX_KEYS, file, where), file, f"{where}: boxes").astype(np.float64)
        s = as_array(_first(item, SCORE_KEYS, file, where), file, f"{where}: scores").astype(np.float64)
        b = b.reshape(0, 9) if b.size == 0 else b
        s = s.reshape(-1) if s.ndim == 2 and s.shape[1:] == (1,) else s
        if b.ndim != 2 or b.shape[1] != 9 or s.shape != (b.shape[0],):
            raise ConvertError(f"{file}: {where}: Expected boxes (N, 9) and scores (N,), but got {b.shape} and "
                               f"{s.shape}")
        boxes.append(b)
        scores.append(s)
        counts.append(len(s))
    return {"sample_id": np.array([sid for sid, _ in pairs], dtype=str),
            "offsets": np.cumsum(counts, dtype=np.int64),
            "pred_bboxes": np.concatenate(boxes) if boxes else np.zeros((0, 9)),
            "pred_scores": np.concatenate(scores) if scores else np.zeros(0)}


def convert(source: Path, dest: Path, manifest: dict[str, Any] | None, *, sample_ids: Path | None = None,
            **_: Any) -> str:
    source = Path(source)
    arrays = arrays_of(load(source), source.name, _sample_ids(sample_ids, manifest))
    with open(dest, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    return (f"{len(arrays['sample_id']):,} prompts, {len(arrays['pred_scores']):,} boxes -> {dest} "
            "(MMScan binary .npz)")
