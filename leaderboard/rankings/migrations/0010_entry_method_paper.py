from django.db import migrations, models


def fill_method_papers(apps, schema_editor):
    """Paper rows that exist get their method's own paper from the repository's benchmark bundles, and
    the source of their numbers where a bundle now names it (ScanRefer's READMEs)."""
    from leaderboard.benchmarks.bundles import bundled_paper_rows
    from leaderboard.rankings.services import paper_metadata

    LeaderboardEntry = apps.get_model("rankings", "LeaderboardEntry")
    for track, blocks in bundled_paper_rows().items():
        for data in blocks:
            for row in data["rows"]:
                rows = LeaderboardEntry.objects.filter(split__benchmark__track=track, split__name=data["split"],
                                                       is_paper=True, name=row["method"])
                rows.update(method_paper=row.get("method_paper", {}), **paper_metadata(data, row))


class Migration(migrations.Migration):

    dependencies = [
        ('rankings', '0009_entry_is_reference'),
    ]

    operations = [
        migrations.AddField(
            model_name='leaderboardentry',
            name='method_paper',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(fill_method_papers, migrations.RunPython.noop),
    ]
