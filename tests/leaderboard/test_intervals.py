"""Intervals on the site: stored with the result and the row, shown as ± (a toggle), in the
exports and the method charts (the paired tests between rows: ``test_paired_tests``)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from evaluation_workers.tracks import get_track
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Result
from tests.leaderboard.conftest import describe_method


def publish(owner, sqa3d_files, name: str, flip: int = 0):
    """A scored, published SQA3D submission; ``flip`` answers of the synthetic predictions made wrong."""
    answers = json.loads(sqa3d_files["predictions"].read_text())
    for row in answers[:flip]:
        row["answer"] = "definitely not the answer"
    content = json.dumps(answers).encode()
    submission = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                                  file=io.BytesIO(content), file_name="p.json")
    path = sqa3d_files["labels"].parent / f"{name}.json"
    path.write_bytes(content)
    result = get_track("sqa3d").score(sqa3d_files["labels"], path, lambda f, m="": None)
    lifecycle.record_result(submission_id=submission.pk, attempt=submission.attempt, result=result)
    describe_method(submission.method)
    services.check_publish(owner, submission)
    return LeaderboardEntry.objects.get(method=submission.method), result


@pytest.fixture
def two_rows(owner, sqa3d_split, sqa3d_files, sent_tasks):
    upper, result = publish(owner, sqa3d_files, "Upper")
    lower, _ = publish(owner, sqa3d_files, "Lower", flip=20)
    return upper, lower, result


def test_the_result_and_the_row_hold_the_intervals_of_every_score(two_rows):
    upper, _, result = two_rows
    stored = Result.objects.get(pk=upper.result_id)
    assert stored.intervals == result["intervals"] and stored.bootstrap["resamples"] == 1000
    assert set(upper.intervals) == {k for k, v in result["intervals"].items() if v is not None}
    lo, hi = upper.intervals["EM"]
    assert lo < upper.scores["EM"] < hi


def test_the_leaderboard_shows_plus_minus_only_when_asked_and_never_on_paper_rows(client, two_rows):
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    upper, _, _ = two_rows
    load_bundled_paper_rows("sqa3d")
    plain = client.get("/benchmarks/sqa3d/?split=test").content.decode()
    assert 'class="pm"' not in plain and "Show ±</a>" in plain
    assert 'href="?split=test&amp;metric=EM&amp;sort=EM&amp;ci=1"' in plain  # the toggle is a link: no script
    shown = client.get("/benchmarks/sqa3d/?split=test&ci=1").content.decode()
    lo, hi = upper.intervals["EM"]
    assert f"±{(hi - lo) * 50:.1f}" in shown and f"[{lo * 100:.1f}, {hi * 100:.1f}]" in shown
    assert "Hide ±</a>" in shown
    paper_rows = [chunk for chunk in shown.split("<tr")[1:] if chunk.startswith(' class="paper"')]
    assert paper_rows and not any('class="pm"' in row for row in paper_rows)


def test_exports_carry_the_intervals_and_nothing_for_paper_rows(client, two_rows):
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    upper, _, _ = two_rows
    load_bundled_paper_rows("sqa3d")
    body = client.get("/benchmarks/sqa3d/export.json?split=test").json()
    by_name = {r["method"]: r for r in body["rows"]}
    assert by_name["Upper"]["intervals"]["EM"] == upper.intervals["EM"]
    assert by_name["Upper"]["intervals"]["What/EM_R"] == upper.intervals["What/EM_R"]
    paper = [r for r in body["rows"] + body["apart"] if r["reported_in_paper"]]
    assert paper and all(r["intervals"] == {} for r in paper)
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv?split=test").content.decode())))
    upper_csv = next(r for r in rows if r["method"] == "Upper")
    assert float(upper_csv["EM_lo"]) == upper.intervals["EM"][0]
    assert float(upper_csv["Can/EM_hi"]) == upper.intervals["Can/EM"][1]
    assert all(r["EM_lo"] == "" and r["EM_hi"] == "" for r in rows if r["reported_in_paper"] == "True")


def test_a_stale_export_text_is_rewritten_with_the_intervals(client, two_rows):
    upper, _, _ = two_rows
    LeaderboardEntry.objects.filter(pk=upper.pk).update(export_json="", export_csv="")
    body = client.get("/benchmarks/sqa3d/export.json?split=test").json()
    assert next(r for r in body["rows"] if r["method"] == "Upper")["intervals"]["EM"] == upper.intervals["EM"]


def test_the_method_page_draws_error_bars_and_the_api_returns_the_intervals(client, two_rows):
    upper, _, _ = two_rows
    page = client.get(f"/methods/{upper.method_id}/").content.decode()
    assert page.count('class="error-bar"') == 6  # one per question type
    assert "95 % interval" in page
    api = client.get(f"/api/v1/methods/{upper.method_id}").json()
    assert api["results"][0]["intervals"]["EM"] == upper.intervals["EM"]
    board = client.get("/api/v1/leaderboards/sqa3d?split=test").json()
    assert next(r for r in board["rows"] if r["method"] == "Upper")["intervals"]["EM"] == upper.intervals["EM"]


def test_a_paper_row_page_draws_no_error_bar(client, sqa3d_split):
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    load_bundled_paper_rows("sqa3d")
    entry = LeaderboardEntry.objects.filter(is_paper=True).first()
    page = client.get(f"/entries/{entry.pk}/").content.decode()
    assert "error-bar" not in page and 'class="pm">&nbsp;<' in page


def test_intervals_that_follow_the_score_are_asked_for_its_revision_and_reach_the_result_and_the_row(
        client, owner, sqa3d_split, sqa3d_files, sent_tasks, monkeypatch, django_capture_on_commit_callbacks,
        redis_url):
    """Recording a result whose intervals were deferred asks a worker for them, naming the result and
    its revision; an answer for another revision (the result moved on: i34a's re-score bumps it) is
    dropped, logged and counted, and the result keeps waiting; the answer for the current revision is
    taken once."""
    import redis

    from evaluation_workers import contracts
    from leaderboard.submissions.tasks import record_intervals

    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    with django_capture_on_commit_callbacks(execute=True):
        entry, result = publish(owner, sqa3d_files, "Later")
    assert result["bootstrap"]["deferred"] and entry.intervals == {}
    stored = Result.objects.get(pk=entry.result_id)
    [asked] = [t for t in sent_tasks if t["name"] == contracts.COMPUTE_INTERVALS]
    assert asked["queue"] == f"eval-cpu-sqa3d-v{stored.scorer_version}-bulk"
    assert asked["kwargs"] == {
        "schema": contracts.SCHEMA_VERSION, "submission_id": entry.submission_id, "result_id": stored.pk,
        "revision": stored.revision, "track": "sqa3d", "scorer_version": stored.scorer_version,
        "outcomes_key": contracts.outcomes_key("sqa3d", stored.labels_sha256, stored.predictions_sha256,
                                               stored.scorer_version), "reply_queue": "site"}
    client.force_login(owner)
    assert "being computed after them" in client.get(f"/submissions/{entry.submission_id}/").content.decode()
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "2000000000")
    full = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["labels"].parent / "Later.json",
                                    lambda f, m="": None)
    report = {"submission_id": entry.submission_id, "result_id": stored.pk, "revision": stored.revision,
              "intervals": full["intervals"], "bootstrap": full["bootstrap"]}
    counted = redis.Redis.from_url(redis_url)
    stale_before = int(counted.hget(contracts.refused_key(), f"{contracts.RECORD_INTERVALS}|stale") or 0)
    assert not lifecycle.record_intervals(**{**report, "revision": stored.revision - 1})
    assert Result.objects.get(pk=stored.pk).bootstrap["deferred"], "still waiting for its own"
    assert int(counted.hget(contracts.refused_key(), f"{contracts.RECORD_INTERVALS}|stale")) == stale_before + 1

    # The answer as a worker sends it: a signed message, run by the site task.
    from django.conf import settings

    from evaluation_workers import signing

    record_intervals(**signing.signed(contracts.RECORD_INTERVALS, report, settings.RESULTS_SIGNING_KEYS))
    entry.refresh_from_db()
    assert entry.intervals["EM"] == full["intervals"]["EM"]
    assert Result.objects.get(pk=entry.result_id).bootstrap["resamples"] == 1000
    assert not lifecycle.record_intervals(**report), "only a result still waiting for them takes them"
    page = client.get(f"/submissions/{entry.submission_id}/").content.decode()
    assert "being computed" not in page and 'id="overall-intervals"' in page


def test_a_deferred_result_whose_worker_kept_no_outcomes_says_why_and_nothing_is_asked(
        owner, sqa3d_split, sqa3d_files, sent_tasks, monkeypatch, django_capture_on_commit_callbacks):
    from evaluation_workers import contracts

    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    submission = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="NoKeep",
                                                  file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                                  file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    result["bootstrap"]["unavailable"] = "the per-unit outcomes of this result could not be stored when it was scored"
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.record_result(submission_id=submission.pk, attempt=submission.attempt, result=result)
    stored = Result.objects.get(submission=submission)
    assert "deferred" not in stored.bootstrap and stored.bootstrap["unavailable"].startswith("the per-unit outcomes")
    assert stored.warnings[-1].startswith("No 95 % intervals: they could not be computed after the score (the "
                                          "per-unit outcomes of this result could not be stored")
    assert not [t for t in sent_tasks if t["name"] == contracts.COMPUTE_INTERVALS]


def test_the_home_page_leaders_carry_their_plus_minus(client, two_rows):
    upper, _, _ = two_rows
    upper.refresh_from_db()
    lo, hi = upper.intervals["EM"]
    page = client.get("/").content.decode()
    assert f"±{(hi - lo) * 50:.1f}" in page


def test_intervals_that_did_not_resample_scenes_are_shown_nowhere(client, owner, two_rows):
    """A result scored before the bootstrap resampled scenes (its record says "question") keeps its
    numbers but shows no interval: not on its row (the migration clears rows already written, and a
    refresh writes none), not in the exports, not in the API."""
    import importlib

    from django.apps import apps

    from leaderboard.accounts.services import do_create_token
    from leaderboard.rankings.services import refresh_entry

    upper, lower, _ = two_rows
    assert upper.intervals and Result.objects.get(pk=upper.result_id).bootstrap["unit"] == "scene"
    old = Result.objects.get(pk=upper.result_id)
    Result.objects.filter(pk=old.pk).update(bootstrap={**old.bootstrap, "unit": "question"})
    importlib.import_module("leaderboard.rankings.migrations.0008_hide_intervals_not_by_scene").hide(apps, None)
    upper.refresh_from_db()
    assert upper.intervals == {} and LeaderboardEntry.objects.get(pk=lower.pk).intervals  # by scene: kept
    body = client.get("/benchmarks/sqa3d/export.json?split=test").json()
    assert {r["method"]: r["intervals"] for r in body["rows"]}["Upper"] == {}
    refresh_entry(upper.method, upper.split)
    assert LeaderboardEntry.objects.get(pk=upper.pk).intervals == {}
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    answer = client.get(f"/api/v1/submissions/{upper.submission_id}", headers=headers).json()
    assert answer["result"]["intervals"] == {} and answer["result"]["metrics"] == old.metrics
