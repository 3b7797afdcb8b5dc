"""The finals' export of a phase (issue 40): the maintainers of a benchmark take a streamed zip of
every selected (published) submission's file and results, or presigned links where files live in
S3; nobody else can, and every export is in the audit log."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest
import requests

from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.moderation.models import AuditEntry
from tests.leaderboard.metric_tracks import submit_scored, write_bundle

GOOD, FAIR = [0.06, 0.1, 0.2, 0.3], [0.2, 0.3, 0.2, 0.3]


@pytest.fixture
def entries(error_track, owner, outsider, member, tmp_path, settings, sent_tasks, django_capture_on_commit_callbacks):
    """Two selected submissions (owner's Good, outsider's Fair) and two that are not (an unpublished one, a
    withdrawn one)."""
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # the checking child process does not know the fixture's track
    settings.QUOTA_IN_FLIGHT = 10
    load_bundle(write_bundle(tmp_path / "bundle"), allow_rescore=True)
    with django_capture_on_commit_callbacks(execute=True):
        chosen = [submit_scored(owner, GOOD, "Good", tmp_path), submit_scored(outsider, FAIR, "Fair", tmp_path)]
        submit_scored(member, FAIR, "Draft", tmp_path, publish=False)
        withdrawn = submit_scored(outsider, GOOD, "Gone", tmp_path)
        from leaderboard.submissions import services

        services.check_publish(outsider, withdrawn, publish=False)
    return chosen


def take(client, user) -> zipfile.ZipFile:
    client.force_login(user)
    response = client.get("/moderation/tracks/example-error/finals/test.zip")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"].startswith('attachment; filename="example-error-test-finals-')
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def test_the_zip_holds_exactly_the_selected_files_and_their_results(client, entries, maintainer, tmp_path):
    finals = take(client, maintainer)
    assert finals.testzip() is None
    folders = {s.pk: f"submissions/{s.pk}-{s.team.slug}-{s.method.name}" for s in entries}
    assert sorted(finals.namelist()) == sorted(["index.csv", "manifest.json",
                                                *(f"{folders[s.pk]}/{n}" for s in entries for n in ("p.json",
                                                                                                     "results.json"))])
    for submission, positions in zip(entries, (GOOD, FAIR)):
        assert finals.read(f"{folders[submission.pk]}/p.json") == str(positions).encode()  # the bytes sent
        [result] = json.loads(finals.read(f"{folders[submission.pk]}/results.json"))
        assert result["metrics"] == submission.results.get().metrics
    index = list(csv.DictReader(io.StringIO(finals.read("index.csv").decode())))
    assert [(r["method"], r["team"], r["file_in_zip"], r["file_url"]) for r in index] == [
        ("Good", "alice", f"{folders[entries[0].pk]}/p.json", ""), ("Fair", "charlie", f"{folders[entries[1].pk]}/p.json",
                                                                   "")]
    manifest = json.loads(finals.read("manifest.json"))
    assert manifest["count"] == 2 and manifest["storage"] == "local"
    assert manifest["submissions"][0]["predictions_sha256"] == entries[0].predictions_sha256
    assert manifest["submissions"][0]["scores"]["all"]["error"] == pytest.approx(1.5)
    audit = AuditEntry.objects.get(action="export_finals")
    assert (audit.actor_name, audit.track, audit.split, audit.details["submissions"]) == (
        "mallory", "example-error", "test", [s.pk for s in entries])
    assert "finals of example-error/test (2 selected submissions)" in audit.target


def test_only_its_maintainers_take_it(client, entries, owner, track_maintainer):
    client.force_login(owner)
    assert client.get("/moderation/tracks/example-error/finals/test.zip").status_code in (302, 403)
    client.force_login(track_maintainer)  # maintains sqa3d only
    assert client.get("/moderation/tracks/example-error/finals/test.zip").status_code == 403
    assert not AuditEntry.objects.filter(action="export_finals").exists()


def test_with_s3_storage_the_files_are_presigned_links(client, s3_storage, entries, maintainer):
    finals = take(client, maintainer)
    assert sorted(n.rsplit("/", 1)[-1] for n in finals.namelist()) == [
        "index.csv", "manifest.json", "results.json", "results.json"]  # no file: links instead
    manifest = json.loads(finals.read("manifest.json"))
    assert manifest["storage"] == "s3"
    for entry, positions in zip(manifest["submissions"], (GOOD, FAIR)):
        assert entry["file_in_zip"] == "" and "X-Amz-Signature" in entry["file_url"]
        assert requests.get(entry["file_url"], timeout=30).content == str(positions).encode()
