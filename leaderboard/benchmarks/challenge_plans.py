"""What loading a bundle changes of its challenges (``bundle_apply.plan`` calls ``plan_challenges``).

A challenge and its phases are rows of their own (``models.Challenge``, ``models.Phase``); their
dates and rules are their splits', which ``bundle_apply`` plans as it plans every split field. A
challenge the bundle no longer declares goes, unless its board was archived: an archive is
permanent, and so is the challenge it belongs to. An archived challenge's phases are what its
archive was taken of, so a bundle that changes them is refused (``archived_refusal``): a new round
is a new challenge.
"""

from __future__ import annotations

from typing import Any

from leaderboard.benchmarks.bundle_challenges import ChallengeSpec
from leaderboard.benchmarks.bundle_files import BundleError
from leaderboard.benchmarks.models import Benchmark, Challenge, Phase, Split
from leaderboard.benchmarks.phases import challenge_of
from leaderboard.rankings.models import ChallengeArchive

CHALLENGE_FIELDS = ("title", "description", "top", "post_challenge", "order")


def _wanted(spec: ChallengeSpec, order: int) -> dict[str, Any]:
    return {"title": spec.title, "description": spec.description, "top": spec.top,
            "post_challenge": spec.post_challenge, "order": order}


def _write(track: str, spec: ChallengeSpec, order: int) -> None:
    """Create or update one challenge and make its phases exactly the declared ones."""
    benchmark = Benchmark.objects.get(track=track)
    challenge, _ = Challenge.objects.update_or_create(benchmark=benchmark, name=spec.name,
                                                      defaults=_wanted(spec, order))
    splits = {s.name: s for s in benchmark.splits.all()}
    # A split moving between phases: free it first (a split is the split of one phase).
    Phase.objects.filter(split__in=[splits[p.split] for p in spec.phases]).exclude(challenge=challenge).delete()
    challenge.phases.exclude(name__in=[p.name for p in spec.phases]).delete()
    for i, phase in enumerate(spec.phases):
        Phase.objects.filter(challenge=challenge, name=phase.name).exclude(split=splits[phase.split]).delete()
        Phase.objects.update_or_create(challenge=challenge, name=phase.name,
                                       defaults={"order": i, "title": phase.title, "split": splits[phase.split]})


def _phases_of(challenge: Challenge) -> list[tuple[str, str, str]]:
    return [(p.name, p.title, p.split.name) for p in challenge.phases.select_related("split").order_by("order")]


def plan_challenges(plan: Any, benchmark: Benchmark | None) -> None:
    """Add to ``plan`` (a ``bundle_apply.Plan``) each challenge created, changed or removed."""
    b = plan.bundle
    have = {c.name: c for c in Challenge.objects.filter(benchmark=benchmark)} if benchmark else {}
    archived = _archived(list(have.values()))
    for order, spec in enumerate(b.challenges):
        phases = [(p.name, p.title, p.split) for p in spec.phases]
        old = have.get(spec.name)
        if old is None:
            plan.change(f"benchmark {b.track}: add challenge {spec.name} ({spec.title}): "
                        + ", ".join(f"{p.name} on {p.split}" for p in spec.phases),
                        lambda ctx, spec=spec, order=order: _write(b.track, spec, order))
            continue
        changed = [k for k, v in _wanted(spec, order).items() if getattr(old, k) != v]
        if _phases_of(old) != phases:
            if old.pk in archived:
                raise BundleError([f"{b.path.name}: challenges: {spec.name!r} was archived; its phases cannot "
                                   "change (declare a new challenge for a new round)"])
            changed.append("phases")
        if changed:
            plan.change(f"benchmark {b.track}: challenge {spec.name}: {', '.join(changed)} changed",
                        lambda ctx, spec=spec, order=order: _write(b.track, spec, order))
    declared = {c.name for c in b.challenges}
    for name, old in have.items():
        if name not in declared and old.pk not in archived:
            plan.change(f"benchmark {b.track}: remove challenge {name} (not in the bundle; never archived)",
                        lambda ctx, pk=old.pk: Challenge.objects.filter(pk=pk).delete())


def _archived(challenges: list[Challenge]) -> set[int]:
    """The ids of those of ``challenges`` whose board was archived."""
    return set(ChallengeArchive.objects.filter(challenge__in=challenges).values_list("challenge_id", flat=True))


# A split's fields that make its phase: none of them changes once its challenge's board is archived.
PHASE_FIELDS = frozenset({"starts_at", "freeze_at", "deadline", "reveal_at_deadline", "board_hidden"})


def archived_refusal(split: Split, changed: set[str]) -> str | None:
    """Why the dates of ``split`` may not change (the board of its challenge was archived), or None.

    Asked by every way of changing them: a bundle (``bundle_apply``), the desk's schedule
    (``moderation.services.check_set_phases``) and the admin's split form (``benchmarks.admin``)."""
    changed = set(changed) & PHASE_FIELDS
    phase = challenge_of(split) if changed else None
    if phase is None or phase.challenge_id not in _archived([phase.challenge]):
        return None
    return (f"split {split} is a phase of {phase.challenge.name!r}, whose board was archived; its "
            f"{', '.join(sorted(changed))} cannot change (declare a new challenge for a new round)")
