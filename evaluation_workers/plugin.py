"""The public API of the scoring core for track plugins: everything a track needs, under stable names.

A track package imports from here and from its own package only (never from another module of
``evaluation_workers``: those may change without notice); the built-in tracks keep the same rule
(``tests/test_plugin_api.py``). Names here keep their meaning within a major version of the
``scene-leaderboards-core`` distribution, which a plugin names in its dependencies
(``scene-leaderboards-core>=1.0,<2``). Writing a track: docs/writing-a-track.md.

**The track.** ``Track`` (every field, which are required: docs/writing-a-track.md), ``Sample`` (a file the
format page offers), ``DetailRows``, ``ScoringProtocol``, ``MetricSpec`` (a metric's direction, range or
unit and precision, in ``Track.metric_specs``); the types ``Manifest``, ``Result``, ``Progress``
and ``no_progress``.

**Refusals.** ``SubmissionError`` and its ``PredictionFormatError`` (the message is shown to the
submitter verbatim: name the file, the entry, the field and what was expected; ``where`` builds the
prefix); ``LabelsError`` for a maintainer's labels; the phrases ``CORRUPT_COMPRESSED``,
``NO_ZIP_DIRECTORY``, ``UNSUPPORTED_ZIP``.

**The result and its checksums.** ``make_result`` builds the result JSON of docs/metrics.md.
``labels_sha256(loaded)`` is the checksum rule: a result's ``labels_sha256`` equals ``sha256_tree`` of
what the maintainer loaded, less ``manifest.json`` and ``.cache`` (``DERIVED_NAMES``); labels loaded with
a public subset hash as their prepared folder, ``PARTITION_FILE`` included. ``sha256_file`` for the
predictions.

**Uncertainty** (intervals by scene, docs/metrics.md "Uncertainty"). ``scene_index`` (each unit's
scene), ``scenes_of`` and ``groups_of`` (for ``Track.scenes_of``/``groups_of``), ``intervals`` (hand it
the statistic), ``deferred`` and ``resamples_setting`` (a large split's intervals come in a follow-up
task), ``Statistic``, ``DEFAULT_MIN_SCENES``, ``weighted_ratio`` (a ratio of resampled sums, NaN-free);
the modules ``bootstrap`` and ``weighted`` themselves for the rest of their documented functions. The
paired test (``Track.stack``): ``stack_units`` stacks outcomes that are per-unit arrays only, and a
``stack`` raises ``Unpaired`` for two results' outcomes it cannot stack.

**Arrays** (one code path for NumPy and CuPy). ``array_namespace``, ``backend``, ``device_name``,
``to_device``, ``to_numpy``, ``contiguous``, ``into``, ``segment_sums``.

**Reading a file within bounds** (a hostile upload never costs more than a legitimate one). ``Budget``
and ``inflated_budget`` (inflated bytes per submission), ``read_maybe_gzip``, ``iter_gunzip``,
``loads_json`` (depth-limited), ``entries_past``/``entry_cap`` (count before parsing), ``npy_header``,
``unlimited``, ``MAX_RATIO``, ``RATIO_FLOOR``, ``MAX_JSON_DEPTH``; ``inflate`` (zlib-ng when installed),
``map_file``, ``give_back``, ``ViewFile``, ``LOCAL_HEADER`` (zip members through a mapping);
``parsed_cache`` (labels parsed once per checksum); ``threads`` and ``read_ahead`` (read the next scene
while this one is scored).

**Kernels** (docs/metrics.md). Oriented-box IoU (``indexed_iou3d``, ``DEFAULT_CHUNK_PAIRS``), instance AP
(``average_precision_distinct``, ``intersection_counts``, ``matching_entries``, ``positives``,
``IOU_THRESHOLDS``, ``AP_SLICE``, ``AP50_INDEX``, ``AP25_INDEX``, ``MIN_REGION_SIZE``), semantic
confusion (``confusion``, ``iou_and_accuracy``), answer matching (``clean_answer``, ``match_answer``,
``question_type``, ``QUESTION_TYPES``), ``grounding`` (ranked grounding AP), ``Interleaved``.

Names are resolved when first used, so that a track imports only the modules it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names as _EXPORTS below, for type checkers and readers
    from evaluation_workers import inflate as inflate
    from evaluation_workers import parsed_cache as parsed_cache
    from evaluation_workers._xp import array_namespace as array_namespace
    from evaluation_workers._xp import backend as backend
    from evaluation_workers._xp import contiguous as contiguous
    from evaluation_workers._xp import device_name as device_name
    from evaluation_workers._xp import into as into
    from evaluation_workers._xp import segment_sums as segment_sums
    from evaluation_workers._xp import to_device as to_device
    from evaluation_workers._xp import to_numpy as to_numpy
    from evaluation_workers.errors import CORRUPT_COMPRESSED as CORRUPT_COMPRESSED
    from evaluation_workers.errors import NO_ZIP_DIRECTORY as NO_ZIP_DIRECTORY
    from evaluation_workers.errors import UNSUPPORTED_ZIP as UNSUPPORTED_ZIP
    from evaluation_workers.errors import LabelsError as LabelsError
    from evaluation_workers.errors import PredictionFormatError as PredictionFormatError
    from evaluation_workers.errors import SubmissionError as SubmissionError
    from evaluation_workers.errors import where as where
    from evaluation_workers.limits import MAX_JSON_DEPTH as MAX_JSON_DEPTH
    from evaluation_workers.limits import MAX_RATIO as MAX_RATIO
    from evaluation_workers.limits import RATIO_FLOOR as RATIO_FLOOR
    from evaluation_workers.limits import Budget as Budget
    from evaluation_workers.limits import entries_past as entries_past
    from evaluation_workers.limits import entry_cap as entry_cap
    from evaluation_workers.limits import inflated_budget as inflated_budget
    from evaluation_workers.limits import iter_gunzip as iter_gunzip
    from evaluation_workers.limits import loads_json as loads_json
    from evaluation_workers.limits import npy_header as npy_header
    from evaluation_workers.limits import read_maybe_gzip as read_maybe_gzip
    from evaluation_workers.limits import unlimited as unlimited
    from evaluation_workers.mapped import LOCAL_HEADER as LOCAL_HEADER
    from evaluation_workers.mapped import ViewFile as ViewFile
    from evaluation_workers.mapped import give_back as give_back
    from evaluation_workers.mapped import map_file as map_file
    from evaluation_workers.metrics import bootstrap as bootstrap
    from evaluation_workers.metrics import grounding as grounding
    from evaluation_workers.metrics import weighted as weighted
    from evaluation_workers.metrics.answers import QUESTION_TYPES as QUESTION_TYPES
    from evaluation_workers.metrics.answers import clean_answer as clean_answer
    from evaluation_workers.metrics.answers import match_answer as match_answer
    from evaluation_workers.metrics.answers import question_type as question_type
    from evaluation_workers.metrics.bootstrap import DEFAULT_MIN_SCENES as DEFAULT_MIN_SCENES
    from evaluation_workers.metrics.bootstrap import Statistic as Statistic
    from evaluation_workers.metrics.bootstrap import deferred as deferred
    from evaluation_workers.metrics.bootstrap import groups_of as groups_of
    from evaluation_workers.metrics.bootstrap import intervals as intervals
    from evaluation_workers.metrics.bootstrap import resamples_setting as resamples_setting
    from evaluation_workers.metrics.bootstrap import scene_index as scene_index
    from evaluation_workers.metrics.bootstrap import scenes_of as scenes_of
    from evaluation_workers.metrics.instance_ap import AP25_INDEX as AP25_INDEX
    from evaluation_workers.metrics.instance_ap import AP50_INDEX as AP50_INDEX
    from evaluation_workers.metrics.instance_ap import AP_SLICE as AP_SLICE
    from evaluation_workers.metrics.instance_ap import IOU_THRESHOLDS as IOU_THRESHOLDS
    from evaluation_workers.metrics.instance_ap import MIN_REGION_SIZE as MIN_REGION_SIZE
    from evaluation_workers.metrics.instance_ap import (
        average_precision_distinct as average_precision_distinct,
    )
    from evaluation_workers.metrics.instance_ap import intersection_counts as intersection_counts
    from evaluation_workers.metrics.instance_ap import matching_entries as matching_entries
    from evaluation_workers.metrics.instance_ap import positives as positives
    from evaluation_workers.metrics.interleaved import Interleaved as Interleaved
    from evaluation_workers.metrics.iou3d import DEFAULT_CHUNK_PAIRS as DEFAULT_CHUNK_PAIRS
    from evaluation_workers.metrics.iou3d import indexed_iou3d as indexed_iou3d
    from evaluation_workers.metrics.permutation import Unpaired as Unpaired
    from evaluation_workers.metrics.permutation import stack_units as stack_units
    from evaluation_workers.metrics.semseg import confusion as confusion
    from evaluation_workers.metrics.semseg import iou_and_accuracy as iou_and_accuracy
    from evaluation_workers.metrics.weighted import weighted_ratio as weighted_ratio
    from evaluation_workers.partitions import PARTITION_FILE as PARTITION_FILE
    from evaluation_workers.results import DERIVED_NAMES as DERIVED_NAMES
    from evaluation_workers.results import labels_sha256 as labels_sha256
    from evaluation_workers.results import make_result as make_result
    from evaluation_workers.results import sha256_file as sha256_file
    from evaluation_workers.results import sha256_tree as sha256_tree
    from evaluation_workers.threads import read_ahead as read_ahead
    from evaluation_workers.threads import threads as threads
    from evaluation_workers.tracks.base import DetailRows as DetailRows
    from evaluation_workers.tracks.base import Manifest as Manifest
    from evaluation_workers.tracks.base import MetricSpec as MetricSpec
    from evaluation_workers.tracks.base import Progress as Progress
    from evaluation_workers.tracks.base import Result as Result
    from evaluation_workers.tracks.base import Sample as Sample
    from evaluation_workers.tracks.base import ScoringProtocol as ScoringProtocol
    from evaluation_workers.tracks.base import Track as Track
    from evaluation_workers.tracks.base import no_progress as no_progress


def _names(module: str, *names: str) -> dict[str, str]:
    return {name: f"{module}:{name}" for name in names}


# Public name -> "module:attribute", or "module" for a module itself.
_EXPORTS: dict[str, str] = {
    **_names("evaluation_workers.tracks.base", "Track", "Sample", "DetailRows", "ScoringProtocol", "MetricSpec",
             "Manifest", "Result", "Progress", "no_progress"),
    **_names("evaluation_workers.errors", "SubmissionError", "PredictionFormatError", "LabelsError", "where",
             "CORRUPT_COMPRESSED", "NO_ZIP_DIRECTORY", "UNSUPPORTED_ZIP"),
    **_names("evaluation_workers.results", "make_result", "labels_sha256", "sha256_file", "sha256_tree",
             "DERIVED_NAMES"),
    **_names("evaluation_workers.partitions", "PARTITION_FILE"),
    **_names("evaluation_workers.metrics.bootstrap", "scene_index", "scenes_of", "groups_of", "intervals",
             "deferred", "resamples_setting", "Statistic", "DEFAULT_MIN_SCENES"),
    **_names("evaluation_workers.metrics.weighted", "weighted_ratio"),
    **_names("evaluation_workers.metrics.permutation", "stack_units", "Unpaired"),
    **_names("evaluation_workers._xp", "array_namespace", "backend", "device_name", "to_device", "to_numpy",
             "contiguous", "into", "segment_sums"),
    **_names("evaluation_workers.limits", "Budget", "inflated_budget", "read_maybe_gzip", "iter_gunzip",
             "loads_json", "entries_past", "entry_cap", "npy_header", "unlimited", "MAX_RATIO", "RATIO_FLOOR",
             "MAX_JSON_DEPTH"),
    **_names("evaluation_workers.mapped", "map_file", "give_back", "ViewFile", "LOCAL_HEADER"),
    **_names("evaluation_workers.threads", "threads", "read_ahead"),
    **_names("evaluation_workers.metrics.iou3d", "indexed_iou3d", "DEFAULT_CHUNK_PAIRS"),
    **_names("evaluation_workers.metrics.instance_ap", "average_precision_distinct", "intersection_counts",
             "matching_entries", "positives", "IOU_THRESHOLDS", "AP_SLICE", "AP50_INDEX", "AP25_INDEX",
             "MIN_REGION_SIZE"),
    **_names("evaluation_workers.metrics.semseg", "confusion", "iou_and_accuracy"),
    **_names("evaluation_workers.metrics.answers", "clean_answer", "match_answer", "question_type",
             "QUESTION_TYPES"),
    **_names("evaluation_workers.metrics.interleaved", "Interleaved"),
    "bootstrap": "evaluation_workers.metrics.bootstrap",
    "weighted": "evaluation_workers.metrics.weighted",
    "grounding": "evaluation_workers.metrics.grounding",
    "inflate": "evaluation_workers.inflate",
    "parsed_cache": "evaluation_workers.parsed_cache",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the module that holds ``name`` on first use (PEP 562), and keep the value here."""
    try:
        module, _, attribute = _EXPORTS[name].partition(":")
    except KeyError:
        raise AttributeError(f"module 'evaluation_workers.plugin' has no attribute {name!r} (its names: "
                             "evaluation_workers.plugin.__all__; docs/writing-a-track.md)") from None
    value = importlib.import_module(module)
    if attribute:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
