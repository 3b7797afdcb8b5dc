"""Method details before publishing, outcome e-mails and password reset by e-mail."""

from __future__ import annotations

import io
import json

import pytest

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard.submissions import lifecycle, services


@pytest.fixture
def scored(owner, sqa3d_split, sqa3d_files, sent_tasks):
    submission = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="DescNet",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    submission.refresh_from_db()
    return submission, result


def test_publishing_needs_a_described_method(client, owner, scored, method_details):
    submission, _ = scored
    client.force_login(owner)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "describe DescNet" in page
    response = client.post(f"/submissions/{submission.pk}/publish/", {"publish": "1"}, follow=True)
    assert "missing description, authors, Uses extra training data" in response.content.decode()
    client.post(f"/submissions/methods/{submission.method_id}/",
                {"name": "DescNet", "description": "Depth first.", "authors": "A. Lice", "uses_extra_data": "false",
                 "paper_url": "", "code_url": "", "details": ""})
    client.post(f"/submissions/{submission.pk}/publish/", {"publish": "1"})
    submission.refresh_from_db()
    assert submission.is_published and submission.method.uses_extra_data is False


def test_the_api_changes_only_the_given_fields(client, owner, outsider, scored):
    submission, _ = scored
    url = f"/api/v1/my/methods/{submission.method_id}"
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    body = client.patch(url, json.dumps({"authors": "A. Lice"}), content_type="application/json",
                        headers=headers).json()
    assert body["authors"] == "A. Lice" and body["name"] == "DescNet"
    assert body["missing_for_publishing"] == ["description", "Uses extra training data"]
    bad = client.patch(url, json.dumps({"paper_url": "not a url"}), content_type="application/json", headers=headers)
    assert bad.status_code == 400 and "paper_url" in bad.json()["error"]["message"]
    other = {"Authorization": f"Token {do_create_token(outsider)}"}
    assert client.get(url, headers=other).status_code == 404


def test_the_submitter_gets_an_email_with_aggregate_scores_only(owner, sqa3d_split, sqa3d_files, sent_tasks,
                                                                mailoutbox, django_capture_on_commit_callbacks):
    owner.email = "alice@example.org"
    owner.save()
    submission = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="MailNet",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    [mail] = mailoutbox
    assert mail.to == ["alice@example.org"] and f"EM {result['metrics']['EM']:.4f}" in mail.subject
    assert f"/submissions/{submission.pk}/" in mail.body and "What" not in mail.body

    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.do_enqueue(submission.pk)
        lifecycle.record_failure(submission_id=submission.pk, attempt=2, kind="platform_error", message="Boom.")
    # It had a result, so it stays counted (issue 34): the mail says so, never "does not count".
    assert "failed" in mailoutbox[1].subject and "still counts against your quota" in mailoutbox[1].body


def test_a_password_reset_is_sent_by_email(client, owner, mailoutbox):
    owner.email = "alice@example.org"
    owner.save()
    response = client.post("/accounts/password_reset/", {"email": "alice@example.org"})
    assert response.status_code == 302
    [mail] = mailoutbox
    assert "/accounts/reset/" in mail.body and "alice" in mail.body
