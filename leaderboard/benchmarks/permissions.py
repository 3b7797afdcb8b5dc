"""Who maintains what: Django staff maintain every track; members of the group
``maintainers:<track>`` maintain that track."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark, Split


def maintainer_group(track: str) -> str:
    return f"maintainers:{track}"


def is_maintainer(user: Any, benchmark: Benchmark | None = None) -> bool:
    if not user.is_authenticated:
        return False
    if user.is_staff:
        return True
    groups = user.groups.filter(name__startswith="maintainers:")
    if benchmark is not None:
        groups = groups.filter(name=maintainer_group(benchmark.track))
    return groups.exists()


def results_embargoed(split: Split, user: Any) -> bool:
    """Whether scored results on ``split`` are still hidden from ``user`` (not from maintainers)."""
    after = split.results_visible_after
    return bool(after and timezone.now() < after and not is_maintainer(user, split.benchmark))
