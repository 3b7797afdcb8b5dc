"""A bundle's ``participation``, ``announcements`` and ``webhook``, read and checked (``bundles``
calls these; ``benchmarks.bundle_participation_plan`` writes them).

The terms file is read here, through ``bundle_files`` (inside the bundle's folder or an allowed
root, at most 256 KiB), so that a bad one is named with its line like every other problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from leaderboard.benchmarks.bundle_files import BundleFileRefused, read_bundle_text
from leaderboard.benchmarks.bundle_yaml import moment

Problem = Callable[[tuple[str | int, ...], str], None]


@dataclass(frozen=True)
class ParticipationSpec:
    terms_file: str
    terms_text: str  # empty: no terms
    registration: str
    verified_email: bool
    allow_domains: tuple[str, ...]
    block_domains: tuple[str, ...]
    invited: tuple[str, ...]  # lower-case
    banned: tuple[str, ...]


@dataclass(frozen=True)
class AnnouncementSpec:
    key: str
    title: str
    body: str
    shows_from: datetime | None  # None: when it is loaded
    shows_until: datetime
    email: bool


@dataclass(frozen=True)
class WebhookSpec:
    url: str


def moments(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """The announcements' moments with their key paths (checked as every moment of a bundle)."""
    return [(("announcements", i, k), a[k]) for i, a in enumerate(data.get("announcements", []))
            for k in ("from", "until") if isinstance(a.get(k), str)]


def _terms_text(problem: Problem, path: Path, name: str) -> str | None:
    try:
        return read_bundle_text(path, name, key="participation.terms")
    except BundleFileRefused as refused:
        problem(("participation", "terms"), refused.reason)
        return None


def check(problem: Problem, data: dict[str, Any], path: Path) -> str:
    """The rules the schema cannot say; returns the terms' text (empty without terms or on a problem)."""

    text: str | None = ""
    part = data.get("participation")
    if part is not None:
        if part.get("terms"):
            text = _terms_text(problem, path, part["terms"])
            if text is not None and not text.strip():
                problem(("participation", "terms"), f"{part['terms']} is empty; expected the terms of use")
        domains = part.get("email_domains", {})
        both = sorted(set(domains.get("allow", [])) & set(domains.get("block", [])))
        if both:
            problem(("participation", "email_domains"), f"{', '.join(both)} both allowed and blocked; expected "
                                                        "each domain in one list")
        people = part.get("invited", [])
        if people and part.get("registration", "open") != "invite":
            problem(("participation", "invited"), "invitations need registration: invite (with open or approval "
                                                  "registration anyone may ask)")
    seen: set[str] = set()
    for i, item in enumerate(data.get("announcements", [])):
        if item["key"] in seen:
            problem(("announcements", i, "key"), f"the key {item['key']!r} is given twice; expected one "
                                                 "announcement per key")
        seen.add(item["key"])
        if item.get("from") and moment(item["until"]) <= moment(item["from"]):
            problem(("announcements", i, "until"), f"expected until after from, but got from {item['from']} "
                                                   f"and until {item['until']}")
    return text or ""


def parse(data: dict[str, Any], terms_text: str) -> tuple[ParticipationSpec | None, tuple[AnnouncementSpec, ...],
                                                          WebhookSpec | None]:
    """The specs of a bundle that passed the schema and ``check``."""

    part = data.get("participation")
    spec = None
    if part is not None:
        domains = part.get("email_domains", {})
        spec = ParticipationSpec(
            terms_file=part.get("terms", ""), terms_text=terms_text, registration=part.get("registration", "open"),
            verified_email=part.get("verified_email", False), allow_domains=tuple(domains.get("allow", [])),
            block_domains=tuple(domains.get("block", [])),
            invited=tuple(p.strip().lower() if "@" in p else p.strip() for p in part.get("invited", [])),
            banned=tuple(p.strip().lower() if "@" in p else p.strip() for p in part.get("banned", [])))
    announcements = tuple(AnnouncementSpec(
        key=a["key"], title=a["title"], body=a["body"], shows_from=moment(a["from"]) if a.get("from") else None,
        shows_until=moment(a["until"]), email=a.get("email", False)) for a in data.get("announcements", []))
    webhook = WebhookSpec(data["webhook"]["url"]) if data.get("webhook") else None
    return spec, announcements, webhook
