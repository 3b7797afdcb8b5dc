
from django.db import migrations, models

# The repository's bundles declare only synthetic or pending labels, so whatever `manage.py load_demo`
# loaded is the tracks' synthetic demo labels (it names itself as their loader).
DEMO_LOADER = "manage.py load_demo"


def note_active_labels(apps, schema_editor):
    """What each split's active labels are, as ``services.do_note_active_labels`` writes it from now on."""
    from evaluation_workers.tracks import get_track, is_installed

    LabelSet = apps.get_model("benchmarks", "LabelSet")
    Split = apps.get_model("benchmarks", "Split")
    LabelSet.objects.filter(loaded_by=DEMO_LOADER).update(synthetic=True)
    for labels in LabelSet.objects.filter(is_active=True).select_related("split__benchmark"):
        track = labels.split.benchmark.track
        if is_installed(track):
            units, scenes = get_track(track).label_counts(labels.manifest)
        else:
            units, scenes = labels.manifest.get("count"), len(labels.manifest.get("scenes") or ()) or None
        Split.objects.filter(pk=labels.split_id).update(labels_synthetic=labels.synthetic, labels_units=units,
                                                        labels_scenes=scenes, labels_sha256=labels.sha256)


class Migration(migrations.Migration):

    dependencies = [
        ('benchmarks', '0007_track_facts'),
    ]

    operations = [
        migrations.AddField(
            model_name='labelset',
            name='synthetic',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='split',
            name='labels_scenes',
            field=models.PositiveIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='split',
            name='labels_sha256',
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name='split',
            name='labels_synthetic',
            field=models.BooleanField(default=False, editable=False, help_text="The active labels are synthetic or a subset, not the real split's."),
        ),
        migrations.AddField(
            model_name='split',
            name='labels_units',
            field=models.PositiveIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(note_active_labels, migrations.RunPython.noop),
    ]
