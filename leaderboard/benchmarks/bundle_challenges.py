"""A bundle's challenges (``challenges``): phases in order, each on a split of its own.

A phase's dates and rules become its split's (``SplitSpec``: start, freeze, deadline, reveal, the
board hidden or live, how many rows a team may publish, its limits), so that ``phases.py`` keeps
being the one place those rules are read: a phase is a split with a schedule, and a challenge
orders them and archives the last one's board when it ends. A split's own ``phases`` stay as
shorthand for a one-phase challenge named after the split (``title`` plus the split's name).

``check`` says what the schema cannot: names once, a phase's split declared and used by one phase
only (its dates and limits declared in one place), dates in order within a phase and phases in
order within a challenge.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from leaderboard.benchmarks.bundle_yaml import Key, Reader

DATES = ("starts_at", "freeze_at", "deadline")


@dataclass(frozen=True)
class PhaseSpec:
    name: str
    title: str
    split: str


@dataclass(frozen=True)
class ChallengeSpec:
    name: str
    title: str
    description: str
    top: int
    post_challenge: bool
    phases: tuple[PhaseSpec, ...]
    shorthand: bool = False  # a split's own ``phases``


def moments(data: dict[str, Any]) -> list[tuple[Key, str]]:
    """Every moment of the bundle's challenges, with its key path."""
    return [(("challenges", c, "phases", p, k), phase[k]) for c, challenge in enumerate(data.get("challenges", []))
            for p, phase in enumerate(challenge["phases"]) for k in DATES if isinstance(phase.get(k), str)]


def check_order(reader: Reader, where: Key, dates: dict[str, datetime]) -> None:
    """``starts_at < freeze_at <= deadline`` among the dates present (``where``: their object's key path)."""
    present = [(k, dates[k]) for k in DATES if dates.get(k) is not None]
    for (a, first), (b, second) in zip(present, present[1:]):
        wrong = second <= first if (a, b) == ("starts_at", "freeze_at") else second < first
        if wrong:
            reader.problem((*where, b), f"expected {b} after {a} (starts_at < freeze_at <= deadline), but got {a} "
                                        f"{first:%Y-%m-%d %H:%M} and {b} {second:%Y-%m-%d %H:%M} UTC")


def check(reader: Reader, data: dict[str, Any], moment: Any) -> None:
    """The rules of ``challenges`` the schema cannot say (``moment`` parses a bundle's date)."""
    splits = {s["name"]: s for s in data["splits"]}
    used: dict[str, Key] = {}
    names: set[str] = set()
    for c, challenge in enumerate(data.get("challenges", [])):
        where = ("challenges", c)
        if challenge["name"] in names:
            reader.problem((*where, "name"), f"challenge {challenge['name']!r} is declared twice")
        names.add(challenge["name"])
        phase_names: set[str] = set()
        previous: dict[str, datetime] | None = None
        for p, phase in enumerate(challenge["phases"]):
            at = (*where, "phases", p)
            if phase["name"] in phase_names:
                reader.problem((*at, "name"), f"phase {phase['name']!r} is declared twice in {challenge['name']!r}")
            phase_names.add(phase["name"])
            split = splits.get(phase["split"])
            if split is None:
                reader.problem((*at, "split"), f"split {phase['split']!r} is not declared in splits "
                                               f"({', '.join(sorted(splits))})")
            elif phase["split"] in used:
                reader.problem((*at, "split"), f"split {phase['split']!r} is already the split of "
                                               f"{'.'.join(map(str, used[phase['split']]))}; a split runs one phase")
            else:
                used[phase["split"]] = at
                _check_one_place(reader, at, phase, split, data["splits"].index(split))
            dates = {k: moment(phase[k]) for k in DATES if phase.get(k)}
            check_order(reader, at, dates)
            if previous is not None:
                for key in ("starts_at", "deadline"):
                    if dates[key] < previous[key]:
                        reader.problem((*at, key), f"expected the phases in order: {key} on or after the previous "
                                                   f"phase's ({previous[key]:%Y-%m-%d %H:%M} UTC), but got "
                                                   f"{dates[key]:%Y-%m-%d %H:%M} UTC")
            previous = dates
    for i, split in enumerate(data["splits"]):
        if split.get("phases") and split["name"] in names:
            reader.problem(("splits", i, "phases"), f"its one-phase challenge would be named {split['name']!r}, the "
                                                    "name of a challenge in challenges; rename one")


def _check_one_place(reader: Reader, at: Key, phase: dict[str, Any], split: dict[str, Any], index: int) -> None:
    if split.get("phases"):
        reader.problem(("splits", index, "phases"), f"split {split['name']!r} is the split of "
                                                    f"{'.'.join(map(str, at))}, which holds its dates; declare them "
                                                    "in one place")
    if split.get("limits") and phase.get("limits"):
        reader.problem(("splits", index, "limits"), f"split {split['name']!r} is the split of "
                                                    f"{'.'.join(map(str, at))}, which declares its limits; declare "
                                                    "them in one place")


def phase_rules(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Split name -> the rules of the phase it is (its dates as the bundle wrote them, ``reveal``,
    ``board``, ``max_published``, ``limits``), from ``challenges`` or from the split's own ``phases``."""
    rules: dict[str, dict[str, Any]] = {}
    for split in data["splits"]:
        if split.get("phases"):
            own = split["phases"]
            rules[split["name"]] = {**{k: own.get(k) for k in DATES},
                                    "reveal": "deadline" if own.get("reveal_at_deadline", True) else "maintainer"}
    for challenge in data.get("challenges", []):
        for phase in challenge["phases"]:
            rules[phase["split"]] = phase
    return rules


def specs(data: dict[str, Any]) -> tuple[ChallengeSpec, ...]:
    """The bundle's challenges, then a one-phase challenge for each split with its own ``phases``."""
    declared = tuple(ChallengeSpec(
        name=c["name"], title=c["title"], description=c.get("description", ""), top=c.get("top", 3),
        post_challenge=c.get("post_challenge", True),
        phases=tuple(PhaseSpec(p["name"], p.get("title") or p["name"].replace("-", " ").capitalize(), p["split"])
                     for p in c["phases"])) for c in data.get("challenges", []))
    shorthand = tuple(ChallengeSpec(name=s["name"], title=f"{data['title']} {s['name']}", description="", top=3,
                                    post_challenge=True, phases=(PhaseSpec(s["name"], s["name"].capitalize(),
                                                                           s["name"]),), shorthand=True)
                      for s in data["splits"] if s.get("phases"))
    return declared + shorthand
