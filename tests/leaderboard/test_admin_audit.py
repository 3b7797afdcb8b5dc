"""What a superuser deletes or edits in /admin/ behind the public pages is in the audit log (issue 26)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks, load_bundled_paper_rows
from leaderboard.benchmarks.models import Benchmark
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import services
from leaderboard.submissions.models import Method, Submission
from tests.leaderboard.conftest import scored_submission


@pytest.fixture
def root(db, django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="x"))
    return client


@pytest.fixture
def published(owner, sqa3d_split, sqa3d_files, sent_tasks, django_capture_on_commit_callbacks) -> Submission:
    """A scored, published submission of the method AuditNet (a public board row), beside the paper rows."""
    submission = scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "AuditNet")
    with django_capture_on_commit_callbacks(execute=True):
        services.check_publish(owner, submission)
    return submission


def test_deleting_a_public_row_is_audited(root, published):
    row = LeaderboardEntry.objects.get(submission=published)
    assert root.post(f"/admin/rankings/leaderboardentry/{row.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not LeaderboardEntry.objects.filter(pk=row.pk).exists()
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ADMIN_DELETE)
    assert (entry.actor_name, entry.track, entry.split, entry.submission_id) == ("root", "sqa3d", "test", published.pk)
    assert "AuditNet" in entry.target and entry.details["model"] == "rankings.leaderboardentry"
    assert entry.details["board_rows_deleted"] == 1


def test_the_bulk_delete_action_audits_every_row(root, published):
    rows = list(LeaderboardEntry.objects.filter(split=published.split).values_list("pk", flat=True))
    assert len(rows) > 1
    response = root.post("/admin/rankings/leaderboardentry/", {"action": "delete_selected", "_selected_action": rows,
                                                               "post": "yes"})
    assert response.status_code == 302 and not LeaderboardEntry.objects.filter(pk__in=rows).exists()
    audited = AuditEntry.objects.filter(action=AuditEntry.Action.ADMIN_DELETE)
    assert sorted(e.details["pk"] for e in audited) == sorted(rows)


def test_deleting_a_method_names_the_rows_that_go_with_it(root, published):
    method = published.method
    assert root.post(f"/admin/submissions/method/{method.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Method.objects.filter(pk=method.pk).exists()
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ADMIN_DELETE)
    assert (entry.track, entry.split) == ("sqa3d", "test") and entry.details["board_rows_deleted"] == 1


def test_editing_a_rows_score_is_audited_with_the_fields_not_the_values(root, published):
    """A paper row's (a scored row is read-only here: ``test_board_rows``)."""
    row = LeaderboardEntry.objects.filter(split=published.split, is_paper=True).first()
    page = root.get(f"/admin/rankings/leaderboardentry/{row.pk}/change/")
    form = {k: json.dumps(v) if isinstance(v, dict | list) else v
            for k, v in page.context["adminform"].form.initial.items() if v is not None}
    form.update({"split": row.split_id, "scores": '{"EM": 0.99}', "intervals": "{}",
                 "primary_score": "0.99", "published_at_0": row.published_at.date().isoformat(),
                 "published_at_1": row.published_at.time().strftime("%H:%M:%S")})
    response = root.post(f"/admin/rankings/leaderboardentry/{row.pk}/change/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ADMIN_CHANGE)
    assert {"primary_score", "scores"} <= set(entry.details["fields"]) and "0.99" not in str(entry.details)


def test_deleting_a_split_in_its_benchmarks_form_is_audited(root):
    """A split goes with its paper rows (a split with submissions is protected)."""
    load_bundled_benchmarks()
    load_bundled_paper_rows("mmscan-vg")
    benchmark = Benchmark.objects.get(track="mmscan-vg")
    doomed = LeaderboardEntry.objects.filter(split__benchmark=benchmark).first().split
    page = root.get(f"/admin/benchmarks/benchmark/{benchmark.pk}/change/")
    data = {k: v for k, v in page.context["adminform"].form.initial.items() if v is not None}
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        data.update({formset.management_form.add_prefix(k): v for k, v in formset.management_form.initial.items()})
        for form in formset.forms:
            data.update({form.add_prefix(k): v for k, v in form.initial.items() if v is not None})
            data[form.add_prefix("id")], data[form.add_prefix("benchmark")] = form.instance.pk, benchmark.pk
            if form.instance.pk == doomed.pk:
                data[form.add_prefix("DELETE")] = "on"
    response = root.post(f"/admin/benchmarks/benchmark/{benchmark.pk}/change/", data)
    assert response.status_code == 302
    entry = AuditEntry.objects.get(action=AuditEntry.Action.ADMIN_DELETE)
    assert (entry.track, entry.split, entry.details["model"]) == ("mmscan-vg", doomed.name, "benchmarks.split")
    assert entry.details["board_rows_deleted"] >= 1


def test_the_desk_shows_the_admins_delete(root, published):
    row = LeaderboardEntry.objects.get(submission=published)
    root.post(f"/admin/rankings/leaderboardentry/{row.pk}/delete/", {"post": "yes"})
    page = root.get("/moderation/audit/").content.decode()
    assert "admin_delete" in page.lower() or "admin delete" in page.lower()
