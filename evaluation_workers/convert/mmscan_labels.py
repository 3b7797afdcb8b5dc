"""MMScan's grounding annotations as the dataset ships them -> our MMScan VG labels JSON.

The maintainer runs this on their own machine: the dataset's scene infos
(``embodiedscan_infos_<split>.pkl``) are pickles, trusted there and never
unpickled on the server. Sources, as the MMScan devkit (OpenRobotLab/EmbodiedScan,
branch ``mmscan``: ``mmscan/mmscan.py``, ``mmscan/utils/data_io.py``) reads them:

- ``MMScan_samples/MMScan_VG.json``: ``{"<split>": [sample, ...]}``, each sample with
  ``ID``, ``scan_id``, ``text``, ``sub_class``, ``target_id``, ``target``,
  ``anchor_ids``, ``distractor_ids``;
- ``embodiedscan_infos_<split>.pkl``: ``{"metainfo": ..., "data_list": [scene, ...]}``, each
  scene with ``sample_idx`` (the scan id) and ``instances`` (``bbox_3d``: 9 floats,
  ``bbox_id``).

A sample's ground truth is the boxes of its ``target_id`` objects, in that
order. Samples the devkit filters out (``__check_lang_anno__``: no target, as
many target names as ids violated, or an object id not in the scan) are left
out and counted.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from evaluation_workers.convert.common import ConvertError, read_json, warn_pickle


def scene_boxes(infos: Any, file: str) -> dict[str, dict[int, list[float]]]:
    """scan id -> {object id: 9-number box} from an ``embodiedscan_infos_*.pkl``'s content."""
    if not isinstance(infos, dict) or not isinstance(infos.get("data_list"), list):
        raise ConvertError(f"{file}: Expected EmbodiedScan's infos dict with a `data_list`, but got "
                           f"{type(infos).__name__}")
    scenes: dict[str, dict[int, list[float]]] = {}
    for n, scene in enumerate(infos["data_list"], start=1):
        try:
            scenes[str(scene["sample_idx"])] = {
                int(inst["bbox_id"]): [float(x) for x in inst["bbox_3d"]] for inst in scene["instances"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise ConvertError(f"{file}: data_list[{n}]: Expected `sample_idx` and `instances` with `bbox_id` and "
                               f"`bbox_3d`, but got {exc!r}") from None
    return scenes


def labels_of(samples: Any, boxes: dict[str, dict[int, list[float]]], file: str) -> tuple[list[dict[str, Any]], int]:
    """(labels, samples left out) in the annotation file's order."""
    labels, skipped = [], 0
    for n, s in enumerate(samples, start=1):
        try:
            objects = boxes.get(str(s["scan_id"]))
            targets = [int(t) for t in s["target_id"]]
            mentioned = targets + [int(t) for t in s.get("anchor_ids", [])] + [
                int(t) for t in s.get("distractor_ids", [])]
            if objects is None or not targets or len(s.get("target", targets)) != len(targets) or any(
                    t not in objects for t in mentioned):
                skipped += 1
                continue
            labels.append({"sample_id": str(s["ID"]), "scan_id": str(s["scan_id"]), "text": str(s["text"]),
                           "sub_class": str(s["sub_class"]), "gt_bboxes": [objects[t] for t in targets]})
        except (KeyError, TypeError, ValueError) as exc:
            raise ConvertError(f"{file}: sample {n}: Expected `ID`, `scan_id`, `text`, `sub_class` and "
                               f"`target_id`, but got {exc!r}") from None
    return labels, skipped


def convert_labels(annotations: Path, infos: Path, dest: Path, split: str) -> str:
    data = read_json(annotations)
    samples = data.get(split) if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise ConvertError(f"{annotations.name}: Expected a list of samples under {split!r}, but got keys "
                           f"{', '.join(data) if isinstance(data, dict) else type(data).__name__}")
    warn_pickle(infos)
    with open(infos, "rb") as f:
        content = pickle.load(f)  # noqa: S301 -- the dataset's own file, on the maintainer's machine
    labels, skipped = labels_of(samples, scene_boxes(content, infos.name), annotations.name)
    Path(dest).write_text(json.dumps(labels))
    return (f"{len(labels):,} {split} samples -> {dest}" +
            (f"; {skipped:,} left out as the devkit filters them" if skipped else ""))
