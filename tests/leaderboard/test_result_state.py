"""One model of a result's state (issues 34 and 37): every change of what a result says bumps its
revision, a stored paired test follows the revisions it was computed on ("being recomputed" until
it is answered again), and a row scored on the split's earlier labels stays on the board marked
"awaiting re-score" or "re-score failed", never ranked, tested or shown as current. The live
repro (new labels, the desk's re-score, a real worker): ``test_pipeline_live``."""

from __future__ import annotations

import csv
import io
import json
import shutil
from typing import Any

import pytest
from django.core.management import call_command

from evaluation_workers import contracts
from evaluation_workers.tracks import get_track
from leaderboard.rankings import paired_tests
from leaderboard.rankings.models import LeaderboardEntry, PairedTest, export_columns
from leaderboard.submissions import lifecycle
from leaderboard.submissions.models import Result, Submission
from tests.leaderboard.test_intervals import publish

KEYS = export_columns(get_track("sqa3d"))


def findings(p: float, difference: float) -> dict[str, Any]:
    return {key: {"test": "paired-bootstrap-by-scene", "difference": difference, "p_value": p,
                  "interval": [difference - 0.02, difference + 0.02]} for key in KEYS}


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    """Run what a commit would run (sends, the board's test requests)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def pair(owner, sqa3d_split, sqa3d_files, sent_tasks, capture):
    """Two published SQA3D rows, Upper ahead of Lower, and their test answered: Upper - Lower significant."""
    with capture():
        upper, _ = publish(owner, sqa3d_files, "Upper")
    with capture():
        lower, _ = publish(owner, sqa3d_files, "Lower", flip=20)
    answer(capture, PairedTest.objects.get(), findings(0.002, 0.05))
    return upper, lower


def answer(capture, test: PairedTest, found: dict[str, Any]) -> None:
    """A worker's answer computed on the two results as they are now."""
    a, b = (Result.objects.get(pk=pk).revision for pk in (test.result_a_id, test.result_b_id))
    with capture():
        paired_tests.record_paired_test(test_id=test.pk, revision_a=a, revision_b=b, findings=found,
                                        resamples=1000, error="")


def sent(sent_tasks: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [t for t in sent_tasks if t["name"] == name]


def rescore(submission: Submission, result: dict[str, Any], capture) -> None:
    """Queue ``submission`` again and record the worker's ``result`` of that attempt."""
    with capture():
        queued = lifecycle.do_enqueue(submission.pk)
    with capture():
        lifecycle.record_result(submission_id=submission.pk, attempt=queued.attempt, result=result)


def scored(sqa3d_files, labels, name: str, flip: int) -> dict[str, Any]:
    """The worker's result for ``flip`` wrong answers of the synthetic predictions, on ``labels``."""
    answers = json.loads(sqa3d_files["predictions"].read_text())
    for row in answers[:flip]:
        row["answer"] = "definitely not the answer"
    path = sqa3d_files["labels"].parent / f"{name}.json"
    path.write_text(json.dumps(answers))
    return get_track("sqa3d").score(labels, path, lambda f, m="": None)


def test_a_rescore_makes_the_stored_test_invalid_it_says_being_recomputed_and_is_asked_again(
        client, pair, sqa3d_files, sent_tasks, capture):
    upper, lower = pair
    url = f"split=test&e={upper.pk}&e={lower.pk}"
    assert "significant difference (p = 0.002)" in client.get(f"/benchmarks/sqa3d/compare/?{url}").content.decode()
    sent_tasks.clear()

    rescore(lower.submission, scored(sqa3d_files, sqa3d_files["labels"], "Lower2", flip=60), capture)
    revisions = dict(Result.objects.filter(pk__in=[upper.result_id, lower.result_id]).values_list("pk", "revision"))
    assert revisions == {upper.result_id: 1, lower.result_id: 2}, "the overwritten result only"
    test = PairedTest.objects.get()
    assert test.computed_at is None and test.findings == {} and test.invalidated_at is not None
    [again] = sent(sent_tasks, contracts.PAIRED_TEST)
    assert again["kwargs"]["test_id"] == test.pk
    ours = (test.revision_a, test.revision_b) if test.result_a_id == upper.result_id else (test.revision_b,
                                                                                           test.revision_a)
    assert ours == (1, 2), "sent for the revisions it will be shown beside"

    page = client.get(f"/benchmarks/sqa3d/compare/?{url}").content.decode()
    assert "being recomputed" in page and "p = 0.002" not in page
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?{url}").json()
    assert (api["tests"][0]["status"], api["tests"][0]["p_value"]) == ("recomputing", None)
    assert api["significance"]["not_computed"] == 1
    rows = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()["rows"]
    assert [r["adjusted_p_value"] for r in rows] == [None, None]
    body = client.get("/benchmarks/sqa3d/export.json?split=test&paper=0").json()
    assert [r["adjusted_p_value"] for r in body["rows"]] == [None, None]

    answer(capture, test, findings(0.3, 0.04))
    page = client.get(f"/benchmarks/sqa3d/compare/?{url}").content.decode()
    assert "no significant difference (p = 0.300)" in page and "being recomputed" not in page


def test_late_intervals_and_intervals_given_up_bump_the_revision(client, pair, sent_tasks, capture, settings):
    upper, _ = pair
    Result.objects.filter(pk=upper.result_id).update(bootstrap={"deferred": True})
    sent_tasks.clear()
    with capture():
        assert lifecycle.record_intervals(submission_id=upper.submission_id, result_id=upper.result_id, revision=1,
                                          intervals={"EM": [0.5, 0.7]}, bootstrap={"unit": "scene"})
    assert Result.objects.get(pk=upper.result_id).revision == 2
    assert PairedTest.objects.get().computed_at is None and len(sent(sent_tasks, contracts.PAIRED_TEST)) == 1

    settings.INTERVALS_MAX_TRIES = 1
    Result.objects.filter(pk=upper.result_id).update(bootstrap={"deferred": True})
    with capture():
        lifecycle.record_intervals(submission_id=upper.submission_id, result_id=upper.result_id, revision=2,
                                   intervals={}, bootstrap={}, error="outcomes unreadable")
    assert Result.objects.get(pk=upper.result_id).revision == 3, "its warnings changed"


def test_new_labels_leave_rows_on_the_board_awaiting_rescore_never_ranked_tested_or_current(
        client, owner, maintainer, pair, sqa3d_split, sqa3d_files, sent_tasks, capture, tmp_path, mailoutbox):
    upper, lower = pair
    owner.email, maintainer.email = "alice@example.org", "mallory@example.org"
    owner.save(), maintainer.save()
    labels = tmp_path / "labels"
    shutil.copytree(sqa3d_files["labels"], labels)
    [annotations] = labels.glob("*annotations*")
    data = json.loads(annotations.read_text())
    for item in data["annotations"][:30]:
        item["answers"][0]["answer"] = "a different answer"
    annotations.write_text(json.dumps(data))
    sent_tasks.clear()
    out = io.StringIO()
    with capture():
        call_command("load_labels", "--track", "sqa3d", "--split", "test", str(labels), "--allow-rescore", stdout=out)
    new = sqa3d_split.active_labels
    assert "2 submissions queued to be re-scored on them" in out.getvalue()
    requests = sent(sent_tasks, contracts.SCORE_SUBMISSION)
    assert {r["kwargs"]["labels_key"] for r in requests} == {new.storage_key} and len(requests) == 2
    assert all(r["queue"].endswith("-bulk") for r in requests)
    assert set(Result.objects.values_list("revision", flat=True)) == {2}
    assert set(LeaderboardEntry.objects.filter(is_paper=False).values_list("state", flat=True)) == {
        "awaiting_rescore"}

    # On every page and answer: kept, marked, not ranked, not tested.
    board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
    ranked, apart = board.split('id="not-current"')
    assert "Upper" not in ranked and "Lower" not in ranked and "awaits its re-score" in ranked
    assert apart.count("awaiting re-score</span>") == 2 and "no-sig-diff" not in board
    api = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()
    assert api["rows"] == [] and api["significance"]["pairs"] == 0
    assert [(r["method"], r["rank"], r["state"]) for r in api["not_current"]] == [
        ("Upper", None, "awaiting_rescore"), ("Lower", None, "awaiting_rescore")]
    export = client.get("/benchmarks/sqa3d/export.json?split=test&paper=0").json()
    assert export["rows"] == [] and [r["state"] for r in export["not_current"]] == ["awaiting_rescore"] * 2
    table = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv?split=test&paper=0")
                                            .content.decode())))
    assert [(r["method"], r["rank"], r["state"]) for r in table] == [("Upper", "", "awaiting_rescore"),
                                                                      ("Lower", "", "awaiting_rescore")]
    method = client.get(f"/methods/{upper.method_id}/").content.decode()
    assert "awaiting re-score</span>" in method and "from the split's earlier labels" in method
    assert client.get(f"/api/v1/methods/{upper.method_id}").json()["results"][0]["state"] == "awaiting_rescore"
    compare = client.get(f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={lower.pk}").json()
    assert compare["tests"][0]["status"] == "unavailable" and "awaiting re-score" in compare["tests"][0]["reason"]
    assert [e["state"] for e in compare["entries"]] == ["awaiting_rescore"] * 2
    assert paired_tests.list_board_pairs(sqa3d_split) == set()
    assert "Upper" not in client.get("/").content.decode(), "never a home page leader"

    # Upper's re-score arrives: current and ranked again; Lower still awaits, so the pair is not tested.
    queued = {r["kwargs"]["submission_id"]: r["kwargs"]["attempt"] for r in requests}
    sent_tasks.clear()
    with capture():
        lifecycle.record_result(submission_id=upper.submission_id, attempt=queued[upper.submission_id],
                                result=scored(sqa3d_files, labels, "Upper3", flip=0))
    api = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()
    assert [(r["method"], r["rank"], r["state"]) for r in api["rows"]] == [("Upper", 1, "current")]
    assert [r["method"] for r in api["not_current"]] == ["Lower"]
    assert not sent(sent_tasks, contracts.PAIRED_TEST) and PairedTest.objects.get().computed_at is None

    # Lower's re-score fails on the new labels: marked so for everyone; its owner and the maintainers are told.
    mailoutbox.clear()
    with capture():
        lifecycle.record_failure(submission_id=lower.submission_id, attempt=queued[lower.submission_id],
                                 kind="invalid_input", message="question_id 7: expected an answer")
    [row] = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()["not_current"]
    assert (row["method"], row["state"], row["rank"]) == ("Lower", "rescore_failed", None)
    assert "re-score failed</span>" in client.get("/benchmarks/sqa3d/?split=test").content.decode()
    to_owner = next(m for m in mailoutbox if m.to == ["alice@example.org"])
    assert "question_id 7: expected an answer" in to_owner.body and '"re-score failed"' in to_owner.body
    assert "still counts against your quota" in to_owner.body
    to_maintainers = next(m for m in mailoutbox if "mallory@example.org" in m.to)
    assert "Re-score failed" in to_maintainers.subject and "question_id 7: expected an answer" in to_maintainers.body
    assert "alice@example.org" not in to_maintainers.to
