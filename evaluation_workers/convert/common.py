"""What the converters share: errors, the OpenScan writers, and loading files that need unpickling.

Converters run on the researcher's (or the maintainer's) machine, next to the
code that wrote the file; the server never runs them. A file that only
unpickling can read (torch ``.pth``, ``.pkl``) is opened here, with the safe
loader where the owner's library has one (``torch.load(weights_only=True)``)
and, for plain pickles, only after saying that this runs code from the file.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.errors import SubmissionError


class ConvertError(SubmissionError):
    """The input of a converter does not have the shape its source codebase writes."""


PICKLE_WARNING = (
    "warning: {file} is a pickle; reading it runs any code it contains. Convert only files "
    "you or your own code wrote (the leaderboard never unpickles uploads)."
)


def warn_pickle(path: Path) -> None:
    print(PICKLE_WARNING.format(file=path), file=sys.stderr)


def import_torch() -> Any:
    try:
        import torch  # the researcher's own install; never a dependency of the site or the worker
    except ImportError:
        raise ConvertError(
            "Reading .pth files needs PyTorch, which Open3DIS already uses: `pip install torch` "
            "(the CPU wheel is enough)") from None
    return torch


def torch_load(path: Path, name: str | None = None) -> Any:
    """``torch.load(weights_only=True)``, allowing numpy arrays (Open3DIS stores RLE counts as arrays).

    The weights-only unpickler builds tensors, containers and the allow-listed
    numpy reconstructors only; it refuses every other global, so this never
    runs code from the file.
    """
    torch = import_torch()
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy 1.x, as older research environments have it
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]

    # bytes: the pickled data of an empty array (a mask with no runs) is b"", which protocol 2 writes as bytes()
    allowed: list[Any] = [np.ndarray, np.dtype, _reconstruct, bytes,
                          (_reconstruct, "numpy.core.multiarray._reconstruct"),  # files written under numpy 1
                          (_reconstruct, "numpy._core.multiarray._reconstruct")]  # ... and under numpy 2
    allowed += [type(np.dtype(t)) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
                                             np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                             np.float64)]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError, ... for bad files
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        # torch's message opens with advice to load it unsafely; the line that says what it refused is the useful one
        first = next((ln for ln in lines if "Unsupported global" in ln), lines[0] if lines else type(exc).__name__)
        first = first.replace("WeightsUnpickler error: ", "").split(" was not an allowed global")[0]
        raise ConvertError(
            f"{name or path.name}: Expected a file written by torch.save holding tensors, numbers, strings and "
            f"numpy arrays, but torch.load(weights_only=True) refused it: {first[:300]}") from None


def as_array(value: Any, file: str, field: str) -> np.ndarray:
    """A numpy array of a tensor, a numpy array or a list; never an object array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ConvertError(f"{file}: {field}: Expected numbers, but got an array of {array.dtype}")
    return array


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def write_official_zip(dest: Path, items: Iterable[tuple[str, str, dict[str, np.ndarray]]]) -> int:
    """Write OpenScan's official zip (``<aspect>/<scene_id>.npz``); returns the number of files.

    ``pred_masks`` are stored as bool (the official reader takes any dtype,
    non-zero = in), the smallest exact form.
    """
    count = 0
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_STORED) as zf:
        for aspect, scene, arrays in items:
            arrays = {**arrays, "pred_masks": np.asarray(arrays["pred_masks"]) != 0}
            zf.writestr(f"{aspect}/{scene}.npz", npz_bytes(arrays))
            count += 1
    return count


def official_to_compact(official: Path, dest: Path, manifest: dict[str, Any]) -> None:
    """Re-encode an official zip as the compact ``.npz`` (needs the split's manifest)."""
    from evaluation_workers.convert.openscan_compact import convert

    arrays = convert(official, manifest)
    with open(dest, "wb") as f:
        np.savez_compressed(f, **arrays)  # type: ignore[arg-type]


def write_openscan(dest: Path, items: Iterable[tuple[str, str, dict[str, np.ndarray]]], to: str,
                   manifest: dict[str, Any] | None) -> int:
    """Write ``items`` as the official zip (``to="official"``) or the compact form (``"compact"``)."""
    if to == "official":
        return write_official_zip(dest, items)
    if manifest is None:
        raise ConvertError("The compact form needs the split's manifest: give --manifest or --labels")
    with tempfile.TemporaryDirectory() as tmp:
        official = Path(tmp) / "official.zip"
        count = write_official_zip(official, items)
        official_to_compact(official, dest, manifest)
    return count


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise ConvertError(f"{Path(path).name}: Expected a JSON file, but reading it failed: {exc}") from None
