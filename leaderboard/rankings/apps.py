from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


def _track_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    from leaderboard.benchmarks.models import Benchmark, LabelSet
    from leaderboard.lib.pagecache import bump

    if isinstance(instance, LabelSet):
        instance = instance.split
    bump((instance if isinstance(instance, Benchmark) else instance.benchmark).track)


def _method_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    from leaderboard.lib.pagecache import bump

    # Its page (its leaderboard rows are copies, rewritten by refresh_entry). A new
    # method has no page yet: uploads create them, and need not empty the cache.
    if not created:
        bump()


class RankingsConfig(AppConfig):
    name = "leaderboard.rankings"

    def ready(self) -> None:
        from leaderboard.benchmarks.models import Benchmark, LabelSet, Split
        from leaderboard.submissions.models import Method

        # Writes that change cached pages without going through rankings.services:
        # benchmarks and splits (sync, admin: titles, splits, embargo dates), labels
        # (activated in the admin: manifests, format pages) and method details edited by their owners.
        for model in (Benchmark, Split, LabelSet):
            post_save.connect(_track_changed, sender=model, dispatch_uid=f"pagecache-{model.__name__}")
            post_delete.connect(_track_changed, sender=model, dispatch_uid=f"pagecache-del-{model.__name__}")
        post_save.connect(_method_changed, sender=Method, dispatch_uid="pagecache-Method")
