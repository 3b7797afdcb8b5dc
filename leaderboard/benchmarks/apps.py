from django.apps import AppConfig
from django.db.models.signals import post_migrate


def record_track_facts(sender, using="default", **kwargs) -> None:
    """Every benchmark of an installed track records what its board needs (``Benchmark.track_facts``)."""
    from leaderboard.benchmarks.models import Benchmark

    for benchmark in Benchmark.objects.using(using).all():
        if benchmark.track_installed:
            benchmark.save(using=using, update_fields=["track_facts"])


class BenchmarksConfig(AppConfig):
    name = "leaderboard.benchmarks"

    def ready(self) -> None:
        post_migrate.connect(record_track_facts, sender=self)
