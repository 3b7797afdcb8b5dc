"""A dump of OpenMask3D's in-memory predictions -> OpenScan's official zip or compact form.

OpenMask3D's evaluation script (``openmask3d/evaluation/run_eval_close_vocab_inst_seg.py``,
also in OpenScan's ``Evaluation/OpenMask3D``) builds, per scene,
``preds[scene_name] = {'pred_masks': (V, M), 'pred_scores': (M,), 'pred_classes': (M,)}``
and hands them straight to the evaluator without writing them. Add these
three lines after that assignment, with ``ASPECT`` the aspect whose
vocabulary the run used::

    os.makedirs(os.path.join("openscan_dump", ASPECT), exist_ok=True)
    np.savez(os.path.join("openscan_dump", ASPECT, scene_name + ".npz"), pred_masks=np.asarray(pred_masks),
             pred_scores=pred_scores, pred_classes=pred_classes)

and convert ``openscan_dump/``. ``pred_classes`` are already attribute ids
(its ``label_mapper`` maps the query index to the aspect's ``VALID_CLASS_IDS``);
ids outside the aspect (its ``other``) are kept and the scorer drops them
with a warning, as the official evaluator does. The dump is plain ``np.savez``
(no pickle) and is read with ``allow_pickle=False``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.convert.common import ConvertError, as_array, write_openscan
from evaluation_workers.tracks.openscan.labels import ASPECTS

FORM = "openmask3d"
SUFFIXES = ()


def scene_arrays(path: Path, file: str, vertices: int | None) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except ValueError as exc:  # object arrays: np.savez of something that was not an array
        raise ConvertError(f"{file}: Expected arrays of numbers saved with np.savez, but got {exc}") from None
    except (OSError, EOFError) as exc:
        raise ConvertError(f"{file}: Expected an .npz written by np.savez, but reading it failed: {exc}") from None
    score_key = "pred_scores" if "pred_scores" in arrays else "pred_score"
    missing = [k for k in ("pred_masks", score_key, "pred_classes") if k not in arrays]
    if missing:
        raise ConvertError(f"{file}: Expected keys pred_masks, pred_scores, pred_classes, but `{missing[0]}` "
                           f"is missing (got {', '.join(sorted(arrays)) or 'none'})")
    masks = as_array(arrays["pred_masks"], file, "pred_masks")
    scores = as_array(arrays[score_key], file, score_key).ravel()
    classes = as_array(arrays["pred_classes"], file, "pred_classes").ravel()
    if masks.ndim != 2 or masks.shape[1] != len(classes) or len(scores) != len(classes):
        raise ConvertError(f"{file}: Expected pred_masks (V, M), pred_scores (M,), pred_classes (M,), but got "
                           f"{masks.shape}, {scores.shape}, {classes.shape}")
    if vertices is not None and masks.shape[0] != vertices:
        raise ConvertError(f"{file}: pred_masks: Expected {vertices:,} rows (the scene's vertices), "
                           f"but got {masks.shape[0]:,}")
    out = {"pred_masks": masks, "pred_scores": scores, "pred_classes": classes}
    if "sem_pred" in arrays:
        out["sem_pred"] = as_array(arrays["sem_pred"], file, "sem_pred")
    return out


def convert(source: Path, dest: Path, manifest: dict[str, Any] | None, *, to: str = "official",
            aspect: str | None = None) -> str:
    """Convert a folder ``<aspect>/<scene_id>.npz`` (or ``<scene_id>.npz`` with ``aspect``)."""
    source = Path(source)
    if not source.is_dir():
        raise ConvertError(f"{source}: Expected the dump folder (<aspect>/<scene_id>.npz), but it is not a folder")
    files = ([(aspect, p) for p in sorted(source.glob("*.npz"))] if aspect is not None
             else [(p.parent.name, p) for p in sorted(source.glob("*/*.npz"))])
    unknown = sorted({a for a, _ in files if a not in ASPECTS})
    if unknown:
        raise ConvertError(f"{source}: Expected aspect folders ({', '.join(ASPECTS)}), but got {', '.join(unknown)}")
    if not files:
        raise ConvertError(f"{source}: Expected <aspect>/<scene_id>.npz files, but found none")
    scenes = (manifest or {}).get("scenes")

    def items() -> Iterator[tuple[str, str, dict[str, np.ndarray]]]:
        for asp, path in files:
            name = f"{path.parent.name}/{path.name}"
            if scenes is not None and path.stem not in scenes:
                raise ConvertError(f"{name}: Expected a scene id of the split, but got {path.stem}")
            yield asp, path.stem, scene_arrays(path, name, None if scenes is None else int(scenes[path.stem]))

    count = write_openscan(Path(dest), items(), to, manifest)
    return f"{count} OpenMask3D scene dumps -> {dest} ({to} form)"
