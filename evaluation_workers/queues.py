"""Names of the scoring queues, shared by the site (which sends) and the workers (which consume).

One queue per track, device and scorer version, and a bulk twin of each:

    <base>-<track>-v<scorer_version>          e.g. eval-cpu-sqa3d-v1.0.0
    <base>-<track>-v<scorer_version>-bulk     re-scoring a whole split

``<base>`` is ``EVAL_QUEUE_CPU`` (default ``eval-cpu``) or ``EVAL_QUEUE_GPU``
(``eval-gpu``). The version in the name means that a worker consumes only
what its own code scores: a worker running another scorer version listens on
other queues, and work for a version no worker runs waits (the desk shows it)
instead of being scored by the wrong code.

A worker lists its normal queues before its bulk ones, and consumes them in
that order (``NormalFirstCycle``): a bulk re-scoring never delays a new
submission by more than the one bulk task already running.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

BULK_SUFFIX = "-bulk"
DEVICES = ("cpu", "gpu")


def queue_name(base: str, track: str, scorer_version: str, *, bulk: bool = False) -> str:
    return f"{base}-{track}-v{scorer_version}{BULK_SUFFIX if bulk else ''}"


def is_bulk(queue: str) -> bool:
    return queue.endswith(BULK_SUFFIX)


def bases(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The base name of each device's queues, from ``EVAL_QUEUE_CPU``/``EVAL_QUEUE_GPU``."""
    env = os.environ if env is None else env
    return {"cpu": env.get("EVAL_QUEUE_CPU") or "eval-cpu", "gpu": env.get("EVAL_QUEUE_GPU") or "eval-gpu"}


def worker_queues(tracks: Iterable[str], devices: Iterable[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The queues a worker serving ``tracks`` on ``devices`` consumes: every normal queue, then every bulk one."""
    from evaluation_workers.tracks import get_track

    base = bases(env)
    pairs = [(base[device], get_track(track)) for track in tracks for device in devices]
    normal = [queue_name(b, t.name, t.scorer_version) for b, t in pairs]
    bulk = [queue_name(b, t.name, t.scorer_version, bulk=True) for b, t in pairs]
    return list(dict.fromkeys(normal + bulk))


def served_tracks(env: Mapping[str, str] | None = None) -> list[str]:
    """``EVAL_TRACKS`` (comma-separated; empty or ``all``: every track)."""
    from evaluation_workers.tracks import names

    env = os.environ if env is None else env
    wanted = [t.strip() for t in env.get("EVAL_TRACKS", "").split(",") if t.strip()]
    if not wanted or wanted == ["all"]:
        return names()
    unknown = sorted(set(wanted) - set(names()))
    if unknown:
        raise SystemExit(f"EVAL_TRACKS: unknown track(s) {', '.join(unknown)}; expected some of {', '.join(names())}")
    return wanted


def served_devices(env: Mapping[str, str] | None = None) -> list[str]:
    """``EVAL_QUEUE_DEVICES`` (comma-separated), else the device ``EVAL_DEVICE`` names (``gpu``), else ``cpu``."""
    env = os.environ if env is None else env
    listed = [d.strip() for d in env.get("EVAL_QUEUE_DEVICES", "").split(",") if d.strip()]
    if any(d not in DEVICES for d in listed):
        raise SystemExit(f"EVAL_QUEUE_DEVICES: expected some of cpu,gpu, but got {env['EVAL_QUEUE_DEVICES']!r}")
    return listed or (["gpu"] if env.get("EVAL_DEVICE") == "gpu" else ["cpu"])


class NormalFirstCycle:
    """The order in which kombu's Redis transport polls a worker's queues (``queue_order_strategy``).

    Kombu polls with one BRPOP over the listed queues, which returns from the
    first non-empty one. Its default, round robin, would let a bulk queue take
    its turn before a new submission; this cycle keeps round robin among the
    normal queues (one busy track does not starve another on a shared worker)
    and always lists the bulk queues after them.
    """

    def __init__(self, it: list[str] | None = None) -> None:
        self.items: list[str] = it if it is not None else []

    def update(self, it: Iterable[str]) -> None:
        self.items[:] = it

    def consume(self, n: int) -> list[str]:
        items = self.items[:n]
        return [q for q in items if not is_bulk(q)] + [q for q in items if is_bulk(q)]

    def rotate(self, last_used: str) -> str:
        if last_used in self.items:
            self.items.append(self.items.pop(self.items.index(last_used)))
        return last_used

    def close(self) -> None:
        pass
