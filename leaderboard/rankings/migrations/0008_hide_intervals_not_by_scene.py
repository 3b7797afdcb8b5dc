"""Rows whose result's intervals resampled questions or prompts show none (issue 25).

Those intervals treated units of one scene as independent and claimed more
certainty than there is (57-60 % coverage where 95 % was promised). Scorer
1.2.0 resamples scenes; re-scoring a split (the moderation desk's bulk
re-score) gives its rows intervals again. The result rows keep what they
recorded; ``Result.scene_intervals`` hides it from pages and the API.
"""

from django.db import migrations


def hide(apps, schema_editor):
    entry = apps.get_model("rankings", "LeaderboardEntry")
    stale = [e.pk for e in entry.objects.exclude(intervals={}).select_related("result")
             if e.result is None or (e.result.bootstrap or {}).get("unit") != "scene"]
    # Empty export texts are stale: the next export writes them again, without the intervals.
    entry.objects.filter(pk__in=stale).update(intervals={}, export_json="", export_csv="")


class Migration(migrations.Migration):
    dependencies = [
        ("rankings", "0007_paired_tests_per_pair"),
        ("submissions", "0009_merge_20261201_1239"),
    ]

    operations = [migrations.RunPython(hide, migrations.RunPython.noop)]
