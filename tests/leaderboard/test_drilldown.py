"""Drill-down (issue 13): OpenScan per attribute, MMScan per sub-class, on method pages and in
the JSON exports; every row with its count where the split's labels are public, only large
enough groups and never a count or an empty class's null where they are hidden."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from django.test import Client

from evaluation_workers.synthetic import mmscan_vg, openscan
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.mmscan_vg.labels import SUB_CLASS_GROUP, SUB_CLASSES
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks, load_bundled_paper_rows
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.services import do_load_labels
from leaderboard.moderation.models import AuditEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Method

MIN = 3


@pytest.fixture(scope="module")
def openscan_demo(tmp_path_factory) -> dict:
    labels, predictions = openscan.write_demo(tmp_path_factory.mktemp("openscan"), "val")
    result = get_track("openscan").score(labels, predictions, lambda f, m="": None)
    return {"labels": labels, "predictions": predictions, "result": result}


@pytest.fixture(scope="module")
def mmscan_demo(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("mmscan")
    labels, predictions = mmscan_vg.write_demo(base / "labels", "val")
    predictions = predictions.rename(base / predictions.name)
    result = get_track("mmscan-vg").score(labels, predictions, lambda f, m="": None)
    return {"labels": labels, "predictions": predictions, "result": result}


# What the scorers record


def test_openscan_counts_each_attributes_valid_instances(openscan_demo):
    result = openscan_demo["result"]
    per_class = result["details"]["per_class"]
    assert len(per_class) == 341
    for aspect, row in result["breakdown"].items():
        mine = [v for k, v in per_class.items() if k.startswith(f"{aspect}/")]
        assert sum(v["count"] for v in mine) == row["count"], aspect
        # An attribute without valid instances is the null; one with them has a value.
        assert all((v["AP"] is None) == (v["count"] == 0) for v in mine), aspect


def test_mmscan_sub_classes_fold_into_the_groups(mmscan_demo):
    result = mmscan_demo["result"]
    subs = result["details"]["per_sub_class"]
    assert list(subs) == list(SUB_CLASSES)
    for group, row in result["breakdown"].items():
        members = [s for s in SUB_CLASSES if SUB_CLASS_GROUP[s] == group]
        assert sum(subs[s]["count"] for s in members) == row["count"], group
        for metric in ("gTop-1@0.25", "AP_sample@0.5", "AR@0.25"):  # per-prompt means: count-weighted
            mean = sum(subs[s][metric] * subs[s]["count"] for s in members) / row["count"]
            assert mean == pytest.approx(row[metric], abs=1e-12), (group, metric)
        if len(members) == 1:  # pooled AP_box too, where the group is one sub-class
            assert {k: v for k, v in subs[members[0]].items()} == row, group


# What the site shows


@pytest.fixture
def published(db, owner, settings, sent_tasks, openscan_demo, mmscan_demo):
    """One published OpenScan result (val, labels hidden until a test says otherwise) and one MMScan."""
    settings.DRILLDOWN_MIN_GROUP_SIZE = MIN
    load_bundled_benchmarks()
    load_bundled_paper_rows("openscan")
    made = {}
    for track, split, demo in (("openscan", "val", openscan_demo), ("mmscan-vg", "val", mmscan_demo)):
        split_obj = Split.objects.select_related("benchmark").get(benchmark__track=track, name=split)
        do_load_labels(split_obj, demo["labels"])
        predictions: Path = demo["predictions"]
        sub = services.check_create_submission(user=owner, track=track, split=split, method_name=f"{track}-net",
                                               file=io.BytesIO(predictions.read_bytes()), file_name=predictions.name)
        lifecycle.record_result(submission_id=sub.pk, attempt=1, result=demo["result"])
        Method.objects.filter(pk=sub.method_id).update(description="d", authors="a", uses_extra_data=False)
        services.check_publish(owner, sub)
        made[track] = sub
    return made


def _hidden_shown(result: dict) -> dict[str, dict]:
    return {k: v for k, v in result["details"]["per_class"].items() if v["count"] >= MIN}


def test_a_public_split_shows_every_attribute_with_its_count(published, openscan_demo, client):
    Split.objects.filter(benchmark__track="openscan").update(labels_public=True)
    sub = published["openscan"]
    drill = client.get(f"/api/v1/methods/{sub.method_id}").json()["results"][0]["drilldown"]
    assert drill["labels_public"] is True and drill["min_group_size"] is None
    per_class = openscan_demo["result"]["details"]["per_class"]
    assert sum(len(rows) for rows in drill["groups"].values()) == 341
    assert drill["groups"]["material"]["wood"] == per_class["material/wood"]
    page = client.get(f"/methods/{sub.method_id}/").content.decode()
    assert "Per attribute (341)" in page and "<th class=\"num\">count</th>" in page
    exported = client.get("/benchmarks/openscan/export.json?drilldown=1").json()["rows"]
    row = next(r for r in exported if r["method"] == "openscan-net")
    assert row["drilldown"] == drill and next(r for r in exported if r["reported_in_paper"])["drilldown"] is None
    assert "drilldown" not in client.get("/benchmarks/openscan/export.json").json()["rows"][0]


def test_a_hidden_split_shows_only_large_attributes_and_no_counts_to_anyone(published, openscan_demo, owner,
                                                                            maintainer, client):
    sub = published["openscan"]
    expected = _hidden_shown(openscan_demo["result"])
    assert 0 < len(expected) < 341  # some shown, most withheld: empty (null) and small alike
    for user in (None, owner, maintainer):
        viewer = Client()
        if user:
            viewer.force_login(user)
        drill = viewer.get(f"/api/v1/methods/{sub.method_id}").json()["results"][0]["drilldown"]
        assert drill["labels_public"] is False and drill["min_group_size"] == MIN
        shown = {f"{g}/{name}": v for g, rows in drill["groups"].items() for name, v in rows.items()}
        assert shown == {k: {m: v[m] for m in ("AP", "AP50", "AP25")} for k, v in expected.items()}
        assert all(None not in v.values() for v in shown.values())
        page = viewer.get(f"/methods/{sub.method_id}/").content.decode()
        assert f"Per attribute ({len(expected)})" in page and "<th class=\"num\">count</th>" not in page
        assert f"at least {MIN} instances are shown, without counts" in page
        exported = viewer.get("/benchmarks/openscan/export.json?drilldown=1").content.decode()
        assert '"count"' not in exported.split('"drilldown"', 1)[1]
    # The submitter's own API answer is filtered the same way (no nulls, no counts, no semantic per class).
    owner_client = Client()
    owner_client.force_login(owner)
    details = owner_client.get(f"/submissions/{sub.pk}/status.json").json()["result"]["details"]
    assert set(details["per_class"]) == set(expected) and "semantic_per_class" not in details
    assert all("count" not in v and None not in v.values() for v in details["per_class"].values())
    assert "hidden" in details["per_class_withheld"] and details["format"] == "compact"


def test_mmscan_sub_classes_on_the_method_page_and_the_threshold_on_hidden_labels(
        published, mmscan_demo, settings, client, django_capture_on_commit_callbacks):
    sub = published["mmscan-vg"]
    subs = mmscan_demo["result"]["details"]["per_sub_class"]
    drill = client.get(f"/api/v1/methods/{sub.method_id}").json()["results"][0]["drilldown"]
    assert drill["level"] == "sub-class" and set(drill["groups"]["ST-attr"]) == {
        "VG_Single_Attribute_Unique", "VG_Single_Attribute_Common", "VG_Single_EQ"}
    assert drill["groups"]["OR"]["VG_Inter_OR"] == {k: v for k, v in subs["VG_Inter_OR"].items() if k != "count"}
    page = client.get(f"/methods/{sub.method_id}/").content.decode()
    assert "Per sub-class (7)" in page and "VG_Inter_Space_OO" in page and "AP_box@0.5" not in page.split(
        "Per sub-class", 1)[1]  # the page shows the primary family; the JSON has every metric
    settings.DRILLDOWN_MIN_GROUP_SIZE = int(np.median([v["count"] for v in subs.values()])) + 1
    with django_capture_on_commit_callbacks(execute=True):  # a change that moves the cached pages
        Split.objects.get(benchmark__track="mmscan-vg", name="val").save()
    drill = client.get(f"/api/v1/methods/{sub.method_id}").json()["results"][0]["drilldown"]
    shown = {name for rows in drill["groups"].values() for name in rows}
    assert shown == {s for s, v in subs.items() if v["count"] >= settings.DRILLDOWN_MIN_GROUP_SIZE}
    assert 0 < len(shown) < 7


def test_a_maintainer_marks_labels_public_audited_and_the_cached_page_follows(
        published, maintainer, outsider, client, django_capture_on_commit_callbacks):
    sub = published["openscan"]
    before = client.get(f"/methods/{sub.method_id}/")
    assert client.get(f"/methods/{sub.method_id}/")["X-Page-Cache"] == "hit"
    assert "Per attribute (341)" not in before.content.decode()
    form = {"action": "labels_public", "split": "val", "public": "1", "reason": "the val labels are published"}
    nobody = Client()
    nobody.force_login(outsider)
    assert nobody.post("/moderation/tracks/openscan/", form).status_code == 403
    staff = Client()
    staff.force_login(maintainer)
    with django_capture_on_commit_callbacks(execute=True):
        staff.post("/moderation/tracks/openscan/", form)
    assert Split.objects.get(benchmark__track="openscan", name="val").labels_public
    audit = AuditEntry.objects.get(action="set_labels_public")
    assert audit.reason == "the val labels are published" and audit.details == {"public": True}
    assert "Per attribute (341)" in client.get(f"/methods/{sub.method_id}/").content.decode()
    assert "Mark labels hidden" in staff.get("/moderation/tracks/openscan/").content.decode()


def test_results_without_counts_show_nothing_on_hidden_labels(published, client):
    from leaderboard.submissions.models import Result

    sub = published["openscan"]
    result = Result.objects.get(submission=sub)
    result.details = {**result.details, "per_class": {k: {m: v[m] for m in ("AP", "AP50", "AP25")}
                                                      for k, v in result.details["per_class"].items()}}
    result.save()
    drill = client.get(f"/api/v1/methods/{sub.method_id}").json()["results"][0]["drilldown"]
    assert drill["groups"] == {}
    assert "null" not in json.dumps(drill)
