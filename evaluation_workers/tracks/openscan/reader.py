"""Open OpenScan predictions in whichever of the three forms they are, told apart by content.

A zip with a ``format.npy`` member is the compact form; one with ``.npz``
members the official layout; one with ``.txt`` members ScanNet's text layout.
Every reader draws from one inflated-bytes ``Budget`` for the submission.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from evaluation_workers.plugin import Budget, PredictionFormatError, inflated_budget
from evaluation_workers.tracks.openscan import compact, text_zip
from evaluation_workers.tracks.openscan.common import Dropped, ScenePrediction, ignorable
from evaluation_workers.tracks.openscan.compact import CompactReader
from evaluation_workers.tracks.openscan.members import Archive
from evaluation_workers.tracks.openscan.official_zip import OfficialReader
from evaluation_workers.tracks.openscan.text_zip import TextReader

# The most a submission may inflate to (zip members, gzip), with room to spare:
# 312 scenes x 8 aspects of dense (V, M) masks; a uint8 official zip of 312 scenes x ~150k
# vertices x 200 masks x 8 aspects is ~75 GB, which is why masks are streamed one member at a
# time: the budget bounds total work, the per-member cap (the scene's V x MAX_MASKS_PER_SCENE)
# bounds memory.
MAX_INFLATED_BYTES = 96 * 2**30


class Reader(Protocol):
    format: str
    dropped: Dropped

    def scenes(self) -> list[str]: ...

    def present(self, aspect: str) -> set[str]: ...

    def read(self, scene: str) -> dict[str, ScenePrediction]: ...


def open_predictions(path: Path, manifest: dict[str, Any], budget: Budget | None = None) -> Reader:
    """A reader for the file's form; ``budget`` defaults to the track's (``MAX_INFLATED_BYTES``, ``limits.inflated_budget``)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        raise PredictionFormatError(f"{path.name}: Expected a zip or .npz file, but got an empty or missing file")
    budget = budget or Budget(inflated_budget("openscan", MAX_INFLATED_BYTES), path.name)
    cap = max(text_zip.max_members(manifest), compact.max_members(manifest))
    archive = Archive(path, path.name, budget, cap,
                      "a zip archive: the official zip (an .npz per scene) or the compact .npz")
    names = [n for n in archive.files() if not ignorable(tuple(n.split("/")))]
    if "format.npy" in names:
        return CompactReader(archive, manifest)
    suffixes = {n.rsplit(".", 1)[-1].lower() for n in names if "." in n.rsplit("/", 1)[-1]}
    if "npz" in suffixes and "txt" in suffixes:
        raise PredictionFormatError(
            f"{path.name}: Expected one layout (.npz per scene, or ScanNet's .txt files), but got both")
    if "txt" in suffixes:
        return TextReader(archive, manifest, budget)
    official_cap = 2 * sum(len(s) for s in manifest["aspects"].values()) + 64
    if len(archive.infos) > official_cap:
        raise PredictionFormatError(
            f"{path.name}: Expected at most {official_cap:,} members (one .npz per scene and aspect), "
            f"but got {len(archive.infos):,}")
    return OfficialReader(archive, manifest, budget)


def iter_scenes(reader: Reader) -> Iterator[tuple[str, dict[str, ScenePrediction]]]:
    for scene in reader.scenes():
        yield scene, reader.read(scene)
