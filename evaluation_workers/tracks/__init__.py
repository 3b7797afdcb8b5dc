"""The registry of tracks, by name.

Tracks register here explicitly so that a newcomer can see every track in one
place; importing a track module has no side effects beyond defining it.
"""

from __future__ import annotations

import importlib

from evaluation_workers.tracks.base import Track

# name -> module that defines ``TRACK``
_MODULES = {
    "sqa3d": "evaluation_workers.tracks.sqa3d",
    "mmscan-vg": "evaluation_workers.tracks.mmscan_vg",
    "openscan": "evaluation_workers.tracks.openscan",  # a package: see its __init__
}


def names() -> list[str]:
    return list(_MODULES)


def get_track(name: str) -> Track:
    """The track called ``name``; ``KeyError`` with the known names otherwise."""
    try:
        module = _MODULES[name]
    except KeyError:
        raise KeyError(f"Unknown track {name!r}; expected one of {', '.join(_MODULES)}") from None
    track: Track = importlib.import_module(module).TRACK
    return track


def all_tracks() -> list[Track]:
    return [get_track(n) for n in _MODULES]
