"""A challenge phase's rule on publishing (``Split.max_published_per_team``): how many rows a team may
have on the phase's board. ``services.check_publish`` refuses beyond it (``PublishLimit``)."""

from __future__ import annotations

from leaderboard.benchmarks import phases
from leaderboard.submissions.models import Submission


def publish_limit_refusal(submission: Submission) -> str | None:
    """Why publishing ``submission`` would give its team more rows on its split than the challenge phase
    allows (``Split.max_published_per_team``), or None. Replacing its own method's row adds none; after
    the challenge the phase's rule no longer holds (its final board is archived)."""
    split, limit = submission.split, submission.split.max_published_per_team
    if not limit or phases.is_after_challenge(split):
        return None
    others = sorted(Submission.objects.filter(split=split, team=submission.team, is_published=True)
                    .exclude(method_id=submission.method_id).values_list("method__name", flat=True))
    if len(others) < limit:
        return None
    return (f"{submission.team.name} may have at most {limit} published row{'s' * (limit != 1)} on {split}, the "
            f"rule of its challenge phase, and has {len(others)}: {', '.join(others)}. Withdraw one first, or "
            f"submit under one of those methods.")
