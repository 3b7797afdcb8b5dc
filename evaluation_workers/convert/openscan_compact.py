"""Convert OpenScan predictions from the official zip to the compact .npz.

    python -m evaluation_workers.convert.openscan_compact predictions.zip predictions.npz \\
        (--labels LABELS_FOLDER | --manifest MANIFEST.json)

Masks become runs of consecutive vertices; a mask that several aspects use
(the same class-agnostic proposal) is stored once. The input is validated as
the scorer would (the public manifest gives scene ids and vertex counts).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.errors import PredictionFormatError, SubmissionError, where
from evaluation_workers.tracks.openscan.common import Proposals
from evaluation_workers.tracks.openscan.compact import COMPACT_FORMAT
from evaluation_workers.tracks.openscan.labels import manifest as labels_manifest
from evaluation_workers.tracks.openscan.reader import open_predictions


def mask_runs(proposals: Proposals) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per mask, its runs (starts, lengths) in increasing vertex order."""
    order = np.lexsort((proposals.vertex, proposals.mask))
    vertex, mask = proposals.vertex[order], proposals.mask[order]
    new = np.ones(len(vertex), dtype=bool)
    new[1:] = (mask[1:] != mask[:-1]) | (vertex[1:] != vertex[:-1] + 1)
    starts = vertex[new]
    run_mask = mask[new]
    ends = np.append(np.flatnonzero(new)[1:], len(vertex))
    lengths = ends - np.flatnonzero(new)
    bounds = np.searchsorted(run_mask, np.arange(proposals.n + 1))
    return [
        (starts[bounds[m] : bounds[m + 1]], lengths[bounds[m] : bounds[m + 1]]) for m in range(proposals.n)
    ]


def convert(source: Path, manifest: dict[str, Any]) -> dict[str, np.ndarray]:
    """The compact arrays for an official or text-layout zip (see docs/openscan-format.md)."""
    reader = open_predictions(source, manifest)
    scenes = reader.scenes()
    aspects = [a for a in manifest["aspects"] if reader.present(a)]
    run_starts, run_lengths, run_counts, prop_counts = [], [], [], []
    per_aspect: dict[str, dict[str, list[Any]]] = {
        a: {"counts": [], "proposal": [], "scores": [], "classes": [], "sem_pred": [], "sem_given": []}
        for a in aspects
    }
    for scene in scenes:
        preds = reader.read(scene)
        index: dict[bytes, int] = {}
        for aspect in aspects:
            acc = per_aspect[aspect]
            pred = preds.get(aspect)
            if pred is None:
                # the compact form lists scenes once: an aspect absent from a scene gets no masks and
                # (if it has sem_pred) unknown ids, which score as the official layout's missing file does
                acc["counts"].append(np.array(0))
                acc["sem_pred"].append(np.zeros(manifest["scenes"][scene], dtype=np.int16))
                acc["sem_given"].append(None)
                continue
            rows = []
            runs = mask_runs(pred.proposals)
            for s, n in (runs[int(m)] for m in pred.rows):  # masks the reader kept (known class ids)
                key = s.astype(np.int64).tobytes() + b"|" + n.astype(np.int64).tobytes()
                if key not in index:
                    index[key] = len(index)
                    run_starts.append(s)
                    run_lengths.append(n)
                    run_counts.append(len(s))
                rows.append(index[key])
            acc["counts"].append(np.array(len(rows)))
            acc["proposal"].append(np.array(rows, dtype=np.int32))
            acc["scores"].append(
                pred.scores.astype(np.float32)
                if np.array_equal(pred.scores.astype(np.float32), pred.scores)
                else pred.scores
            )
            acc["classes"].append(pred.classes.astype(np.int16))
            acc["sem_pred"].append(pred.sem_pred)
            acc["sem_given"].append(pred.sem_pred is not None)
        prop_counts.append(len(index))
    arrays: dict[str, np.ndarray] = {
        "format": np.array(COMPACT_FORMAT),
        "scene_ids": np.array(scenes, dtype=str),
        "vertex_counts": np.array([manifest["scenes"][s] for s in scenes], dtype=np.int64),
        "proposal_offsets": np.concatenate([[0], np.cumsum(prop_counts, dtype=np.int64)]),
        "run_offsets": np.concatenate([[0], np.cumsum(run_counts, dtype=np.int64)]),
        "run_starts": np.concatenate(run_starts + [np.zeros(0, np.int64)]).astype(np.uint32),
        "run_lengths": np.concatenate(run_lengths + [np.zeros(0, np.int64)]).astype(np.uint32),
    }
    for aspect, acc in per_aspect.items():
        arrays[f"{aspect}.rows"] = np.concatenate([[0], np.cumsum(acc["counts"], dtype=np.int64)])
        arrays[f"{aspect}.proposal"] = np.concatenate(acc["proposal"] + [np.zeros(0, np.int32)])
        arrays[f"{aspect}.scores"] = np.concatenate(acc["scores"] + [np.zeros(0, np.float32)])
        arrays[f"{aspect}.classes"] = np.concatenate(acc["classes"] + [np.zeros(0, np.int16)])
        given = {g for g in acc["sem_given"] if g is not None}
        if len(given) == 2:
            raise PredictionFormatError(
                f"{where(source.name, aspect)}: Expected `sem_pred` in every scene of the "
                f"aspect or in none, but got a mix"
            )
        if given == {True}:
            sem = np.concatenate(acc["sem_pred"])
            small = sem.min(initial=0) >= -(2**15) and sem.max(initial=0) < 2**15
            arrays[f"{aspect}.sem_pred"] = sem.astype(np.int16 if small else np.int64)
    return arrays


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation_workers.convert.openscan_compact",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", type=Path, help="official zip of <aspect>/<scene_id>.npz")
    parser.add_argument("dest", type=Path, help="compact .npz to write")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--labels", type=Path, help="labels folder (only public facts are used)")
    source.add_argument("--manifest", type=Path, help="public manifest JSON of the split")
    args = parser.parse_args(argv)
    manifest = json.loads(args.manifest.read_text()) if args.manifest else labels_manifest(args.labels)
    try:
        arrays = convert(args.source, manifest)
    except SubmissionError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    with open(args.dest, "wb") as f:
        np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
    print(
        f"{args.source} ({args.source.stat().st_size} bytes) -> {args.dest} ({args.dest.stat().st_size} bytes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
