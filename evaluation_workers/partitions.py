"""A split's public subset: scoring one submission on the public units and on the private rest.

The subset is part of the hidden labels: ``partition.txt`` in the prepared
labels folder (one public unit id per line; ``#`` starts a comment), written
by ``manage.py load_labels --partition`` and read by workers only. Units are
the track's natural unit: questions (SQA3D), prompts (MMScan), scenes
(OpenScan); their ids are those of the public manifest (``manifest_units``).

The filter lives here, not in the tracks: a track's ``score`` already hands
its bootstrap statistic to ``bootstrap.intervals`` (it recomputes every metric
exactly from per-unit weights), and names its units there (``unit_ids``). A
partition is a resample with weight 1 on its units and 0 elsewhere, so its
exact metrics are the statistic of that one row, and its intervals come from
resampling its units only. Partition results keep the track's metrics and the
metrics of each group; they drop counts and details (per-class values), so
that no number tells the sizes of the subsets' label distribution.
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
from evaluation_workers.results import clean_number

PARTITION_FILE = "partition.txt"
PUBLIC, PRIVATE = "public", "private"
# Where each track's public manifest lists its units.
MANIFEST_UNITS = {"sqa3d": "question_ids", "mmscan-vg": "sample_ids", "openscan": "scenes"}


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


def manifest_units(track: str, manifest: Mapping[str, Any]) -> list[str]:
    """The unit ids of a public manifest (each as text)."""
    units = manifest.get(MANIFEST_UNITS.get(track, ""))
    if units is None:
        raise LabelsError(f"Expected a track with a public subset ({', '.join(MANIFEST_UNITS)}), but got {track!r}")
    return [str(u) for u in units]


def check_partition(track: str, manifest: Mapping[str, Any], public: Iterable[str]) -> frozenset[str]:
    """The public ids, checked against the labels' units: all known, and units left on both sides."""
    public = frozenset(public)
    units = set(manifest_units(track, manifest))
    unknown = sorted(public - units)
    if unknown:
        raise LabelsError(f"Expected the partition's ids to be {MANIFEST_UNITS[track]} of the labels, but "
                          f"{len(unknown)} are not (first: {unknown[0]!r})")
    if not public or public >= units:
        raise LabelsError(f"Expected the public subset to hold some of the {len(units)} units and not all, "
                          f"but it holds {len(public & units)}")
    return public


def _values(units: bootstrap.Units, weights: np.ndarray) -> dict[str, float | None]:
    out = units.statistic(to_device(weights[None, :], units.xp))
    return {key: clean_number(np.asarray(to_numpy(v), dtype=np.float64)[0]) for key, v in out.items()}


def partition_result(result: Mapping[str, Any], units: bootstrap.Units, mask: np.ndarray, name: str,
                     resamples: int | None = None) -> dict[str, Any]:
    """``result`` (the track's, over every unit) recomputed on the units where ``mask`` (n,) is True."""
    values = _values(units, mask.astype(np.float64))
    missing = [k for k in result["metrics"] if k not in values]
    if missing:
        raise ValueError(f"The {result['track']} statistic does not recompute {missing}: no partition result")
    out = {key: value for key, value in result.items() if key not in {"intervals", "bootstrap"}}
    out["metrics"] = {k: values[k] for k in result["metrics"]}
    out["breakdown"] = {group: {m: values[f"{group}/{m}"] for m in row if f"{group}/{m}" in values}
                        for group, row in result["breakdown"].items()}
    out["details"] = {"partition": name}
    out["partition"] = name
    if "intervals" in result:
        uncertainty = bootstrap.intervals(units.statistic, len(units.ids), units.unit, resamples=resamples,
                                          xp=units.xp, width=units.width, subset=np.flatnonzero(mask))
        if uncertainty is not None:
            out["intervals"] = {k: v for k, v in uncertainty[0].items()}
            out["bootstrap"] = uncertainty[1]
    return out


def split_result(result: Mapping[str, Any], collected: list[bootstrap.Units], partition: Partition,
                 resamples: int | None = None) -> list[dict[str, Any]]:
    """The public and the private result of one scoring, in that order."""
    if len(collected) != 1:
        raise ValueError(f"Expected the {result['track']} scorer to name its units once, but it did "
                         f"{len(collected)} times")
    units = collected[0]
    mask = np.array([u in partition.public for u in units.ids], dtype=bool)
    if not mask.any() or mask.all():
        raise LabelsError(f"Expected the public subset to hold some of the {mask.size} scored "
                          f"{units.unit}s and not all, but it holds {int(mask.sum())}")
    return [partition_result(result, units, mask, PUBLIC, resamples),
            partition_result(result, units, ~mask, PRIVATE, resamples)]


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
