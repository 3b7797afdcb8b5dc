"""Challenge phases of a split, read from its optional dates.

    upcoming ──starts_at──▶ open ──freeze_at──▶ frozen ──deadline──▶ revealed
                                                          (or closed, until a maintainer reveals)

- **upcoming**: before ``starts_at``; no submission is accepted.
- **open**: submissions are accepted; the board shows what is published.
- **frozen**: from ``freeze_at``; no new submission is accepted and the public
  board stops changing: rows published or re-scored from then on are held back
  until the reveal (``rankings.services.refresh_entry``). Maintainers see the
  live board on the moderation desk.
- **closed**: the deadline passed but the board is not revealed yet (the split
  is revealed by a maintainer, ``reveal_at_deadline`` off); it stays as frozen.
- **revealed**: at the deadline (``reveal_at_deadline``) or by a maintainer
  (``revealed_at``): the board shows everything, with the private scores where
  the labels hold a partition. Submissions are refused unless a maintainer
  reopened the split.

**A challenge's phase** (``models.Phase``) is a split with these dates and two more rules:
``board_hidden`` (the board shows no new row until the deadline: ``board_is_held`` holds rows
published or re-scored while it is open, as the freeze does, and the reveal at the deadline shows
them) and ``max_published_per_team`` (``submissions.services`` refuses a team's row beyond it).
When the challenge's last phase ends its board is archived (``rankings.archive``); a challenge that
goes on after it gives each of its splits ``post_challenge_from``, and they are then **after** the
challenge: open to submissions again, the selection free again (the archive holds the final one),
the rows sent since marked "after the challenge".

A split without any of the dates is open for ever; if its labels hold a
partition, only the public subset's scores show until a maintainer reveals
it. ``accepting_submissions`` is the maintainers' separate pause switch.
Whatever its phase, a split takes submissions only once its labels are loaded
(``labels_refusal``): without them nothing could score a file, so until then
the form, the API, ``lb`` and the board list it as not open yet, and it opens
by itself when a maintainer loads them (``manage.py load_labels``).

**The final selection is locked** from the freeze on (frozen, closed,
revealed), or, on a partitioned split without dates, from the maintainers'
reveal (``selection_locked_since``): publishing, withdrawing or republishing
cannot change which submissions represent a team on the split, so what was
published at the freeze is what is revealed, and nobody picks their entry
after seeing the private scores. One exception, open until the reveal while
the private scores are still hidden (``late_publishing_open``): a submission
sent before the freeze that finished scoring after it may still be published,
as if it had finished in time. The rule is enforced by refusing every other
change (``submissions.services.selection_refusal``), not by a snapshot: from
the freeze on nothing else writes ``is_published``, so the selection at the
freeze *is* the selection now, less what the exception added and what a
maintainer changed on a team's behalf (audited). Moving the freeze later
lifts the lock again; moving it earlier does not undo changes made meanwhile.
Reopening a split after its deadline accepts submissions for scoring only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

UPCOMING, OPEN, FROZEN, CLOSED, REVEALED, AFTER = "upcoming", "open", "frozen", "closed", "revealed", "after"
# What every page, API answer and ``lb`` says of a split whose labels are not loaded.
NOT_OPEN, LABELS_PENDING = "not open yet", "labels not loaded yet: opens when they are"
PHASES = (UPCOMING, OPEN, FROZEN, CLOSED, REVEALED, AFTER)
LABELS = {UPCOMING: "Upcoming", OPEN: "Open", FROZEN: "Frozen", CLOSED: "Closed", REVEALED: "Revealed",
          AFTER: "After the challenge"}


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


def is_challenge(split: Any) -> bool:
    return bool(split.starts_at or split.freeze_at or split.deadline)


def is_after_challenge(split: Any, now: datetime | None = None) -> bool:
    """Whether ``split`` is a post-challenge board: its challenge ended and was archived."""
    after = getattr(split, "post_challenge_from", None)
    return after is not None and _now(now) >= after


def phase_of(split: Any, now: datetime | None = None) -> str:
    now = _now(now)
    if is_after_challenge(split, now):
        return AFTER
    if split.starts_at and now < split.starts_at:
        return UPCOMING
    if split.revealed_at is not None:
        return REVEALED
    if split.deadline and now >= split.deadline:
        return REVEALED if split.reveal_at_deadline else CLOSED
    if split.freeze_at and now >= split.freeze_at:
        return FROZEN
    return OPEN


def is_revealed(split: Any, now: datetime | None = None) -> bool:
    """Whether the full board is public: revealed by a maintainer, or past the deadline (``reveal_at_deadline``).

    Private-partition results stay hidden, from their owners too, until then.
    """
    return phase_of(split, now) in {REVEALED, AFTER}


def board_is_held(split: Any, now: datetime | None = None) -> bool:
    """Whether public rows must not change now (frozen, closed before the reveal, or open with its board
    hidden until the deadline)."""
    phase = phase_of(split, now)
    return phase in {FROZEN, CLOSED} or (phase == OPEN and bool(getattr(split, "board_hidden", False)))


def shown_partitions(split: Any, now: datetime | None = None) -> tuple[str, ...]:
    """The result partitions the public may see: the public subset until the reveal, then the private part.

    "" is a result over every unit (labels without a partition).
    """
    return ("", "private") if is_revealed(split, now) else ("", "public")


def in_utc(moment: datetime) -> str:
    """``2026-12-31 23:59 UTC``: a moment as refusals and notes say it."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def selection_locked_since(split: Any, now: datetime | None = None) -> datetime | None:
    """When the teams' selection on ``split`` became final, or None while it may change.

    The freeze (or, without one, the deadline; or the maintainers' reveal if it came first). A
    split that is no challenge (no dates) locks only when its labels hold a partition and a
    maintainer reveals it: revealing a plain split changes nothing anyone sees.
    """
    now = _now(now)
    if phase_of(split, now) not in {FROZEN, CLOSED, REVEALED}:  # after the challenge: the archive holds it
        return None
    if not is_challenge(split) and not split.has_partition:
        return None
    passed = [m for m in (split.freeze_at, split.deadline, split.revealed_at) if m is not None and m <= now]
    return min(passed, default=split.revealed_at)


def lock_cause(split: Any, since: datetime) -> str:
    """What locked the selection at ``since``: ``the freeze``, ``the deadline`` or ``the maintainers revealed it``."""
    if since == split.freeze_at:
        return "the freeze"
    if since == split.deadline:
        return "the deadline"
    return "the maintainers revealed it"


def late_publishing_open(split: Any, now: datetime | None = None) -> bool:
    """Whether a submission sent before the lock that finished scoring after it may still be published:
    from the lock until the reveal, while the private scores are still hidden."""
    return selection_locked_since(split, now) is not None and not is_revealed(split, now)


def selection_note(split: Any, now: datetime | None = None) -> str:
    """What the leaderboard's phase note says of the lock; "" while the selection may change."""
    now = _now(now)
    since = selection_locked_since(split, now)
    if since is None:
        return ""
    cause = lock_cause(split, since)
    note = (f"Each team's selection is final since {cause}, {in_utc(since)}: publishing or withdrawing cannot "
            "change which submissions represent it")
    if late_publishing_open(split, now):
        return note + (f"; only a submission sent before {cause} that finished scoring after it may still be "
                       "published until the reveal.")
    return note + "."


def refusal(split: Any, now: datetime | None = None) -> str | None:
    """Why ``split`` accepts no submission now (its phase), or None when it accepts them."""
    now = _now(now)
    phase = phase_of(split, now)
    if phase == UPCOMING:
        return f"{split} opens for submissions at {in_utc(split.starts_at)} (in {_left(split.starts_at, now)})."
    if phase == FROZEN:
        end = f" until the deadline at {in_utc(split.deadline)}" if split.deadline else ""
        return f"{split} is frozen since {in_utc(split.freeze_at)}: no new submission is accepted{end}."
    if phase in {CLOSED, REVEALED} and is_challenge(split) and not split.reopened:
        if split.deadline and now >= split.deadline:
            return f"{split} closed at its deadline, {in_utc(split.deadline)}; no submission is accepted."
        if split.revealed_at:
            return f"{split} was revealed at {in_utc(split.revealed_at)}; no submission is accepted."
    return None


def labels_refusal(split: Any) -> str | None:
    """Why ``split`` takes no submission for want of labels (``LABELS_PENDING``), or None once they are loaded."""
    return None if split.labels_loaded else f"{split} is {NOT_OPEN} ({LABELS_PENDING})."


def pause_refusal(split: Any) -> str | None:
    """Why ``split`` takes no submission because the maintainers paused it (or its track's package
    is not installed), or None."""
    if not split.benchmark.track_installed:
        return (f"{split} is not accepting submissions: its track {split.benchmark.track!r} is not installed "
                "on this site.")
    return None if split.accepting_submissions else f"{split} is not accepting submissions."


def submission_refusal(split: Any, now: datetime | None = None) -> str | None:
    """Why ``split`` takes no submission now (paused, no labels, its phase), or None when it takes them.

    The first reason in the order ``submissions.services.resolve_request`` checks them, in its words.
    """
    return pause_refusal(split) or labels_refusal(split) or refusal(split, now)


def _left(moment: datetime, now: datetime) -> str:
    """``2 days 3 h``, ``3 h 20 min``, ``5 min``: the time until ``moment``."""
    seconds = max(0, int((moment - now).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = max(1, rest // 60) if not (days or hours) else rest // 60
    if days:
        return f"{days} day{'s' if days != 1 else ''} {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


def next_change(split: Any, now: datetime | None = None) -> tuple[str, datetime] | None:
    """The next scheduled phase and when it starts; None when nothing more is scheduled."""
    now = _now(now)
    phase = phase_of(split, now)
    if phase == AFTER:
        return None
    steps = []
    if split.starts_at:
        steps.append((split.starts_at, OPEN))
    if split.freeze_at:
        steps.append((split.freeze_at, FROZEN))
    if split.deadline:
        steps.append((split.deadline, REVEALED if split.reveal_at_deadline else CLOSED))
    for moment, following in sorted(steps, key=lambda s: s[0]):
        if moment > now and following != phase and phase != REVEALED:
            return following, moment
    return None


def phase_json(split: Any, now: datetime | None = None) -> dict[str, Any]:
    """The phase fields of the API's split and leaderboard payloads."""
    now = _now(now)
    following = next_change(split, now)
    refused = submission_refusal(split, now)
    iso = lambda d: d.isoformat() if d else None  # noqa: E731
    return {"phase": phase_of(split, now), "starts_at": iso(split.starts_at), "freeze_at": iso(split.freeze_at),
            "deadline": iso(split.deadline), "reveal": "deadline" if split.reveal_at_deadline else "maintainer",
            "revealed_at": iso(split.revealed_at), "reopened": split.reopened,
            "next_phase": following[0] if following else None,
            "next_phase_at": iso(following[1]) if following else None,
            "seconds_to_next_phase": int((following[1] - now).total_seconds()) if following else None,
            "labels_loaded": split.labels_loaded, "accepting_submissions": refused is None,
            "refusal": refused, "board": "hidden" if getattr(split, "board_hidden", False) else "live",
            "max_published_per_team": getattr(split, "max_published_per_team", None),
            "post_challenge_from": iso(getattr(split, "post_challenge_from", None)),
            "challenge": challenge_json(split)}


def challenge_of(split: Any) -> Any:
    """The challenge phase ``split`` is (a ``models.Phase``), or None."""
    try:
        return split.challenge_phase
    except Exception:  # noqa: BLE001 -- RelatedObjectDoesNotExist: no phase; an unsaved split neither
        return None


def challenge_json(split: Any) -> dict[str, Any] | None:
    """Which challenge and phase ``split`` is, for the API: ``{"name", "title", "phase", "phase_title"}``."""
    phase = challenge_of(split)
    if phase is None:
        return None
    return {"name": phase.challenge.name, "title": phase.challenge.title, "phase": phase.name,
            "phase_title": phase.title}


def describe(split: Any, now: datetime | None = None) -> dict[str, Any]:
    """What the leaderboard page says of the phase: label, next change and the time left to it.

    ``accepting``: whether the split takes submissions now; ``not_open``: ``LABELS_PENDING`` while its
    labels are not loaded ("" after), the words ``templates/submissions/_split_open_note.html`` shows.
    """
    now = _now(now)
    following = next_change(split, now)
    return {"accepting": submission_refusal(split, now) is None,
            "not_open": "" if split.labels_loaded else LABELS_PENDING,
            "phase": phase_of(split, now), "label": LABELS[phase_of(split, now)], "challenge": is_challenge(split),
            "next": LABELS[following[0]] if following else "", "next_at": following[1] if following else None,
            "left": _left(following[1], now) if following else "", "refusal": refusal(split, now),
            "selection": selection_note(split, now), "hidden": board_is_held(split, now) and phase_of(split, now) == OPEN,
            "after": phase_of(split, now) == AFTER, "phase_of_challenge": challenge_of(split)}
