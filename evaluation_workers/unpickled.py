"""File endings that only a converter reads: forms that need unpickling, never opened on the server.

Standard library only, and below both the tracks (a track's name refusal adds ``refusal_hint``) and the
converters (``evaluation_workers.convert``, which re-exports both names for ``lb``).
"""

from __future__ import annotations

from pathlib import Path

# File ending -> (track, converter form): ``lb submit`` offers the converter's command instead of uploading.
NEEDS_CONVERTING = {".pth": ("openscan", "open3dis"), ".pkl": ("mmscan-vg", "embodiedscan-pkl")}


def refusal_hint(file_name: str) -> str:
    """What to add to the server's refusal of a file only a converter reads ("" for any other file)."""
    match = NEEDS_CONVERTING.get(Path(file_name).suffix.lower())
    if match is None:
        return ""
    track, form = match
    return (f" Files that need unpickling are never opened on the server: convert it where your code runs, "
            f"e.g. `lb convert --track {track} --from {form} ...` (see /benchmarks/{track}/format/).")
