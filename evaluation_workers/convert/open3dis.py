"""Open3DIS ``.pth`` outputs -> OpenScan's official zip or compact form.

Open3DIS (VinAIResearch/Open3DIS, ``tools/generate_3d_inst.py``) writes one
file per scene with ``torch.save``::

    {"ins": [{"length": V, "counts": runs}, ...],   # RLE per mask (rle_encode_gpu_batch), or a (M, V) tensor
     "conf": tensor (M,) or None,                   # mask scores; None for class-agnostic runs
     "final_class": tensor (M,) or None}            # 0-based index into the text queries

``counts`` alternates 1-based run starts and run lengths (a numpy array, or
the same numbers as a space-separated string from the CPU ``rle_encode``);
its evaluator decodes them with ``rle_decode`` and scores class
``final_class + 1``. Run Open3DIS once per aspect with that aspect's
vocabulary (in ``vocabulary.json`` order) as the text queries, so that
``final_class + 1`` is the attribute id. Input folder: ``<aspect>/<scene_id>.pth``,
or ``<scene_id>.pth`` for one aspect with ``--aspect``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.convert.common import ConvertError, as_array, torch_load, write_openscan
from evaluation_workers.tracks.openscan.labels import ASPECTS

FORM = "open3dis"
SUFFIXES = (".pth",)


def rle_decode(rle: Any, file: str, index: int) -> np.ndarray:
    """(V,) bool of one Open3DIS RLE dict, as ``isbnet.util.rle.rle_decode`` reads it, without its loop."""
    if not isinstance(rle, dict) or "length" not in rle or "counts" not in rle:
        raise ConvertError(f"{file}: ins[{index}]: Expected an RLE dict with `length` and `counts`, "
                           f"but got {type(rle).__name__}")
    length = int(rle["length"])
    counts = rle["counts"]
    if isinstance(counts, str):
        counts = [int(x) for x in counts.split()]
    runs = as_array(counts, file, f"ins[{index}].counts").astype(np.int64).ravel()
    if runs.size % 2:
        raise ConvertError(f"{file}: ins[{index}].counts: Expected pairs of (start, length), "
                           f"but got {runs.size} numbers")
    starts, lengths = runs[0::2] - 1, runs[1::2]
    bad = (starts < 0) | (lengths < 1) | (starts + lengths > length)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ConvertError(f"{file}: ins[{index}].counts: Expected runs inside 1..{length} (1-based starts), "
                           f"but got start {int(starts[j]) + 1} with length {int(lengths[j])}")
    delta = np.zeros(length + 1, dtype=np.int64)
    np.add.at(delta, starts, 1)
    np.add.at(delta, starts + lengths, -1)
    return np.cumsum(delta[:-1]) > 0


def scene_arrays(data: Any, file: str, vertices: int | None) -> dict[str, np.ndarray]:
    """The official-layout arrays of one Open3DIS file."""
    if not isinstance(data, dict) or "ins" not in data:
        raise ConvertError(f"{file}: Expected the dict Open3DIS saves (`ins`, `conf`, `final_class`), "
                           f"but got {type(data).__name__}" + (f" with keys {sorted(data)}" if isinstance(data, dict)
                                                               else ""))
    if data.get("final_class") is None:
        raise ConvertError(f"{file}: final_class: Expected class indices, but got None (a class-agnostic run "
                           "cannot be scored; run Open3DIS with the aspect's vocabulary as text queries)")
    classes = as_array(data["final_class"], file, "final_class").ravel()
    if not np.issubdtype(classes.dtype, np.integer) and not np.array_equal(classes, np.round(classes)):
        raise ConvertError(f"{file}: final_class: Expected integer class indices, but got {classes[:5].tolist()}")
    ins = data["ins"]
    if isinstance(ins, (list, tuple)) and all(isinstance(m, dict) for m in ins):
        masks = np.stack([rle_decode(m, file, i) for i, m in enumerate(ins)], axis=1) if ins else None
    else:
        dense = as_array(ins, file, "ins")
        if dense.ndim != 2:
            raise ConvertError(f"{file}: ins: Expected RLE dicts or an (M, V) array, but got shape {dense.shape}")
        masks = dense.T == 1  # Open3DIS's evaluator: (masks[ind] == 1)
    n = len(classes)
    if masks is None:
        masks = np.zeros((vertices or 0, 0), dtype=bool)
    if masks.shape[1] != n:
        raise ConvertError(f"{file}: Expected as many masks in `ins` as entries in `final_class` ({n}), "
                           f"but got {masks.shape[1]}")
    if vertices is not None and masks.shape[0] != vertices:
        raise ConvertError(f"{file}: ins: Expected masks over the scene's {vertices:,} vertices, "
                           f"but got {masks.shape[0]:,}")
    conf = data.get("conf")
    scores = np.ones(n) if conf is None else as_array(conf, file, "conf").astype(np.float64).ravel()
    if len(scores) != n:
        raise ConvertError(f"{file}: conf: Expected {n} scores (one per mask), but got {len(scores)}")
    return {"pred_masks": masks, "pred_scores": scores, "pred_classes": classes.astype(np.int64) + 1}


def _files(source: Path, aspect: str | None) -> list[tuple[str, Path]]:
    if not source.is_dir():
        raise ConvertError(f"{source}: Expected a folder of Open3DIS outputs (<aspect>/<scene_id>.pth), "
                           "but it is not a folder")
    if aspect is not None:
        return [(aspect, p) for p in sorted(source.glob("*.pth"))]
    found = [(p.parent.name, p) for p in sorted(source.glob("*/*.pth"))]
    unknown = sorted({a for a, _ in found if a not in ASPECTS})
    if unknown:
        raise ConvertError(f"{source}: Expected aspect folders ({', '.join(ASPECTS)}), but got {', '.join(unknown)}")
    return found


def convert(source: Path, dest: Path, manifest: dict[str, Any] | None, *, to: str = "official",
            aspect: str | None = None) -> str:
    """Convert a folder of Open3DIS ``.pth`` files; returns a one-line summary."""
    files = _files(Path(source), aspect)
    if not files:
        raise ConvertError(f"{source}: Expected Open3DIS .pth files, but found none")
    scenes = (manifest or {}).get("scenes")

    def items() -> Iterator[tuple[str, str, dict[str, np.ndarray]]]:
        for asp, path in files:
            scene = path.stem
            if scenes is not None and scene not in scenes:
                raise ConvertError(f"{path.parent.name}/{path.name}: Expected a scene id of the split, but got {scene}")
            name = f"{path.parent.name}/{path.name}"
            yield asp, scene, scene_arrays(torch_load(path, name), name, None if scenes is None else int(scenes[scene]))

    count = write_openscan(Path(dest), items(), to, manifest)
    return f"{count} Open3DIS files -> {dest} ({to} form)"
