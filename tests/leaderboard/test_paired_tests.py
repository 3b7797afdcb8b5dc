"""Paired tests on the site: asked of a worker when results change (never by a page read of a
visitor), a signed-in user's compare page bounded per hour, and what the pages, the API and the
exports say: "no significant difference (p = ...)", Holm-adjusted over a named set, on every view."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from evaluation_workers import contracts
from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks, load_bundled_paper_rows
from leaderboard.rankings import paired_tests, paired_verdicts
from leaderboard.rankings.models import LeaderboardEntry, PairedTest, export_columns
from leaderboard.rankings.selectors import LeaderboardView, leaderboard_page
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Method, Result
from tests.leaderboard.test_intervals import publish

KEYS = export_columns(get_track("sqa3d"))


def findings(p: float = 0.5, difference: float = 0.01, **p_by_key: float) -> dict[str, Any]:
    """A worker's findings for every SQA3D key: ``p`` unless ``p_by_key`` (``What_EM`` for What/EM) says."""
    chosen = {k.replace("_EM", "/EM"): v for k, v in p_by_key.items()}
    return {key: {"test": "paired-permutation-by-scene", "difference": difference, "p_value": chosen.get(key, p),
                  "interval": [difference - 0.02, difference + 0.02], "permutations": 999, "exact": False,
                  "scenes": 67, "min_scenes": 20} for key in KEYS}


@pytest.fixture
def answer(django_capture_on_commit_callbacks):
    """A worker's answer to a paired test, recorded as the site task records it (cached pages move on)."""
    def record(test: PairedTest, found: dict[str, Any] | None = None, error: str = "") -> None:
        a, b = Result.objects.get(pk=test.result_a_id), Result.objects.get(pk=test.result_b_id)
        with django_capture_on_commit_callbacks(execute=True):
            paired_tests.record_paired_test(test_id=test.pk, revision_a=a.revision, revision_b=b.revision,
                                            findings=findings() if found is None else found, resamples=1000,
                                            error=error)
    return record


@pytest.fixture
def published(owner, sqa3d_split, sqa3d_files, sent_tasks, django_capture_on_commit_callbacks):
    """Publish scored SQA3D methods as the site does (the changes commit); ``flip`` answers made wrong."""
    def make(name: str, flip: int = 0) -> LeaderboardEntry:
        with django_capture_on_commit_callbacks(execute=True):
            entry, _ = publish(owner, sqa3d_files, name, flip=flip)
        return entry
    return make


def paired_sent(sent_tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in sent_tasks if t["name"] == contracts.PAIRED_TEST]


def test_publishing_asks_a_worker_for_the_test_of_neighbours_by_keys_once(published, sent_tasks):
    upper = published("Upper")
    assert not paired_sent(sent_tasks), "one row: nothing to test"
    lower = published("Lower", flip=20)
    [sent] = paired_sent(sent_tasks)
    test = PairedTest.objects.get()
    a, b = Result.objects.get(pk=test.result_a_id), Result.objects.get(pk=test.result_b_id)
    assert {a.pk, b.pk} == {upper.result_id, lower.result_id}
    assert sent["queue"].endswith(f"-sqa3d-v{a.scorer_version}-bulk")
    assert sent["kwargs"] == {
        "schema": contracts.SCHEMA_VERSION, "test_id": test.pk, "revision_a": a.revision, "revision_b": b.revision,
        "track": "sqa3d",
        "outcomes_a": contracts.outcomes_key("sqa3d", a.labels_sha256, a.predictions_sha256, a.scorer_version),
        "outcomes_b": contracts.outcomes_key("sqa3d", b.labels_sha256, b.predictions_sha256, b.scorer_version),
        "reply_queue": "site"}
    assert test.sent_at is not None and test.requested_by is None
    sent_tasks.clear()
    paired_tests.do_ask_board_tests(upper.split)
    assert not paired_sent(sent_tasks) and PairedTest.objects.count() == 1, "asked once"


def test_each_change_asks_for_the_pairs_every_board_shows_and_no_other(published, sent_tasks):
    upper = published("Upper")
    published("Lower", flip=20)
    published("Middle", flip=10)
    wanted = paired_tests.list_board_pairs(upper.split)
    asked = {(t.result_a_id, t.result_b_id) for t in PairedTest.objects.all()}
    assert asked == wanted and len(paired_sent(sent_tasks)) == len(wanted)
    assert {t["kwargs"]["test_id"] for t in paired_sent(sent_tasks)} == set(PairedTest.objects.values_list("pk",
                                                                                                       flat=True))


def test_the_board_pairs_are_the_neighbours_of_every_view(owner, sqa3d_split, sqa3d_files, sent_tasks, settings):
    """Against the boards themselves: every sort column, both orders, each filter, with and
    without paper rows; the scored neighbours they show are the pairs asked, no more."""
    import random

    settings.QUOTA_PER_DAY = 10
    rng = random.Random(5)
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    load_bundled_paper_rows("sqa3d")
    for i in range(6):
        s = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=f"M{i}",
                                             file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                             file_name="p.json")
        # Mostly the method's own level, so that most columns rank alike; a few equal values (ordered
        # by the primary metric), missing values and outliers.
        def value(level: float = i / 10) -> float | None:
            return rng.choice([level] * 12 + [None, 0.25, 0.35])

        lifecycle.record_result(submission_id=s.pk, attempt=1, result={
            **result, "metrics": {k: value() or 0.0 for k in result["metrics"]},
            "breakdown": {g: {k: (v if k == "count" else value()) for k, v in d.items()}
                          for g, d in result["breakdown"].items()}})
        Method.objects.filter(pk=s.method_id).update(uses_extra_data=i < 2, description="d", authors="a",
                                                     paper_url="https://example.org/p")
        services.check_publish(owner, s)
    shown: set[tuple[int, int]] = set()
    for sort in KEYS:
        for order in ("desc", "asc"):
            for extra in ("any", "no", "only"):
                for paper in ("0", "1"):
                    view = LeaderboardView.from_query(sqa3d_split, {"sort": sort, "order": order, "extra": extra,
                                                                    "paper": paper})
                    assert view.sort == sort
                    rows = [r.entry for r in leaderboard_page(view, page_size=100).rows]
                    shown.update(paired_tests.pair_of(u.result_id, v.result_id) for u, v in zip(rows, rows[1:])
                                 if u.result_id and v.result_id and u.scores.get(sort) is not None
                                 and v.scores.get(sort) is not None)
    assert paired_tests.list_board_pairs(sqa3d_split) == shown
    assert 5 < len(shown) < 15, "some pairs, not all"


def test_an_anonymous_read_of_any_page_sends_nothing_to_the_broker(client, published, sent_tasks,
                                                                   django_capture_on_commit_callbacks):
    upper, lower = published("Upper"), published("Lower", flip=20)
    PairedTest.objects.all().delete()  # as if never asked (a board before this change)
    sent_tasks.clear()
    pair = f"split=test&e={upper.pk}&e={lower.pk}"
    for url in ["/benchmarks/sqa3d/", "/benchmarks/sqa3d/?sort=What/EM", "/api/v1/leaderboards/sqa3d",
                "/benchmarks/sqa3d/export.json", "/benchmarks/sqa3d/export.csv", f"/benchmarks/sqa3d/compare/?{pair}",
                f"/api/v1/leaderboards/sqa3d/compare?{pair}", f"/methods/{upper.method_id}/"]:
        with django_capture_on_commit_callbacks(execute=True) as after_commit:  # what a commit would send
            assert client.get(url).status_code == 200, url
        assert after_commit == [], url
    assert sent_tasks == [] and not PairedTest.objects.exists()
    page = client.get(f"/benchmarks/sqa3d/compare/?{pair}").content.decode()
    assert "not computed yet" in page and "sign in</a> to ask for this one" in page
    [test] = client.get(f"/api/v1/leaderboards/sqa3d/compare?{pair}").json()["tests"]
    assert test["status"] == "not_requested" and test["p_value"] is None


def test_an_anonymous_visitor_sees_which_pairs_are_pending_and_what_is_computed(client, published, answer):
    a, b, c = published("A"), published("B", flip=10), published("C", flip=40)
    tests = {(t.result_a_id, t.result_b_id): t for t in PairedTest.objects.all()}
    answer(tests[paired_tests.pair_of(a.result_id, b.result_id)], findings(p=0.2))
    page = client.get(f"/benchmarks/sqa3d/compare/?split=test&e={a.pk}&e={b.pk}&e={c.pk}").content.decode()
    rows = {chunk.split('"', 1)[0]: chunk.split("</tr>")[0] for chunk in page.split('<tr data-pair="')[1:]}
    for x, y in ((a, c), (b, c)):
        asked = paired_tests.pair_of(x.result_id, y.result_id) in tests
        words = "being computed by a scoring worker" if asked else "not computed yet"
        assert words in rows[f"{x.pk}-{y.pk}"]
    assert "no significant difference (p = " in rows[f"{a.pk}-{b.pk}"]
    assert "being computed by a scoring worker" in rows[f"{b.pk}-{c.pk}"], "neighbours on the EM board"


def test_a_signed_in_compare_asks_for_missing_pairs_within_the_hourly_bound(client, owner, published, sent_tasks,
                                                                             settings,
                                                                             django_capture_on_commit_callbacks):
    settings.PAIRED_TESTS_PER_USER_HOUR = 2
    entries = [published(n, flip=f) for n, f in (("A", 0), ("B", 10), ("C", 20), ("D", 30))]
    PairedTest.objects.all().delete()
    sent_tasks.clear()
    client.force_login(owner)
    url = "/benchmarks/sqa3d/compare/?split=test&" + "&".join(f"e={e.pk}" for e in entries)

    def get(url: str, **headers: str) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return client.get(url, **headers)

    page = get(url).content.decode()
    assert len(paired_sent(sent_tasks)) == 2 and PairedTest.objects.filter(requested_by=owner).count() == 2
    assert page.count("being computed by a scoring worker") == 2
    assert ("You asked for 2 paired tests in the past hour, the most allowed (2 an hour), so 4 pairs here are "
            "not computed yet") in page
    # Again, and through the API with a token: the bound is the user's, whatever asks.
    get(url)
    key = do_create_token(owner)
    api = get("/api/v1/leaderboards/sqa3d/compare?split=test&" + "&".join(f"e={e.pk}" for e in entries),
              HTTP_AUTHORIZATION=f"Token {key}").json()
    assert len(paired_sent(sent_tasks)) == 2
    assert [t["status"] for t in api["tests"]].count("not_requested") == 4 and "the most allowed" in api["notice"]
    # An hour later the next two are asked.
    PairedTest.objects.update(requested_at=timezone.now() - timedelta(hours=1, seconds=1))
    get(url)
    assert len(paired_sent(sent_tasks)) == 4


def test_a_test_the_broker_lost_is_sent_again_at_the_next_change_not_before(published, sent_tasks, settings,
                                                                            django_capture_on_commit_callbacks):
    upper = published("Upper")
    published("Lower", flip=20)
    test = PairedTest.objects.get()
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        paired_tests.do_ask_board_tests(upper.split)
    assert not paired_sent(sent_tasks)
    PairedTest.objects.update(sent_at=timezone.now() - timedelta(seconds=settings.PAIRED_TEST_RESEND_SECONDS + 1))
    with django_capture_on_commit_callbacks(execute=True):
        paired_tests.do_ask_board_tests(upper.split)
    [again] = paired_sent(sent_tasks)
    assert again["kwargs"]["test_id"] == test.pk


def test_a_row_not_significantly_different_from_the_one_above_says_so_with_the_adjusted_p(client, published,
                                                                                           answer):
    upper = published("Upper")
    published("Lower", flip=20)
    test = PairedTest.objects.get()
    board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    assert "no significant difference (p" not in board
    assert "1 adjacent pair of scored rows on this page (1 not computed yet" in board
    answer(test, findings(p=0.31))
    board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    assert board.count('class="badge no-sig-diff"') == 1 and "no significant difference (p = 0.310)" in board
    assert "Holm-adjusted over the 1 adjacent pair of scored rows on this page" in board
    rows = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()
    assert [r["rank"] for r in rows["rows"]] == [1, 2], "ranks stay competition ranks"
    assert [r["no_significant_difference_from_entry_id"] for r in rows["rows"]] == [None, upper.pk]
    assert [r["adjusted_p_value"] for r in rows["rows"]] == [None, 0.31]
    assert rows["significance"] == {"adjustment": "holm", "key": "EM", "pairs": 1, "not_computed": 0,
                                    "level": 0.05, "over": "the adjacent pairs of scored rows shown",
                                    "test": "paired-permutation-by-scene"}


def test_a_significant_difference_gets_no_mark_and_its_p_value(client, published, answer):
    published("Upper"), published("Lower", flip=20)
    answer(PairedTest.objects.get(), findings(p=0.002))
    board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    assert "no-sig-diff" not in board
    rows = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()["rows"]
    assert rows[1]["no_significant_difference_from_entry_id"] is None and rows[1]["adjusted_p_value"] == 0.002


def test_every_metric_view_marks_its_own_neighbours_on_its_own_column(client, published, answer):
    published("Upper"), published("Lower", flip=20)
    answer(PairedTest.objects.get(), findings(p=0.001, What_EM=0.3, Is_EM_R=0.45))
    assert "no-sig-diff" not in client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    for query, p in (("sort=What/EM", "0.300"), ("sort=What/EM&order=asc", "0.300"),
                     ("metric=EM_R&sort=Is/EM_R", "0.450")):
        board = client.get(f"/benchmarks/sqa3d/?split=test&paper=0&{query}").content.decode()
        assert f"no significant difference (p = {p})" in board, query
        assert "finds no significant difference on " + query.split("sort=")[1].split("&")[0] in board
    api = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0&sort=What/EM").json()
    assert api["significance"]["key"] == "What/EM" and api["rows"][1]["adjusted_p_value"] == 0.3


def test_a_board_adjusts_the_p_values_of_its_adjacent_pairs_together(client, published, answer,
                                                                      django_assert_max_num_queries):
    entries = [published(n, flip=f) for n, f in (("A", 0), ("B", 30), ("C", 60))]
    em = {e.pk: LeaderboardEntry.objects.get(pk=e.pk).scores["EM"] for e in entries}
    ranked = sorted(entries, key=lambda e: -em[e.pk])
    tests = {(t.result_a_id, t.result_b_id): t for t in PairedTest.objects.all()}
    for (u, v), p in zip(zip(ranked, ranked[1:]), (0.03, 0.04)):
        answer(tests[paired_tests.pair_of(u.result_id, v.result_id)], findings(p=p))
    with django_assert_max_num_queries(7):  # the page's queries, and one for its tests
        rows = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()
    assert [r["entry_id"] for r in rows["rows"]] == [e.pk for e in ranked]
    assert [r["adjusted_p_value"] for r in rows["rows"]] == [None, pytest.approx(0.06), pytest.approx(0.06)]
    assert [r["no_significant_difference_from_entry_id"] for r in rows["rows"]] == [None, ranked[0].pk,
                                                                                     ranked[1].pk]
    assert rows["significance"]["pairs"] == 2
    board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    assert board.count("no significant difference (p = 0.060)") == 2
    assert "Holm-adjusted over the 2 adjacent pairs of scored rows on this page" in board


def test_the_compare_page_says_pending_then_the_verdict_with_both_p_values(client, owner, published, answer):
    upper, lower = published("Upper"), published("Lower", flip=20)
    PairedTest.objects.all().delete()
    client.force_login(owner)
    url = f"/benchmarks/sqa3d/compare/?split=test&e={lower.pk}&e={upper.pk}"
    assert "being computed by a scoring worker" in client.get(url).content.decode()
    test = PairedTest.objects.get()
    flipped = test.result_a_id != lower.result_id  # the page asks lower - upper
    answer(test, findings(p=0.004, difference=0.05))
    page = client.get(url).content.decode()
    assert "significant difference (p = 0.004)" in page and "no significant" not in page
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={lower.pk}&e={upper.pk}").json()
    [found] = api["tests"]
    sign = -1 if flipped else 1
    assert found["difference"] == pytest.approx(sign * 0.05) and found["significant"] is True
    assert found["p_value"] == found["adjusted_p_value"] == 0.004 and found["test"] == "paired-permutation-by-scene"
    assert found["permutations"] == 999 and found["exact"] is False and found["disagreement"] == ""
    assert found["interval"] == pytest.approx(sorted([sign * 0.03, sign * 0.07]))
    assert api["significance"]["pairs"] == 1 and api["significance"]["key"] == "EM"


def test_the_compare_page_adjusts_every_pair_of_the_selected_rows_on_the_shown_metric(client, published, answer):
    a, b, c = published("A"), published("B", flip=10), published("C", flip=40)
    for (x, y), p in (((a, b), 0.01), ((a, c), 0.02), ((b, c), 0.3)):
        test, _ = PairedTest.objects.get_or_create(result_a_id=min(x.result_id, y.result_id),
                                                   result_b_id=max(x.result_id, y.result_id))
        answer(test, findings(p=0.9, EM_R=p))
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&metric=EM_R&e={a.pk}&e={b.pk}&e={c.pk}").json()
    assert [(t["p_value"], t["adjusted_p_value"], t["significant"]) for t in api["tests"]] == [
        (0.01, pytest.approx(0.03), True), (0.02, pytest.approx(0.04), True), (0.3, 0.3, False)]
    page = client.get(f"/benchmarks/sqa3d/compare/?split=test&metric=EM_R&e={a.pk}&e={b.pk}&e={c.pk}").content.decode()
    assert "adjusted with Holm's method over the 3 pairs of the selected rows tested on EM_R" in page
    assert page.count("no significant difference (p = 0.300)") == 1


@pytest.mark.parametrize(("track", "unit"), [("sqa3d", "question"), ("openscan", "scene"), ("mmscan-vg", "prompt")])
def test_the_compare_note_describes_the_track_s_own_test(client, db, track, unit):
    from leaderboard.benchmarks.models import Split

    load_bundled_benchmarks()
    spec = get_track(track)
    split = Split.objects.filter(benchmark__track=track).first()
    entries = [LeaderboardEntry.objects.create(split=split, name=name, scores={spec.primary_metric: v},
                                               primary_score=v) for name, v in (("A", 0.5), ("B", 0.4))]
    page = client.get(f"/benchmarks/{track}/compare/?split={split.name}&e={entries[0].pk}&e={entries[1].pk}"
                      ).content.decode()
    note = page.split('id="significance-method">')[1].split("</p>")[0]
    within = "" if unit == "scene" else f" (every {unit} of a swapped scene)"
    assert (f"the two methods' outcomes are swapped scene by scene{within} and {spec.primary_metric} is recomputed "
            "for both on each swapped split") in note
    assert "interval of the difference comes from the scene bootstrap" in note
    assert "McNemar" not in page and "EM_R" not in note


def test_nothing_says_tied_on_pages_api_or_exports(client, owner, published, answer):
    upper, lower = published("Upper"), published("Lower", flip=20)
    load_bundled_paper_rows("sqa3d")
    answer(PairedTest.objects.get(), findings(p=0.5))
    client_signed_in = type(client)()
    client_signed_in.force_login(owner)
    pair = f"split=test&e={upper.pk}&e={lower.pk}"
    texts = {url: c.get(url).content.decode() for c in (client, client_signed_in) for url in (
        "/benchmarks/sqa3d/?split=test", "/benchmarks/sqa3d/?split=test&paper=0",
        "/benchmarks/sqa3d/?split=test&paper=0&sort=What/EM", "/api/v1/leaderboards/sqa3d?split=test&paper=0",
        f"/benchmarks/sqa3d/compare/?{pair}", f"/api/v1/leaderboards/sqa3d/compare?{pair}",
        "/benchmarks/sqa3d/export.json?split=test&paper=0", "/benchmarks/sqa3d/export.csv?split=test&paper=0",
        f"/methods/{lower.method_id}/", "/api/v1/openapi.json")}
    for url, text in texts.items():
        assert "tied" not in text.lower(), url
    assert "no significant difference (p = 0.500)" in texts["/benchmarks/sqa3d/?split=test&paper=0"]
    assert "no significant difference (p = 0.500)" in texts[f"/benchmarks/sqa3d/compare/?{pair}"]


@pytest.mark.parametrize("named", [100, 0])
def test_the_exports_carry_each_row_s_adjusted_test_against_the_row_above(client, published, answer, monkeypatch,
                                                                          named):
    """``named`` 0: the tests read for the whole split, as for an export of more than 100 rows."""
    monkeypatch.setattr(paired_verdicts, "_PAIRS_NAMED", named)
    published("Upper"), published("Lower", flip=20)
    answer(PairedTest.objects.get(), findings(p=0.001, What_EM=0.25))
    body = client.get("/benchmarks/sqa3d/export.json?split=test&paper=0&sort=What/EM").json()
    assert body["significance"] == {"adjustment": "holm", "key": "What/EM", "pairs": 1, "not_computed": 0,
                                    "level": 0.05, "over": "the adjacent pairs of scored rows in this file",
                                    "test": "paired-permutation-by-scene"}
    assert [(r["no_significant_difference_from_entry_id"], r["adjusted_p_value"]) for r in body["rows"]] == [
        (None, None), (body["rows"][0]["entry_id"], 0.25)]
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv?split=test&paper=0")
                                           .content.decode())))
    assert [(r["adjusted_p_value"], r["no_significant_difference_from_row_above"]) for r in rows] == [
        ("", ""), ("0.001", "False")]


def test_rows_scored_on_a_public_subset_are_never_tested(client, owner, published, sent_tasks):
    """The kept outcomes cover every unit: a test of two public-subset rows would mix the private
    remainder into the public board, so none is asked and compare says why."""
    upper, lower = published("Upper"), published("Lower", flip=20)
    PairedTest.objects.all().delete()
    Result.objects.filter(pk__in=[upper.result_id, lower.result_id]).update(partition="public")
    sent_tasks.clear()
    paired_tests.do_ask_board_tests(upper.split)
    client.force_login(owner)
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={lower.pk}").json()
    assert api["tests"][0]["status"] == "unavailable" and "public subset" in api["tests"][0]["reason"]
    assert not PairedTest.objects.exists() and not paired_sent(sent_tasks)


def test_paper_rows_are_not_tested(client, owner, published):
    upper = published("Upper")
    load_bundled_paper_rows("sqa3d")
    paper = LeaderboardEntry.objects.filter(is_paper=True).first()
    client.force_login(owner)
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={paper.pk}").json()
    assert api["tests"][0]["status"] == "unavailable" and "paper" in api["tests"][0]["reason"]
    assert api["significance"]["pairs"] == 0 and not PairedTest.objects.exists()


def test_a_withdrawn_row_leaves_its_neighbour_unmarked(client, owner, published, answer,
                                                       django_capture_on_commit_callbacks):
    upper = published("Upper")
    published("Lower", flip=20)
    answer(PairedTest.objects.get(), findings(p=0.5))
    assert "no-sig-diff" in client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        services.check_publish(owner, upper.submission, publish=False)
    board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    assert "Lower" in board and "no-sig-diff" not in board and "significance-note" not in board


def test_a_worker_answer_keeps_numbers_only_and_moves_cached_pages_on(client, published, answer):
    published("Upper"), published("Lower", flip=20)
    test = PairedTest.objects.get()
    url = "/api/v1/leaderboards/sqa3d?split=test&paper=0"
    assert client.get(url).json()["rows"][1]["adjusted_p_value"] is None
    assert client.get(url)["X-Page-Cache"] == "hit"
    answer(test, {"EM": {"test": "paired-permutation-by-scene", "difference": float("nan"), "p_value": 1.5,
                         "interval": [0.1, "x"], "permutations": True, "exact": "yes", "scenes": -3},
                  "What/EM": "not a finding"})
    test.refresh_from_db()
    assert test.findings == {"EM": {"test": "paired-permutation-by-scene", "difference": None, "p_value": 1.0,
                                    "interval": None, "permutations": None, "exact": None, "scenes": None,
                                    "min_scenes": None}}
    assert client.get(url).json()["rows"][1]["adjusted_p_value"] == 1.0, "the cached copy moved on"


def test_a_worker_error_is_shown_as_the_reason(client, owner, published, answer):
    upper, lower = published("Upper"), published("Lower", flip=20)
    answer(PairedTest.objects.get(), {}, error="outcomes unavailable")
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={lower.pk}").json()
    assert api["tests"][0]["status"] == "unavailable" and api["tests"][0]["reason"] == "outcomes unavailable"
    assert api["significance"]["pairs"] == 0


def test_an_answer_for_results_that_moved_on_is_dropped_and_counted_and_a_second_answer_changes_nothing(
        client, published, answer, redis_url):
    """The answer names the revisions the test was computed on: once a result moved on (re-scored, new
    labels, late intervals: ``Result.revision``) that answer is not the test of the scores shown."""
    import redis
    from django.db.models import F

    published("Upper"), published("Lower", flip=20)
    test = PairedTest.objects.get()
    a, b = Result.objects.get(pk=test.result_a_id), Result.objects.get(pk=test.result_b_id)
    counted = redis.Redis.from_url(redis_url)
    field = f"{contracts.RECORD_PAIRED_TEST}|stale"
    stale_before = int(counted.hget(contracts.refused_key(), field) or 0)
    Result.objects.filter(pk=b.pk).update(revision=F("revision") + 1)  # what a re-score of B does
    paired_tests.record_paired_test(test_id=test.pk, revision_a=a.revision, revision_b=b.revision,
                                    findings=findings(p=0.001), resamples=1000, error="")
    test.refresh_from_db()
    assert test.computed_at is None and test.findings == {}, "still pending: the answer was of other scores"
    assert int(counted.hget(contracts.refused_key(), field)) == stale_before + 1

    answer(test, findings(p=0.3))  # computed on the results as they are now
    test.refresh_from_db()
    computed_at = test.computed_at
    assert computed_at is not None and test.findings["EM"]["p_value"] == 0.3
    answer(test, findings(p=0.001))  # a second answer to the same request
    test.refresh_from_db()
    assert (test.computed_at, test.findings["EM"]["p_value"]) == (computed_at, 0.3)
