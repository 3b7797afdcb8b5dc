"""Upload to leaderboard row through the real parts: Redis, a scoring worker
process, the site worker, the HTTP API."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command

from evaluation_workers.tracks import get_track

pytestmark = pytest.mark.live


def wait_for(client, url: str, headers: dict, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        body = client.get(url, headers=headers).json()
        seen.append(body["status"])
        if body["status"] in {"finished", "failed", "cancelled"}:
            body["seen"] = seen
            return body
        time.sleep(0.2)
    raise AssertionError(f"still {seen[-1]} after {timeout} s")


def test_an_api_submission_reaches_the_leaderboard_with_exact_scores(live_pipeline, client, sqa3d_split,
                                                                     sqa3d_files, capsys):
    call_command("issue_token", "researcher", "--create-user")
    token = capsys.readouterr().out.strip()
    headers = {"Authorization": f"Token {token}"}
    with open(sqa3d_files["predictions"], "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test",
                                                       "method_name": "LiveNet", "file": f}, headers=headers)
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["status"] == "queued"

    done = wait_for(client, f"/api/v1/submissions/{created['id']}", headers)
    assert done["status"] == "finished", done
    expected = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    assert done["result"]["metrics"] == expected["metrics"]
    assert done["result"]["breakdown"] == expected["breakdown"]
    assert done["result"]["labels_sha256"] == sqa3d_split.active_labels.sha256

    refused = client.post(f"/api/v1/submissions/{created['id']}/publish", headers=headers)
    assert refused.status_code == 409 and "Describe the method" in refused.json()["error"]["message"]
    [method] = client.get("/api/v1/my/methods", headers=headers).json()["methods"]
    described = client.patch(f"/api/v1/my/methods/{method['id']}", data={
        "description": "Live test method.", "authors": "R. Searcher", "uses_extra_data": False},
        content_type="application/json", headers=headers)
    assert described.status_code == 200, described.content
    assert client.post(f"/api/v1/submissions/{created['id']}/publish", headers=headers).status_code == 200
    board = client.get("/api/v1/leaderboards/sqa3d?split=test").json()
    [row] = [r for r in board["rows"] if r["method"] == "LiveNet"]
    assert row["scores"]["EM"] == expected["metrics"]["EM"]
    assert row["scores"]["Which/EM_R"] == expected["breakdown"]["Which"]["EM_R"]
    assert row["scorer_version"] == expected["scorer_version"]


def test_a_bad_file_the_worker_rejects_fails_with_its_message_and_the_worker_keeps_serving(
        live_pipeline, client, owner, sqa3d_split, sqa3d_files, settings):
    # Above the upload-time validation size, files are checked by the worker only.
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0
    client.force_login(owner)
    bad = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "Bad",
                                              "file": _named(b'[{"question_id": 1}]', "bad.json")})
    assert bad.status_code == 201
    failed = wait_for(client, f"/api/v1/submissions/{bad.json()['id']}", {})
    assert failed["status"] == "failed"
    assert failed["error"]["kind"] == "invalid_input"
    assert "answer" in failed["error"]["message"]

    with open(sqa3d_files["predictions"], "rb") as f:
        good = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "Good",
                                                   "file": f})
    assert wait_for(client, f"/api/v1/submissions/{good.json()['id']}", {})["status"] == "finished"


def _named(content: bytes, name: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, content, content_type="application/json")


def test_a_challenge_with_a_public_subset_scores_both_parts_and_reveals_the_private_one_at_the_deadline(
        live_pipeline, client, owner, sqa3d_split, sqa3d_files, tmp_path, settings):
    """The real worker reads the partition beside the labels and reports two results; the board
    shows the public subset's until the deadline and the private remainder's after it."""
    import json
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from evaluation_workers import partitions
    from leaderboard.accounts.services import do_create_token
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.lib.pagecache import bump
    from leaderboard.submissions.models import Result
    from tests.leaderboard.conftest import describe_method

    questions = json.loads(next(sqa3d_files["labels"].glob("*questions*")).read_text())["questions"]
    partition = tmp_path / "public.txt"
    partition.write_text("\n".join(sorted({q["scene_id"] for q in questions})[::3]))
    labels, _ = do_load_labels(sqa3d_split, sqa3d_files["labels"], partition=partition)
    now = timezone.now()
    Split.objects.filter(pk=sqa3d_split.pk).update(freeze_at=now + timedelta(hours=1),
                                                   deadline=now + timedelta(hours=2))
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    with open(sqa3d_files["predictions"], "rb") as f:
        created = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "SubsetNet",
                                                      "file": f}, headers=headers).json()
    done = wait_for(client, f"/api/v1/submissions/{created['id']}", headers)
    assert done["status"] == "finished", done
    public, private = partitions.score(get_track("sqa3d"), settings.LABELS_DIR / labels.storage_key,
                                       sqa3d_files["predictions"], lambda f, m="": None)
    assert done["result"]["partition"] == "public" and done["result"]["metrics"] == public["metrics"]
    assert "count" not in done["result"]["breakdown"]["What"]
    stored = {r.partition: r for r in Result.objects.filter(submission_id=created["id"])}
    assert set(stored) == {"public", "private"} and stored["private"].metrics == private["metrics"]
    assert public["metrics"]["EM"] != private["metrics"]["EM"]

    describe_method(Result.objects.get(pk=stored["public"].pk).submission.method)
    assert client.post(f"/api/v1/submissions/{created['id']}/publish", headers=headers).status_code == 200
    board = client.get("/api/v1/leaderboards/sqa3d?split=test").json()
    assert board["phase"] == "open" and board["scores_of"] == "public" and board["public_subset"] is True
    [row] = [r for r in board["rows"] if r["method"] == "SubsetNet"]
    assert row["scores"]["EM"] == public["metrics"]["EM"]

    with transaction.atomic():
        Split.objects.filter(pk=sqa3d_split.pk).update(freeze_at=now - timedelta(hours=2),
                                                       deadline=now - timedelta(seconds=1))
        # With the clock moving, the cached page would expire at the freeze (``cache_until``); here the dates move.
        bump("sqa3d")
    board = client.get("/api/v1/leaderboards/sqa3d?split=test").json()  # its first reader reveals it
    assert board["phase"] == "revealed" and board["scores_of"] == "private"
    [row] = [r for r in board["rows"] if r["method"] == "SubsetNet"]
    assert row["scores"]["EM"] == private["metrics"]["EM"]
    mine = client.get(f"/api/v1/submissions/{created['id']}", headers=headers).json()["result"]
    assert mine["partition"] == "private" and mine["metrics"] == private["metrics"]
def _publish_scored(client, headers: dict, path, name: str) -> dict:
    with open(path, "rb") as f:
        created = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": name,
                                                      "file": f}, headers=headers).json()
    done = wait_for(client, f"/api/v1/submissions/{created['id']}", headers)
    assert done["status"] == "finished", done
    method = next(m for m in client.get("/api/v1/my/methods", headers=headers).json()["methods"] if m["name"] == name)
    client.patch(f"/api/v1/my/methods/{method['id']}", data={
        "description": "Live test method.", "authors": "R. Searcher", "uses_extra_data": False},
        content_type="application/json", headers=headers)
    assert client.post(f"/api/v1/submissions/{created['id']}/publish", headers=headers).status_code == 200
    return done


def _all_site_rows() -> str:
    """Every row of every table of the site's database, as JSON text."""
    import io

    out = io.StringIO()
    call_command("dumpdata", "--natural-foreign", stdout=out)
    return out.getvalue()


def test_two_published_methods_are_tested_by_a_worker_and_only_aggregates_reach_the_site(
        live_pipeline, client, sqa3d_split, sqa3d_files, capsys, tmp_path, storage_dirs):
    import json

    import numpy as np

    from evaluation_workers import contracts
    from evaluation_workers.worker import significance
    from leaderboard.rankings.models import LeaderboardEntry, PairedTest

    call_command("issue_token", "tester", "--create-user")
    headers = {"Authorization": f"Token {capsys.readouterr().out.strip()}"}
    answers = json.loads(sqa3d_files["predictions"].read_text())
    for row in answers[:12]:
        row["answer"] = "no such answer"
    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps(answers))
    first = _publish_scored(client, headers, sqa3d_files["predictions"], "Better")
    second = _publish_scored(client, headers, worse, "Worse")
    assert first["result"]["intervals"]["EM"][0] < first["result"]["metrics"]["EM"] < \
        first["result"]["intervals"]["EM"][1]

    # Publishing changed the ranking: the site asked the worker for the neighbours' test.
    deadline = time.monotonic() + 60
    while not PairedTest.objects.filter(computed_at__isnull=False).exists():
        assert time.monotonic() < deadline, "no answer from the worker"
        time.sleep(0.2)
    test = PairedTest.objects.get()
    assert test.error == "" and test.resamples == 1000
    assert {f["test"] for f in test.findings.values()} == {"paired-permutation-by-scene"}

    # The same numbers, every key, as the worker-side computation from the outcomes kept by the worker.
    def kept(done: dict) -> dict:
        key = contracts.outcomes_key("sqa3d", done["result"]["labels_sha256"],
                                     done["result"]["predictions_sha256"], done["result"]["scorer_version"])
        with np.load(storage_dirs["outcomes"] / key) as data:
            return {k: data[k] for k in data.files}

    better, worse_hits = kept(first), kept(second)
    a_is_better = test.result_a.submission_id == first["id"]
    want = significance.compare("sqa3d", *((better, worse_hits) if a_is_better else (worse_hits, better)))
    assert set(test.findings) == set(want["findings"])
    for key, found in test.findings.items():
        for field in ("difference", "p_value", "interval", "permutations", "exact"):
            expected = want["findings"][key][field]
            assert found[field] == (None if expected is None else pytest.approx(expected)), (key, field)
    assert (test.findings["EM"]["difference"] > 0) == a_is_better
    lower = LeaderboardEntry.objects.get(name="Worse")
    upper = LeaderboardEntry.objects.get(name="Better")
    rows = client.get("/api/v1/leaderboards/sqa3d?split=test").json()["rows"]
    shown = next(r for r in rows if r["entry_id"] == lower.pk)
    assert shown["adjusted_p_value"] == pytest.approx(want["findings"]["EM"]["p_value"])  # the only pair: unadjusted
    assert (shown["no_significant_difference_from_entry_id"] == upper.pk) == (shown["adjusted_p_value"] >= 0.05)

    # Nothing of a single question reaches the site: not a page, not the API, not a database row.
    n = better["em"].shape[0]
    pages = [client.get(u).content.decode() for u in (
        "/benchmarks/sqa3d/?split=test&ci=1", f"/benchmarks/sqa3d/compare/?split=test&e={upper.pk}&e={lower.pk}",
        "/benchmarks/sqa3d/export.json?split=test", "/benchmarks/sqa3d/export.csv?split=test",
        f"/api/v1/leaderboards/sqa3d/compare?split=test&e={upper.pk}&e={lower.pk}",
        f"/api/v1/submissions/{first['id']}")]
    pages.append(client.get(f"/api/v1/submissions/{first['id']}", headers=headers).content.decode())
    for text in [*pages, _all_site_rows()]:
        assert '"em"' not in text and '"em_r"' not in text and "outcomes/" not in text
        for found in _json_lists(text):
            # The manifest's public question ids are a list that long; hits would be booleans or 0/1.
            assert len(found) < n or not all(v in (0, 1) for v in found), "per-question hits"
    assert "significant difference (p = " in pages[1] and "tied" not in pages[1]


def _json_lists(text: str) -> list[list]:
    """Every list inside every JSON document in ``text`` (the whole of it, or its fixture dump)."""
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        return []
    found: list[list] = []

    def walk(x):
        if isinstance(x, list):
            found.append(x)
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
            for v in x.values():
                if isinstance(v, str) and v[:1] in "[{":
                    try:
                        walk(json.loads(v))
                    except ValueError:
                        pass

    walk(doc)
    return found


def _labels_that_agree_with(source, predictions, dest):
    """A copy of the SQA3D labels ``source`` whose answers are those of the predictions file."""
    import json
    import shutil

    shutil.copytree(source, dest)
    said = {row["question_id"]: row["answer"] for row in json.loads(predictions.read_text())}
    [path] = dest.glob("*annotations*")
    data = json.loads(path.read_text())
    for annotation in data["annotations"]:
        annotation["answers"] = [{"answer": said[annotation["question_id"]], "answer_confidence": "yes",
                                  "answer_id": 1}]
    path.write_text(json.dumps(data))
    return dest


def test_a_stored_paired_test_follows_its_results_through_new_labels_and_the_desks_rescore(
        live_pipeline, client, sqa3d_split, sqa3d_files, capsys, tmp_path, storage_dirs, maintainer):
    """Issue 34's repro: A and B are published and tested (A ahead); new labels on which B is right
    everywhere are loaded, and the desk re-scores the split. Every answer of the compare API, all the
    way through, gives a test only beside the scores it was computed on, and the end is B ahead, with
    the worker's difference and p on the new outcomes, on the page and in the API."""
    import json

    import numpy as np
    from django.test import Client

    from evaluation_workers import contracts
    from evaluation_workers.worker import significance
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.rankings.models import LeaderboardEntry, PairedTest
    from leaderboard.rankings.templatetags.scores import signed_pct

    call_command("issue_token", "tester", "--create-user")
    headers = {"Authorization": f"Token {capsys.readouterr().out.strip()}"}
    answers = json.loads(sqa3d_files["predictions"].read_text())
    for row in answers[:40]:
        row["answer"] = "no such answer"
    worse = tmp_path / "b.json"
    worse.write_text(json.dumps(answers))
    _publish_scored(client, headers, sqa3d_files["predictions"], "A")
    _publish_scored(client, headers, worse, "B")
    a, b = (LeaderboardEntry.objects.get(name=n) for n in ("A", "B"))
    url = f"/api/v1/leaderboards/sqa3d/compare?split=test&e={a.pk}&e={b.pk}"

    def answer() -> dict:
        body = client.get(url).json()
        [test] = body["tests"]
        shown = [e["scores"]["EM"] for e in body["entries"]]
        if test["status"] == "done":  # never beside scores it was not computed on
            assert (test["difference"] > 0) == (shown[0] > shown[1]), (test, shown)
        return {**test, "scores": shown}

    def wait(until, what: str) -> dict:
        deadline = time.monotonic() + 60
        while not until(found := answer()):
            assert time.monotonic() < deadline, f"{what}: still {found}"
            time.sleep(0.2)
        return found

    before = wait(lambda t: t["status"] == "done", "the first test")
    assert before["difference"] > 0 and before["scores"][0] > before["scores"][1]

    do_load_labels(sqa3d_split, _labels_that_agree_with(sqa3d_files["labels"], worse, tmp_path / "labels"))
    desk = Client()
    desk.force_login(maintainer)
    assert desk.post("/moderation/tracks/sqa3d/", {"action": "rescore_all", "split": "test",
                                                   "reason": "new labels"}).status_code == 302
    after = wait(lambda t: t["status"] == "done" and t["scores"][1] == 1.0, "the test on the new labels")
    assert after["difference"] < 0 and after["scores"][0] < 1.0

    test = PairedTest.objects.select_related("result_a", "result_b").get()
    assert (test.revision_a, test.revision_b) == (test.result_a.revision, test.result_b.revision) == (2, 2)

    def kept(result) -> dict:
        key = contracts.outcomes_key("sqa3d", result.labels_sha256, result.predictions_sha256, result.scorer_version)
        with np.load(storage_dirs["outcomes"] / key) as data:
            return {k: data[k] for k in data.files}

    in_order = (test.result_a, test.result_b) if test.result_a_id == a.result_id else (test.result_b, test.result_a)
    want = significance.compare("sqa3d", *(kept(r) for r in in_order))["findings"]["EM"]
    assert after["difference"] == pytest.approx(want["difference"]) and after["p_value"] == pytest.approx(
        want["p_value"])
    page = client.get(f"/benchmarks/sqa3d/compare/?split=test&e={a.pk}&e={b.pk}").content.decode()
    row = page.split(f'<tr data-pair="{a.pk}-{b.pk}">')[1].split("</tr>")[0]
    assert signed_pct(after["difference"]) in row and f"(p = {after['adjusted_p_value']:.3f})" in row
    assert signed_pct(before["difference"]) not in row
