"""One paired test per pair of results, every score key at once (was one per pair and metric,
McNemar's for SQA3D's EM); rows no longer store a "tied" mark: pages adjust the p-values they
show together (rankings.paired_tests). The old tests are dropped, not converted: McNemar's
answers are not kept, and each board's pairs are asked again by `manage.py ask_paired_tests`
(or by the next change of its rows)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('rankings', '0006_merge_20261201_1239'),
        ('submissions', '0008_result_intervals'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveField(model_name='leaderboardentry', name='tie_p_value'),
        migrations.RemoveField(model_name='leaderboardentry', name='tied_with'),
        migrations.DeleteModel(name='PairedTest'),
        migrations.CreateModel(
            name='PairedTest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('findings', models.JSONField(blank=True, default=dict)),
                ('resamples', models.PositiveIntegerField(default=0)),
                ('error', models.CharField(blank=True, max_length=200)),
                ('requested_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('computed_at', models.DateTimeField(blank=True, null=True)),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('result_a', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='submissions.result')),
                ('result_b', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='submissions.result')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('result_a', 'result_b'), name='one_paired_test_per_pair')],
                'indexes': [models.Index(fields=['requested_by', 'requested_at'], name='rankings_pa_request_8156fc_idx')],
            },
        ),
    ]
