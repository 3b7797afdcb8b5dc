"""Paired tests whose p-value came from the paired bootstrap are forgotten (issue 34).

That p called two equally good methods different 18 % of the time on 4 scenes
and about 8 % on 8-20; a scene-level permutation test decides now, and no test
is run on fewer scenes than the intervals' minimum. A forgotten pair is asked
again at the next change of its split, or at once with
``manage.py ask_paired_tests`` (deploy/README.md).
"""

from django.db import migrations

BOOTSTRAP = "paired-bootstrap-by-scene"


def forget(apps, schema_editor):
    test = apps.get_model("rankings", "PairedTest")
    decided_by_bootstrap = [pk for pk, findings in test.objects.exclude(findings={}).values_list("pk", "findings")
                            if any(isinstance(f, dict) and f.get("test") == BOOTSTRAP for f in findings.values())]
    test.objects.filter(pk__in=decided_by_bootstrap).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("rankings", "0012_method_fields_and_challenge_archives"),
    ]

    operations = [migrations.RunPython(forget, migrations.RunPython.noop)]
