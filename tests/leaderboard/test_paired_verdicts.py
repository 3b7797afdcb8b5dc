"""What a pair's verdict says since the permutation test decides (issue 34): no test, nor any mark, on a
split of fewer scenes than its intervals' minimum; which test decided where its p and the bootstrap
interval of the difference disagree, on the compare page, the boards, the API and the exports; and the
tests the paired bootstrap decided are forgotten by a migration and asked again."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from evaluation_workers.tracks import get_track
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Method
from tests.leaderboard.test_paired_tests import answer, findings, paired_sent, published  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def openscan_demo_pair(tmp_path_factory) -> dict[str, Any]:
    """OpenScan's demo labels (4 scenes) and two results on them, 15 points of AP apart (the demo
    predictions, and a copy with half the masks' classes shuffled)."""
    import numpy as np

    from evaluation_workers.synthetic import openscan

    folder = tmp_path_factory.mktemp("openscan-demo")
    labels, predictions = openscan.write_demo(folder, "val")
    arrays = dict(np.load(predictions))
    rng = np.random.default_rng(0)
    for key in [k for k in arrays if k.endswith(".classes")]:
        flip = rng.random(arrays[key].shape[0]) < 0.5
        arrays[key] = arrays[key].copy()
        arrays[key][flip] = rng.permutation(arrays[key][flip])
    worse = folder / "worse.npz"
    np.savez(worse, **arrays)
    track = get_track("openscan")
    return {"labels": labels, "files": [predictions, worse],
            "results": [track.score(labels, p, lambda f, m="": None) for p in (predictions, worse)]}


def test_a_split_with_fewer_scenes_than_the_minimum_is_never_tested_nor_marked(
        client, owner, sent_tasks, openscan_demo_pair, answer, django_capture_on_commit_callbacks):  # noqa: F811
    """Issue 34: on OpenScan's demo split (4 scenes, where every interval is withheld) the compare page
    said "significant, p 0.002". Below the intervals' minimum no test is asked; one stored before (the
    paired bootstrap's) is not shown; the pair says why; boards and exports carry no mark."""
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    load_bundled_benchmarks()
    split = Split.objects.select_related("benchmark").get(benchmark__track="openscan", name="val")
    do_load_labels(split, openscan_demo_pair["labels"])
    entries = []
    for name, path, result in zip(("OsA", "OsC"), openscan_demo_pair["files"], openscan_demo_pair["results"]):
        with django_capture_on_commit_callbacks(execute=True):
            sub = services.check_create_submission(user=owner, track="openscan", split="val", method_name=name,
                                                   file=io.BytesIO(path.read_bytes()), file_name=path.name)
            lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
            Method.objects.filter(pk=sub.method_id).update(description="d", authors="a", uses_extra_data=False)
            services.check_publish(owner, sub)
        entries.append(LeaderboardEntry.objects.get(method_id=sub.method_id))
    assert not paired_sent(sent_tasks) and not PairedTest.objects.exists(), "nothing asked below the minimum"
    a, c = entries
    test = PairedTest.objects.create(result_a_id=min(a.result_id, c.result_id),
                                     result_b_id=max(a.result_id, c.result_id))
    answer(test, {"AP": {"test": "paired-bootstrap-by-scene", "difference": 0.177, "p_value": 0.002,
                         "interval": [0.132, 0.206]}})
    why = "too few scenes to test (4 scenes; at least 150)"
    pair = f"split=val&e={a.pk}&e={c.pk}"
    page = client.get(f"/benchmarks/openscan/compare/?{pair}").content.decode()
    verdict = page.split('<tr data-pair="')[1].split("</tr>")[0]
    assert why in verdict and "significant" not in verdict and "0.002" not in page
    [found] = client.get(f"/api/v1/leaderboards/openscan/compare?{pair}").json()["tests"]
    assert (found["status"], found["reason"], found["p_value"]) == ("unavailable", why, None)
    board = client.get("/benchmarks/openscan/?split=val&paper=0").content.decode()
    assert "no-sig-diff" not in board and "significance-note" not in board
    rows = client.get("/api/v1/leaderboards/openscan?split=val&paper=0").json()
    assert [r["adjusted_p_value"] for r in rows["rows"]] == [None, None] and rows["significance"]["pairs"] == 0
    exported = client.get("/benchmarks/openscan/export.json?split=val&paper=0").json()
    assert [r["adjusted_p_value"] for r in exported["rows"]] == [None, None]
    csv_rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/openscan/export.csv?split=val&paper=0")
                                               .content.decode())))
    assert [(r["adjusted_p_value"], r["no_significant_difference_from_row_above"]) for r in csv_rows] == [
        ("", ""), ("", "")]


def test_where_the_p_value_and_the_interval_disagree_the_pages_say_which_decided(client, published, answer):  # noqa: F811
    """The compare page and its API beside the verdict; a board beside its mark, its API and exports per row."""
    upper, lower = published("Upper"), published("Lower", flip=20)
    test = PairedTest.objects.get()
    pair = f"split=test&e={upper.pk}&e={lower.pk}"
    for p, interval, words in (
            (0.03, [-0.01, 0.05], "the permutation test decided: p = 0.030 is below 0.05 though the bootstrap "
                                  "interval of the difference holds 0"),
            (0.2, [0.01, 0.05], "the permutation test decided: p = 0.200 is not below 0.05 though the bootstrap "
                                "interval of the difference excludes 0"),
            (0.03, [0.01, 0.05], "")):
        found = findings(p=0.5)
        found["EM"] = {**found["EM"], "p_value": p, "interval": interval, "difference": 0.02}
        PairedTest.objects.filter(pk=test.pk).update(computed_at=None)  # asked again: one answer a request
        answer(test, found)
        [shown] = client.get(f"/api/v1/leaderboards/sqa3d/compare?{pair}").json()["tests"]
        assert shown["disagreement"] == words and shown["significant"] is (p < 0.05)
        verdict = client.get(f"/benchmarks/sqa3d/compare/?{pair}").content.decode().split('<tr data-pair="')[1]
        verdict = verdict.split("</tr>")[0]
        assert (words in verdict) if words else ("disagreement" not in verdict), p
        assert 'title="999 random swaps of scenes and the split as it is"' in verdict
        # The board says it too: beside the mark, in the API's and the exports' rows.
        rows = client.get("/api/v1/leaderboards/sqa3d?split=test&paper=0").json()["rows"]
        assert [r["paired_test_note"] for r in rows] == ["", words]
        exported = client.get("/benchmarks/sqa3d/export.json?split=test&paper=0").json()["rows"]
        assert [r["paired_test_note"] for r in exported] == ["", words]
        csv_rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv?split=test&paper=0")
                                                   .content.decode())))
        assert [r["paired_test_note"] for r in csv_rows] == ["", words]
        board = client.get("/benchmarks/sqa3d/?split=test&paper=0").content.decode()
        assert (f"Note: {words}." in board) == (p >= 0.05 and bool(words)), p


def test_the_migration_forgets_the_tests_the_bootstrap_decided_and_the_command_asks_them_again(
        published, answer, sent_tasks, django_capture_on_commit_callbacks):  # noqa: F811
    import importlib

    from django.apps import apps
    from django.core.management import call_command

    published("A"), published("B", flip=10), published("C", flip=40)
    tests = list(PairedTest.objects.order_by("pk"))
    old = {key: {**f, "test": "paired-bootstrap-by-scene"} for key, f in findings(p=0.002).items()}
    answer(tests[0], old)
    for test in tests[1:]:
        answer(test, findings(p=0.002))
    importlib.import_module("leaderboard.rankings.migrations.0013_forget_tests_decided_by_the_bootstrap").forget(
        apps, None)
    assert list(PairedTest.objects.order_by("pk").values_list("pk", flat=True)) == [t.pk for t in tests[1:]]
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("ask_paired_tests", "--track", "sqa3d", stdout=io.StringIO())
    [asked] = paired_sent(sent_tasks)
    again = PairedTest.objects.get(pk=asked["kwargs"]["test_id"])
    assert (again.result_a_id, again.result_b_id) == (tests[0].result_a_id, tests[0].result_b_id)
