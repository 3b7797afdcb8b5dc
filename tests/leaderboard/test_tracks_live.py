"""OpenScan and MMScan submissions through the real pipeline to their leaderboards."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from evaluation_workers.tracks import get_track

pytestmark = pytest.mark.live


def load(track: str, split: str, labels: Path):
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    load_bundled_benchmarks()
    split_obj = Split.objects.select_related("benchmark").get(benchmark__track=track, name=split)
    do_load_labels(split_obj, labels)
    return split_obj


def finish(client, pk: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/submissions/{pk}/status.json").json()
        if body["status"] in {"finished", "failed", "cancelled"}:
            return body
        time.sleep(0.25)
    raise AssertionError(f"submission {pk} still {body['status']}")


@pytest.fixture(scope="module")
def openscan_files(tmp_path_factory):
    from evaluation_workers.synthetic import openscan

    out = tmp_path_factory.mktemp("openscan")
    args = argparse.Namespace(out=out, scenes=3, points=6000, instances=(6, 10), masks=20,
                              aspects=["material", "type", "synonym"], format="both", semantic=True,
                              missing=0, seed=5)
    return openscan.generate(args)


@pytest.fixture(scope="module")
def mmscan_files(tmp_path_factory):
    from evaluation_workers.synthetic import mmscan_vg

    out = tmp_path_factory.mktemp("mmscan")
    return mmscan_vg.generate(argparse.Namespace(out=out, samples=120, seed=3, min_preds=10, max_preds=30,
                                                 max_gt=5, empty_fraction=0.05, tilted_fraction=0.15,
                                                 gzip=True))


def test_an_openscan_upload_on_the_web_page_reaches_the_per_aspect_leaderboard(live_pipeline, client, owner,
                                                                               openscan_files):
    load("openscan", "val", Path(openscan_files["labels"]))
    expected = get_track("openscan").score(Path(openscan_files["labels"]), Path(openscan_files["compact"]),
                                           lambda f, m="": None)
    client.force_login(owner)
    with open(openscan_files["compact"], "rb") as f:
        response = client.post("/submissions/new/openscan/", {"split": "val", "method_name": "Open3D-X",
                                                              "file": f})
    pk = int(response["Location"].rstrip("/").split("/")[-1])
    done = finish(client, pk)
    assert done["status"] == "finished", done
    assert done["result"]["metrics"] == expected["metrics"]
    from leaderboard.submissions.models import Method
    from tests.leaderboard.conftest import describe_method

    describe_method(Method.objects.get(name="Open3D-X"))
    client.post(f"/submissions/{pk}/publish/", {"publish": "1"})
    page = client.get("/benchmarks/openscan/?metric=AP50").content.decode()
    for aspect in ("material", "type", "synonym"):
        assert f">{aspect}" in page
    assert f"{expected['breakdown']['material']['AP50'] * 100:.1f}" in page
    semantic = client.get("/api/v1/leaderboards/openscan?metric=mIoU").json()
    [row] = [r for r in semantic["rows"] if r["method"] == "Open3D-X"]
    assert row["scores"]["mIoU"] == expected["metrics"]["mIoU"]


def test_an_mmscan_upload_through_the_api_reaches_the_leaderboard(live_pipeline, client, owner, mmscan_files):
    from leaderboard.accounts.services import do_create_token

    load("mmscan-vg", "val", Path(mmscan_files["labels"]))
    expected = get_track("mmscan-vg").score(Path(mmscan_files["labels"]), Path(mmscan_files["predictions"]),
                                            lambda f, m="": None)
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    with open(mmscan_files["predictions"], "rb") as f:
        created = client.post("/api/v1/submissions", {"track": "mmscan-vg", "split": "val",
                                                      "method_name": "Grounder", "file": f}, headers=headers)
    assert created.status_code == 201, created.content
    client.force_login(owner)
    done = finish(client, created.json()["id"])
    assert done["status"] == "finished", done
    assert done["result"]["metrics"] == expected["metrics"]
    from leaderboard.submissions.models import Method
    from tests.leaderboard.conftest import describe_method

    describe_method(Method.objects.get(name="Grounder"))
    published = client.post(f"/api/v1/submissions/{created.json()['id']}/publish", headers=headers)
    assert published.status_code == 200, published.content
    board = client.get("/api/v1/leaderboards/mmscan-vg?split=val").json()
    assert board["primary_metric"] == "gTop-1@0.25"
    assert board["rows"][0]["scores"]["OR/AP_box@0.5"] == expected["breakdown"]["OR"]["AP_box@0.5"]
