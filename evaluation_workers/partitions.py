"""A split's public subset: scoring one submission on the public scenes and on the private rest.

The subset is part of the hidden labels: ``partition.txt`` in the prepared
labels folder (one public scene id per line; ``#`` starts a comment), written
by ``manage.py load_labels --partition`` and read by workers only. A
partition is drawn by scene (METRICS.md, "Uncertainty"): a scene is wholly
public or wholly private, so that each part can be resampled by its own
scenes. Scene ids are those of the public manifest's ``scenes`` (SQA3D's
``scene_id``, MMScan's ``scan_id``, OpenScan's scene files). A partition file
written before partitions were by scene lists unit ids (question ids, sample
ids): it is still read where its units make whole scenes, and refused where
it splits one.

The filter lives here, not in the tracks: a track's ``score`` already hands
its bootstrap statistic to ``bootstrap.intervals`` (it recomputes every metric
exactly from per-unit weights), and names its units and their scenes there. A
partition is a resample with weight 1 on its scenes' units and 0 elsewhere,
so its exact metrics are the statistic of that one row, and its intervals
come from resampling its scenes only. Partition results keep the track's
metrics and the metrics of each group; they drop counts and details
(per-class values), so that no number tells the sizes of the subsets' label
distribution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers._xp import to_device, to_numpy
from evaluation_workers.errors import LabelsError
from evaluation_workers.metrics import bootstrap
from evaluation_workers.results import clean_number, interval_notes

PARTITION_FILE = "partition.txt"
PUBLIC, PRIVATE = "public", "private"
# Where each track's public manifest lists its scenes.
MANIFEST_SCENES = "scenes"


@dataclass(frozen=True)
class Partition:
    public: frozenset[str]


def parse(text: str) -> frozenset[str]:
    return frozenset(line.split("#", 1)[0].strip() for line in text.splitlines()) - {""}


def read_partition(labels: Path) -> Partition | None:
    """The partition of a prepared labels folder, or None when it has none."""
    path = Path(labels) / PARTITION_FILE
    if not Path(labels).is_dir() or not path.is_file():
        return None
    return Partition(public=parse(path.read_text(encoding="utf-8")))


def manifest_scenes(track: str, manifest: Mapping[str, Any]) -> list[str]:
    """The scene ids of a public manifest (each as text)."""
    scenes = manifest.get(MANIFEST_SCENES)
    if not isinstance(scenes, (list, dict)):
        raise LabelsError(f"Expected the {track} manifest to list its `scenes` (labels loaded before partitions "
                          "were by scene: load them again), but it has none")
    return [str(s) for s in scenes]


def check_partition(track: str, manifest: Mapping[str, Any], public: Iterable[str]) -> frozenset[str]:
    """The public scene ids, checked against the labels' scenes: all known, and scenes left on both sides."""
    public = frozenset(public)
    scenes = set(manifest_scenes(track, manifest))
    unknown = sorted(public - scenes)
    if unknown:
        raise LabelsError(f"Expected the partition's ids to be scene ids of the labels (a partition is drawn by "
                          f"scene), but {len(unknown)} are not (first: {unknown[0]!r})")
    if not public or public >= scenes:
        raise LabelsError(f"Expected the public subset to hold some of the {len(scenes)} scenes and not all, "
                          f"but it holds {len(public & scenes)}")
    return public


def _values(units: bootstrap.Units, weights: np.ndarray) -> dict[str, float | None]:
    out = units.statistic(to_device(weights[None, :], units.xp))
    return {key: clean_number(np.asarray(to_numpy(v), dtype=np.float64)[0]) for key, v in out.items()}


def partition_result(result: Mapping[str, Any], units: bootstrap.Units, scenes: np.ndarray, name: str,
                     resamples: int | None = None) -> dict[str, Any]:
    """``result`` (the track's, over every unit) recomputed on the units of the scenes where ``scenes``
    (S,) is True (``bootstrap.scene_index`` order)."""
    scene_of = units.scenes
    mask = scenes if scene_of is None else scenes[scene_of]
    values = _values(units, mask.astype(np.float64))
    missing = [k for k in result["metrics"] if k not in values]
    if missing:
        raise ValueError(f"The {result['track']} statistic does not recompute {missing}: no partition result")
    whole = interval_notes(result.get("bootstrap"))
    out = {key: value for key, value in result.items() if key not in {"intervals", "bootstrap"}}
    out["metrics"] = {k: values[k] for k in result["metrics"]}
    out["breakdown"] = {group: {m: values[f"{group}/{m}"] for m in row if f"{group}/{m}" in values}
                        for group, row in result["breakdown"].items()}
    out["details"] = {"partition": name}
    out["partition"] = name
    out["warnings"] = [w for w in result.get("warnings", []) if w not in whole]
    if "intervals" in result:
        uncertainty = bootstrap.intervals(units.statistic, len(units.ids), units.unit, resamples=resamples,
                                          xp=units.xp, width=units.width, subset=np.flatnonzero(scenes),
                                          scenes=scene_of, groups=units.groups, min_scenes=units.min_scenes)
        if uncertainty is not None:
            out["intervals"] = dict(uncertainty[0])
            out["bootstrap"] = uncertainty[1]
            out["warnings"] += interval_notes(uncertainty[1])
    return out


def public_scenes(units: bootstrap.Units, partition: Partition) -> np.ndarray:
    """(S,) bool over ``units``' scenes (``units.scene_names``' order): which are public.

    The partition names scenes; one written before that names units, which must then make whole scenes.
    """
    if units.scenes is None:  # the units are the scenes
        return np.array([u in partition.public for u in units.ids], dtype=bool)
    names, index = units.scene_names or [], units.scenes
    public = np.array([name in partition.public for name in names], dtype=bool)
    if public.any():
        return public
    by_unit = np.array([u in partition.public for u in units.ids], dtype=bool)
    public = np.bincount(index[by_unit], minlength=len(names)) > 0
    split = np.flatnonzero(public & (np.bincount(index[~by_unit], minlength=len(names)) > 0))
    if split.size:
        raise LabelsError(f"Expected the partition to keep each scene wholly public or wholly private (the "
                          f"intervals resample scenes), but {split.size} scenes are split between them (first: "
                          f"{names[int(split[0])]!r}); load the labels again with a partition of scene ids")
    return public


def split_result(result: Mapping[str, Any], collected: list[bootstrap.Units], partition: Partition,
                 resamples: int | None = None) -> list[dict[str, Any]]:
    """The public and the private result of one scoring, in that order."""
    if len(collected) != 1:
        raise ValueError(f"Expected the {result['track']} scorer to name its units once, but it did "
                         f"{len(collected)} times")
    units = collected[0]
    public = public_scenes(units, partition)
    if not public.any() or public.all():
        raise LabelsError(f"Expected the public subset to hold some of the {public.size} scored "
                          f"scenes and not all, but it holds {int(public.sum())}")
    return [partition_result(result, units, public, PUBLIC, resamples),
            partition_result(result, units, ~public, PRIVATE, resamples)]


def score(track: Any, labels: Path, predictions: Path, progress: Any,
          outcomes: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What the worker records for one scoring: the track's result, or, where the labels hold a
    partition, the public subset's result and the private remainder's (in that order).

    ``outcomes`` is handed to the track's ``score`` (its per-unit outcomes, over every unit).
    """
    partition = read_partition(labels)
    with bootstrap.collecting() as collected:
        result = track.score(labels, predictions, progress, **({} if outcomes is None else {"outcomes": outcomes}))
    return [result] if partition is None else split_result(result, collected, partition)
