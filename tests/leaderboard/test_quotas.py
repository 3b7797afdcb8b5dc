"""Quotas per team and split: per UTC day, in total, in flight; refunds, the rejection cap,
maintainers' overrides, and concurrent requests on PostgreSQL."""

from __future__ import annotations

import io
import re
import threading
from datetime import timedelta

import pytest
import requests
from django.db import connection
from django.utils import timezone

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token, personal_team
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import QuotaOverride, Submission


def create(user, content: bytes, **extra) -> Submission:
    return services.check_create_submission(user=user, track="sqa3d", split="test", method_name="QNet",
                                            file=io.BytesIO(content), file_name="p.json", **extra)


@pytest.fixture
def good(sqa3d_files) -> bytes:
    return sqa3d_files["predictions"].read_bytes()


def test_the_daily_quota_refuses_with_the_reset_time_and_counts_anew_the_next_utc_day(
        owner, sqa3d_split, good, sent_tasks, settings, client):
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 2, 10
    first, _ = create(owner, good), create(owner, good)
    with pytest.raises(services.QuotaExceeded, match=r"2 of 2 submissions today .* resets at \d{4}-\d\d-\d\d 00:00 UTC"):
        create(owner, good)
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    with open(__file__, "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "Q",
                                                        "file": f}, headers=headers)
    assert response.status_code == 429 and "Quota reached" in response.json()["error"]["message"]
    Submission.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(days=1))
    assert create(owner, good).status == "queued"


def test_the_total_and_in_flight_limits(owner, sqa3d_split, sqa3d_files, good, sent_tasks, settings):
    settings.QUOTA_IN_FLIGHT, settings.QUOTA_TOTAL = 1, 2
    first = create(owner, good)
    with pytest.raises(services.QuotaExceeded, match="still uploading or being scored"):
        create(owner, good)
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=first.pk, attempt=1, result=result)
    second = create(owner, good)
    lifecycle.record_result(submission_id=second.pk, attempt=1, result=result)
    with pytest.raises(services.QuotaExceeded, match="2 of 2 submissions in total"):
        create(owner, good)


def test_platform_failures_and_cancellations_are_refunded(owner, sqa3d_split, good, sent_tasks, settings):
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 1, 5
    crashed = create(owner, good)
    lifecycle.record_failure(submission_id=crashed.pk, attempt=1, kind="platform_error", message="worker died")
    cancelled = create(owner, good)
    services.check_cancel(owner, cancelled)
    assert create(owner, good).status == "queued"
    assert set(Submission.objects.values_list("quota", flat=True)) == {"refunded", "counted"}


WORKER_SAYS = "Internal evaluation error. It does not count against your quota; the maintainers have been told."


def test_a_platform_failure_says_what_the_quota_does(client, owner, sqa3d_split, sqa3d_files, good, sent_tasks,
                                                     mailoutbox, settings, django_capture_on_commit_callbacks):
    """Refunded: "does not count against your quota". A re-score of a scored submission stays counted
    (its scores were seen), so nothing (the message, the page, the mail) says it does not count."""
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 5, 5
    owner.email = "alice@example.org"
    owner.save()
    client.force_login(owner)
    never, scored = create(owner, good), create(owner, good)
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=scored.pk, attempt=1, result=result)
    again = lifecycle.do_enqueue(scored.pk)
    with django_capture_on_commit_callbacks(execute=True):
        for submission, attempt in ((never, 1), (scored, again.attempt)):
            lifecycle.record_failure(submission_id=submission.pk, attempt=attempt, kind="platform_error",
                                     message=WORKER_SAYS)
    never.refresh_from_db(), scored.refresh_from_db()
    assert (never.quota, never.status_detail) == ("refunded", WORKER_SAYS)
    assert scored.quota == "counted" and scored.status_detail == (
        "Internal evaluation error. It still counts against your quota, as it was scored before (its earlier "
        "result stays); the maintainers have been told.")
    mails = {int(re.search(r"#(\d+)", m.subject)[1]): m.body for m in mailoutbox if "failed" in m.subject}
    assert "does not count against your quota" in mails[never.pk]
    assert "does not count" not in mails[scored.pk] and "still counts against your quota" in mails[scored.pk]
    assert "does not count" in client.get(f"/submissions/{never.pk}/").content.decode()
    page = client.get(f"/submissions/{scored.pk}/").content.decode()
    assert "does not count" not in page and "still counts against your quota" in page


def test_format_rejections_count_against_their_own_larger_cap(owner, sqa3d_split, good, sent_tasks, settings):
    settings.QUOTA_PER_DAY, settings.QUOTA_REJECTED_PER_DAY = 1, 2
    for _ in range(2):
        assert create(owner, b"not json").quota == "rejected"
    with pytest.raises(services.QuotaExceeded, match="2 files rejected today"):
        create(owner, good)


def test_a_maintainer_override_changes_one_teams_quota(owner, outsider, sqa3d_split, good, sent_tasks, settings):
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 1, 10
    QuotaOverride.objects.create(team=personal_team(owner), split=sqa3d_split, per_day=3)
    for _ in range(3):
        create(owner, good)
    create(outsider, good)
    with pytest.raises(services.QuotaExceeded):
        create(outsider, good)


def test_the_submit_page_and_api_show_the_quota_and_when_it_resets(client, owner, sqa3d_split, good, sent_tasks):
    create(owner, good)
    client.force_login(owner)
    page = client.get("/submissions/new/sqa3d/").content.decode()
    assert "Daily counts reset at" in page and "1 / 5" in page
    body = client.get("/api/v1/quota?track=sqa3d&split=test").json()
    assert body["per_day"] == {"used": 1, "limit": 5} and body["resets_at"].endswith("T00:00:00+00:00")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are what this tests: PostgreSQL only")
@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_cannot_exceed_the_quota(live_server, owner, sqa3d_split, settings):
    """Twelve simultaneous upload starts against a daily quota of 3: exactly 3 get through."""
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 3, 100
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    barrier, statuses = threading.Barrier(12), []

    def start() -> None:
        barrier.wait()
        response = requests.post(f"{live_server.url}/api/v1/uploads", headers=headers, timeout=30,
                                 json={"track": "sqa3d", "split": "test", "method_name": "Race",
                                       "file_name": "p.json", "size": 100})
        statuses.append(response.status_code)

    threads = [threading.Thread(target=start) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201] * 3 + [429] * 9
    assert Submission.objects.filter(team=personal_team(owner)).count() == 3
