"""The registry of tracks, by name: every installed track plugin.

A track is a ``Track`` (``base.py``) that a Python package declares under the
entry-point group ``scene_leaderboards.tracks`` (name: the track's slug; value:
``module:TRACK``). The three built-in tracks are declared the same way, by the
core's distribution (``distributions/core/pyproject.toml``); a track package
installed beside the core (``plugins/scanrefer`` is one) is found without any
change here. Run from a source tree that was never installed, the built-in
tracks are read from that ``pyproject.toml``. Finding the tracks imports none of them: ``get_track``
imports the one asked for.

Writing a track: docs/writing-a-track.md.
"""

from __future__ import annotations

import functools
import logging
import tomllib
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from evaluation_workers.tracks.base import Track

ENTRY_POINT_GROUP = "scene_leaderboards.tracks"
_SOURCE_TREE = Path(__file__).resolve().parents[2] / "distributions" / "core" / "pyproject.toml"

log = logging.getLogger(__name__)


class UnknownTrack(KeyError):
    """No installed track has this name (its plugin was never installed, or was removed)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _source_tree_entry_points() -> list[EntryPoint]:
    """The built-in tracks declared in this source tree's core pyproject.toml (none outside a checkout)."""
    try:
        project = tomllib.loads(_SOURCE_TREE.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return []
    declared = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in declared.items()]


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    """Track name -> entry point: the source tree's built-ins first, then installed packages' (which win)."""
    found = {ep.name: ep for ep in _source_tree_entry_points()}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        found[ep.name] = ep
    return found


def refresh() -> None:
    """Forget what was found and loaded (after a track package is installed or removed in this process)."""
    _entry_points.cache_clear()
    _load.cache_clear()


def names() -> list[str]:
    """The installed tracks' names, built-ins in their declared order, then plugins by name."""
    return list(_entry_points())


def modules() -> list[str]:
    """The module of each installed track (what a process imports to have them all ready)."""
    return [ep.module for ep in _entry_points().values()]


def is_installed(name: str) -> bool:
    return name in _entry_points()


@functools.cache
def _load(name: str) -> Track:
    ep = _entry_points()[name]
    track = ep.load()
    if not isinstance(track, Track):
        raise TypeError(f"Track plugin {ep.value!r} (entry point {name!r} of {ENTRY_POINT_GROUP}) is a "
                        f"{type(track).__name__}, expected an evaluation_workers.tracks.base.Track")
    if track.name != name:
        raise ValueError(f"Track plugin {ep.value!r} is registered as {name!r} but calls itself {track.name!r}")
    return track


def get_track(name: str) -> Track:
    """The track called ``name``; ``UnknownTrack`` (a ``KeyError``) naming the installed ones otherwise."""
    if name not in _entry_points():
        raise UnknownTrack(f"Unknown track {name!r}; installed tracks: {', '.join(names()) or 'none'}")
    return _load(name)


def all_tracks() -> list[Track]:
    """Every installed track that loads; a plugin that fails to import is logged and left out."""
    tracks = []
    for name in names():
        try:
            tracks.append(get_track(name))
        except Exception:
            log.exception("Track plugin %r failed to load; it is left out", name)
    return tracks
