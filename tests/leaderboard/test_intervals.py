"""Intervals on the site: stored with the result and the row, shown as ± (a toggle), in the
exports and the method charts; paired tests asked of a worker, cached, and the tie marks."""

from __future__ import annotations

import csv
import io
import json

import pytest

from evaluation_workers import contracts
from evaluation_workers.tracks import get_track
from leaderboard.rankings import ties
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.rankings.services import refresh_entry
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
    from leaderboard.rankings.services import do_seed_paper_rows

    upper, _, _ = two_rows
    do_seed_paper_rows("sqa3d")
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
    from leaderboard.rankings.services import do_seed_paper_rows

    upper, _, _ = two_rows
    do_seed_paper_rows("sqa3d")
    body = client.get("/benchmarks/sqa3d/export.json?split=test").json()
    by_name = {r["method"]: r for r in body["rows"]}
    assert by_name["Upper"]["intervals"]["EM"] == upper.intervals["EM"]
    assert by_name["Upper"]["intervals"]["What/EM_R"] == upper.intervals["What/EM_R"]
    paper = [r for r in body["rows"] if r["reported_in_paper"]]
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
    from leaderboard.rankings.services import do_seed_paper_rows

    do_seed_paper_rows("sqa3d")
    entry = LeaderboardEntry.objects.filter(is_paper=True).first()
    page = client.get(f"/entries/{entry.pk}/").content.decode()
    assert "error-bar" not in page and 'class="pm">&nbsp;<' in page


@pytest.fixture
def answer(django_capture_on_commit_callbacks):
    """A worker's answer to a paired test, recorded as the site task records it (cached pages move on)."""
    def record(test: PairedTest, p: float, difference: float = 0.01) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            ties.record_paired_test(test_id=test.pk, test="mcnemar-exact", difference=difference, p_value=p,
                                    interval=[difference - 0.02, difference + 0.02], resamples=1000, error="")
    return record


def test_a_change_of_the_rows_asks_a_worker_for_the_test_of_neighbours_by_keys(two_rows, sent_tasks,
                                                                               django_capture_on_commit_callbacks):
    upper, lower, _ = two_rows
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        ties.do_refresh_ties(upper.split)
    [sent] = [t for t in sent_tasks if t["name"] == contracts.PAIRED_TEST]
    test = PairedTest.objects.get()
    a, b = Result.objects.get(pk=test.result_a_id), Result.objects.get(pk=test.result_b_id)
    assert sent["queue"].endswith("-sqa3d-v1.1.0-bulk")
    assert sent["kwargs"] == {
        "schema": contracts.SCHEMA_VERSION, "test_id": test.pk, "track": "sqa3d", "metric": "EM",
        "outcomes_a": contracts.outcomes_key("sqa3d", a.labels_sha256, a.predictions_sha256, "1.1.0"),
        "outcomes_b": contracts.outcomes_key("sqa3d", b.labels_sha256, b.predictions_sha256, "1.1.0"),
        "reply_queue": "site"}
    with django_capture_on_commit_callbacks(execute=True):
        ties.do_refresh_ties(upper.split)
    assert len([t for t in sent_tasks if t["name"] == contracts.PAIRED_TEST]) == 1, "asked once"


def test_a_row_not_significantly_different_from_the_one_above_is_marked_tied(client, two_rows, answer):
    upper, lower, _ = two_rows
    ties.do_refresh_ties(upper.split)
    test = PairedTest.objects.get()
    assert "tied</span>" not in client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    answer(test, 0.31)
    lower.refresh_from_db()
    assert lower.tied_with_id == upper.pk and lower.tie_p_value == 0.31
    page = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    assert page.count('class="badge tied"') == 1 and "p = 0.310" in page
    ranks = [r["rank"] for r in client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()["rows"]]
    assert ranks == [1, 2], "ranks stay competition ranks"
    # Sorted by another column the rows above are others: no mark.
    assert 'class="badge tied"' not in client.get("/benchmarks/sqa3d/?split=test&paper=0&sort=What/EM").content.decode()


def test_a_significant_difference_leaves_no_mark(two_rows, answer):
    upper, lower, _ = two_rows
    ties.do_refresh_ties(upper.split)
    answer(PairedTest.objects.get(), 0.002)
    lower.refresh_from_db()
    assert lower.tied_with_id is None and lower.tie_p_value == 0.002


def test_the_compare_page_says_pending_then_significant_with_the_interval(client, two_rows, sent_tasks, answer):
    upper, lower, _ = two_rows
    url = f"/benchmarks/sqa3d/compare/?split=test&e={lower.pk}&e={upper.pk}"
    assert "being computed by a scoring worker" in client.get(url).content.decode()
    test = PairedTest.objects.get()
    flipped = test.result_a_id != lower.result_id  # the page asks lower - upper
    answer(test, 0.004, difference=0.05)
    page = client.get(url).content.decode()
    assert "significant" in page and "McNemar, exact" in page and "0.004" in page
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={lower.pk}&e={upper.pk}").json()
    [found] = api["tests"]
    sign = -1 if flipped else 1
    assert found["difference"] == pytest.approx(sign * 0.05) and found["significant"] is True
    assert found["interval"] == pytest.approx(sorted([sign * 0.03, sign * 0.07]))


def test_paper_rows_are_not_tested(client, two_rows):
    from leaderboard.rankings.services import do_seed_paper_rows

    upper, _, _ = two_rows
    do_seed_paper_rows("sqa3d")
    paper = LeaderboardEntry.objects.filter(is_paper=True).first()
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={paper.pk}").json()
    assert api["tests"][0]["status"] == "unavailable" and "paper" in api["tests"][0]["reason"]
    assert not PairedTest.objects.exists()


def test_rows_scored_on_a_public_subset_are_never_tested(client, two_rows, sent_tasks,
                                                         django_capture_on_commit_callbacks):
    """The kept outcomes cover every unit: a test of two public-subset rows would mix the private
    remainder into the public board, so none is asked and compare says why."""
    upper, lower, _ = two_rows
    Result.objects.filter(pk__in=[upper.result_id, lower.result_id]).update(partition="public")
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        ties.do_refresh_ties(upper.split)
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={lower.pk}").json()
    assert api["tests"][0]["status"] == "unavailable" and "public subset" in api["tests"][0]["reason"]
    assert not PairedTest.objects.exists() and not [t for t in sent_tasks if t["name"] == contracts.PAIRED_TEST]


def test_a_withdrawn_row_drops_its_mark(owner, two_rows, answer):
    upper, lower, _ = two_rows
    ties.do_refresh_ties(upper.split)
    answer(PairedTest.objects.get(), 0.5)
    services.check_publish(owner, upper.submission, publish=False)
    refresh_entry(lower.method, lower.split)
    ties.do_refresh_ties(lower.split)
    lower.refresh_from_db()
    assert lower.tied_with_id is None


def test_intervals_that_follow_the_score_reach_the_result_and_the_row(client, owner, sqa3d_split, sqa3d_files,
                                                                      sent_tasks, monkeypatch):
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    entry, result = publish(owner, sqa3d_files, "Later")
    assert result["bootstrap"]["deferred"] and entry.intervals == {}
    client.force_login(owner)
    assert "being computed after them" in client.get(f"/submissions/{entry.submission_id}/").content.decode()
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "2000000000")
    full = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["labels"].parent / "Later.json",
                                    lambda f, m="": None)
    report = {"submission_id": entry.submission_id, "scorer_version": "1.1.0", "intervals": full["intervals"],
              "bootstrap": full["bootstrap"]}
    assert lifecycle.record_intervals(**report)
    entry.refresh_from_db()
    assert entry.intervals["EM"] == full["intervals"]["EM"]
    assert Result.objects.get(pk=entry.result_id).bootstrap["resamples"] == 1000
    assert not lifecycle.record_intervals(**report), "only a result still waiting for them takes them"
    page = client.get(f"/submissions/{entry.submission_id}/").content.decode()
    assert "being computed" not in page and 'id="overall-intervals"' in page


def test_the_home_page_leaders_carry_their_plus_minus(client, two_rows):
    upper, _, _ = two_rows
    upper.refresh_from_db()
    lo, hi = upper.intervals["EM"]
    page = client.get("/").content.decode()
    assert f"±{(hi - lo) * 50:.1f}" in page
