"""Server-rendered pages: what each shows, and who may see it."""

from __future__ import annotations

import io

import pytest

from leaderboard.submissions import lifecycle, services
from tests.leaderboard.conftest import describe_method


@pytest.fixture
def finished(owner, sqa3d_split, sqa3d_files, sent_tasks):
    from evaluation_workers.tracks import get_track

    submission = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="PageNet",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    return submission, result


def test_home_lists_the_benchmarks(client, sqa3d_split):
    response = client.get("/")
    assert response.status_code == 200 and b"SQA3D" in response.content


def test_the_leaderboard_has_a_column_per_question_type_and_switches_metric(client, sqa3d_split,
                                                                            django_assert_max_num_queries):
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    load_bundled_paper_rows("sqa3d")
    # 8, one for the reference rows listed apart (issue 27), one for the maintainers' banners (issue 39)
    with django_assert_max_num_queries(10):
        page = client.get("/benchmarks/sqa3d/").content.decode()
    for header in ("Overall", "What", "Is", "How", "Can", "Which", "Others", "reported in paper"):
        assert f">{header}<" in page or header in page
    assert "88.5" in page  # Human (amateur), What, 88.53 %
    em_r = client.get("/benchmarks/sqa3d/?metric=EM_R").content.decode()
    assert 'value="EM_R" selected' in em_r


def test_the_submit_page_requires_sign_in(client, sqa3d_split):
    response = client.get("/submissions/new/sqa3d/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_uploading_on_the_web_form_queues_and_redirects(client, owner, sqa3d_split, sqa3d_files, sent_tasks,
                                                        django_capture_on_commit_callbacks):
    client.force_login(owner)
    with open(sqa3d_files["predictions"], "rb") as f, django_capture_on_commit_callbacks(execute=True):
        response = client.post("/submissions/new/sqa3d/", {"split": "test", "method_name": "WebNet", "file": f})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "WebNet" in page and "queued" in page and len(sent_tasks) == 1


def test_my_submissions_links_a_submit_page_per_active_benchmark(client, owner, sqa3d_split):
    from leaderboard.benchmarks.models import Benchmark

    Benchmark.objects.filter(track="openscan").update(is_active=False)
    client.force_login(owner)
    page = client.get("/submissions/").content.decode()
    assert "<title>My submissions · " in page
    assert 'href="/submissions/new/sqa3d/"' in page and 'href="/submissions/new/mmscan-vg/"' in page
    assert "/submissions/new/openscan/" not in page, "an inactive benchmark takes no submissions"


def test_the_detail_page_shows_aggregate_scores_only(client, owner, finished):
    submission, result = finished
    client.force_login(owner)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert f"{result['metrics']['EM'] * 100:.1f}" in page
    assert "Publish on the leaderboard" in page
    status = client.get(f"/submissions/{submission.pk}/status.json").json()
    assert status["status"] == "finished" and set(status["result"]["details"]) == {"answered", "missing"}


def test_outsiders_get_404_on_a_submission(client, outsider, finished):
    submission, _ = finished
    client.force_login(outsider)
    for url in (f"/submissions/{submission.pk}/", f"/submissions/{submission.pk}/status.json"):
        assert client.get(url).status_code == 404
    assert client.post(f"/submissions/{submission.pk}/publish/").status_code == 404


def test_publish_needs_post(client, owner, finished):
    submission, _ = finished
    client.force_login(owner)
    assert client.get(f"/submissions/{submission.pk}/publish/").status_code == 405
    describe_method(submission.method)
    client.post(f"/submissions/{submission.pk}/publish/", {"publish": "1"})
    page = client.get("/benchmarks/sqa3d/").content.decode()
    assert f'href="/methods/{submission.method_id}/">PageNet</a>' in page


def test_signup_creates_a_user_with_a_personal_team(client, db):
    response = client.post("/accounts/signup/", {"username": "newcomer", "email": "",
                                                 "password1": "a long pass phrase 42",
                                                 "password2": "a long pass phrase 42"})
    assert response.status_code == 302
    from django.contrib.auth.models import User

    assert User.objects.get(username="newcomer").teams.get().is_personal


def test_the_tokens_page_shows_a_new_key_once(client, owner):
    client.force_login(owner)
    page = client.post("/accounts/tokens/", {"name": "ci"}).content.decode()
    assert "lb_" in page and "copy it now" in page
    assert "copy it now" not in client.get("/accounts/tokens/").content.decode()
