"""The submit form's upload in parts, in a real browser (templates/submissions/submit.html).

Files above ``UPLOAD_DIRECT_MAX_BYTES`` are not posted with the form: the page's
JavaScript opens an upload (``POST /api/v1/uploads``), PUTs each slice of the
file to the URL it is handed (the site's own signed URL with local storage, the
store's presigned URL with S3), moves the progress bar, completes the upload
and goes to the submission's page. ``small_parts`` makes the small synthetic
SQA3D predictions (about 15 KB) go in parts of 2 KiB. One part is held back in the browser so that the
bar can be looked at (and photographed) half-way. Local storage and S3 (a
real ``rclone serve s3`` that answers CORS for the site), with the real
pipeline behind; and a bucket without CORS for the site, which the browser
refuses. Screenshots go to test-artifacts/upload-in-parts*.png.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
import uuid
from pathlib import Path

import pytest

from tests.leaderboard.conftest import rclone_s3, scoring_worker
from tests.leaderboard.test_browser import ARTIFACTS, page  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser]
HELD_PART = 3


@pytest.fixture
def small_parts(settings) -> int:
    """Files above 1 KiB go in parts of 2 KiB (several parts for the small SQA3D file)."""
    settings.UPLOAD_DIRECT_MAX_BYTES = 1024
    settings.UPLOAD_PART_BYTES = 2048
    return 2048


def _expected_em(sqa3d_files) -> str:
    from evaluation_workers.tracks import get_track

    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    return f"{result['metrics']['EM'] * 100:.1f}"


def _sign_in(page, live_server, user) -> None:  # noqa: F811
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("text=Sign out")


def _watch(page) -> dict:  # noqa: F811
    """Record every value of the progress bar and status line, and every PUT of a part."""
    seen: dict = {"progress": [], "puts": []}
    page.expose_function("lbProgress", lambda value, text: seen["progress"].append((value, text)))
    page.on("request", lambda r: seen["puts"].append(r.url) if r.method == "PUT" else None)
    return seen


def _open_form(page, live_server, method_name: str, file: Path) -> None:  # noqa: F811
    page.goto(f"{live_server.url}/submissions/new/sqa3d/")
    page.evaluate("""() => {
      const bar = document.getElementById("upload-progress"), text = document.getElementById("upload-status");
      const report = () => window.lbProgress(bar.value, text.textContent);
      new MutationObserver(report).observe(bar, {attributes: true, attributeFilter: ["value"]});
      new MutationObserver(report).observe(text, {childList: true, characterData: true, subtree: true});
    }""")
    page.fill("input[name=method_name]", method_name)
    page.set_input_files("input[name=file]", str(file))


def _hold_part(page, number: int) -> list:  # noqa: F811
    """Intercept the PUT of part ``number`` and keep it waiting until the test lets it go."""
    held: list = []
    # The site's part URL (local storage) or the store's presigned one (S3).
    pattern = re.compile(rf"/uploads/\d+/parts/{number}\?|[?&]partNumber={number}&")
    page.route(pattern, lambda route: held.append(route))
    return held


def _wait_held(page, held: list, timeout: float = 30) -> None:  # noqa: F811
    deadline = time.monotonic() + timeout
    while not held:
        if time.monotonic() > deadline:
            raise AssertionError(f"part {HELD_PART} was never sent; status: "
                                 f"{page.inner_text('#upload-status')!r}")
        page.wait_for_timeout(50)


def _upload_through_the_form(page, live_server, owner, sqa3d_files, small_parts, name: str,  # noqa: F811
                             shot: str) -> tuple[dict, int]:
    file = sqa3d_files["predictions"]
    size = file.stat().st_size
    parts = math.ceil(size / small_parts)
    assert parts > HELD_PART + 1, "the predictions file should span several parts"
    seen = _watch(page)
    _sign_in(page, live_server, owner)
    _open_form(page, live_server, name, file)
    held = _hold_part(page, HELD_PART)
    page.click("button:has-text('Upload and score')")

    _wait_held(page, held)
    # Parts 1 and 2 arrived, part 3 is on its way: the bar stands between them and the end.
    value = page.eval_on_selector("#upload-progress", "b => b.value")
    assert (HELD_PART - 1) * small_parts / size <= value < 1, value
    assert page.is_visible("#upload-progress")
    assert page.inner_text("#upload-status") == f"Uploading… part {HELD_PART - 1} of {parts}"
    page.screenshot(path=ARTIFACTS / shot, full_page=True)
    held[0].continue_()

    page.wait_for_url(re.compile(r"/submissions/\d+/$"), timeout=30_000)
    submission_id = int(re.search(r"/submissions/(\d+)/$", page.url).group(1))
    return seen, submission_id


def _check_progress(seen: dict, size: int, parts: int) -> None:
    values = [v for v, _ in seen["progress"]]
    assert values == sorted(values), values  # the bar only moves forward
    moved = [v for v in values if 0 < v]
    assert len(set(moved)) >= parts - 1, values
    assert max(values) == pytest.approx(1.0), values
    texts = [t for _, t in seen["progress"]]
    for n in range(1, parts):  # the last one may be overtaken by "Checking the file…" and the next page
        assert f"Uploading… part {n} of {parts}" in texts, texts


def _check_scored(page, submission_id: int, em: str) -> None:  # noqa: F811
    page.wait_for_selector("#status.finished", timeout=60_000)
    page.wait_for_selector("#scores")
    assert page.inner_text("td[data-metric=EM]") == em


def test_a_large_file_goes_in_parts_to_the_site_with_a_moving_progress_bar(
        page, live_server, live_pipeline, owner, sqa3d_split, sqa3d_files, small_parts):  # noqa: F811
    from leaderboard.submissions.models import Submission

    em = _expected_em(sqa3d_files)
    file = sqa3d_files["predictions"]
    size, parts = file.stat().st_size, math.ceil(file.stat().st_size / small_parts)

    seen, submission_id = _upload_through_the_form(page, live_server, owner, sqa3d_files, small_parts,
                                                   "PartsNet", "upload-in-parts.png")
    _check_scored(page, submission_id, em)
    page.screenshot(path=ARTIFACTS / "upload-in-parts-scored.png", full_page=True)

    _check_progress(seen, size, parts)
    # Every part went to the site's own signed URL, once.
    assert len(seen["puts"]) == parts
    assert all(u.startswith(f"{live_server.url}/api/v1/uploads/{submission_id}/parts/") for u in seen["puts"])
    stored = Submission.objects.select_related("upload").get(pk=submission_id)
    assert (stored.upload.part_count, stored.upload.part_size) == (parts, small_parts)
    assert stored.file_size == size
    assert stored.predictions_sha256 == hashlib.sha256(file.read_bytes()).hexdigest()
    assert stored.status == "finished"


# With S3 storage the browser PUTs each part straight to the store, another
# origin: the store must answer CORS for the site's origin (README: "with S3 the
# bucket's CORS must allow PUT from the site"). rclone serve s3 does with
# --allow-origin; the shared s3_server fixture has none, which is the refusal case.


@pytest.fixture(scope="module")
def cors_s3_server(live_server, tmp_path_factory):
    """``rclone serve s3`` answering CORS for the live server's origin."""
    with rclone_s3(tmp_path_factory, "s3-cors", allow_origin=live_server.url) as server:
        yield server


@pytest.fixture(scope="module")
def s3_eval_worker(cors_s3_server, redis_url, storage_dirs, tmp_path_factory):
    """A scoring worker that reads predictions from the CORS bucket, on a queue of its own
    (the session's worker was started for local storage)."""
    queue = f"eval-s3-test-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("worker-s3") / "eval-worker.log"
    with scoring_worker(redis_url, storage_dirs, queue, log, EVAL_S3_BUCKET=cors_s3_server["bucket"],
                        EVAL_S3_ENDPOINT_URL=cors_s3_server["endpoint"],
                        EVAL_S3_ACCESS_KEY_ID=cors_s3_server["access_key"],
                        EVAL_S3_SECRET_ACCESS_KEY=cors_s3_server["secret_key"]):
        yield queue


@pytest.fixture
def cors_s3_storage(settings, cors_s3_server, live_pipeline, s3_eval_worker):
    """The site stores predictions in the CORS bucket and sends scoring to the S3 worker."""
    settings.STORAGE_BACKEND = "s3"
    settings.S3_BUCKET, settings.S3_ENDPOINT_URL = cors_s3_server["bucket"], cors_s3_server["endpoint"]
    settings.S3_PUBLIC_ENDPOINT_URL = ""
    settings.S3_ACCESS_KEY_ID = cors_s3_server["access_key"]
    settings.S3_SECRET_ACCESS_KEY = cors_s3_server["secret_key"]
    settings.EVAL_QUEUE_CPU = s3_eval_worker
    return cors_s3_server


def test_with_s3_the_browser_puts_the_parts_straight_into_the_bucket(
        page, live_server, cors_s3_storage, owner, sqa3d_split, sqa3d_files, small_parts):  # noqa: F811
    from leaderboard.lib import storage
    from leaderboard.submissions.models import Submission

    em = _expected_em(sqa3d_files)
    file = sqa3d_files["predictions"]
    size, parts = file.stat().st_size, math.ceil(file.stat().st_size / small_parts)

    seen, submission_id = _upload_through_the_form(page, live_server, owner, sqa3d_files, small_parts,
                                                   "BucketNet", "upload-in-parts-s3.png")
    _check_scored(page, submission_id, em)
    page.screenshot(path=ARTIFACTS / "upload-in-parts-s3-scored.png", full_page=True)

    _check_progress(seen, size, parts)
    # The bytes went to the store through presigned URLs, never through the site.
    assert len(seen["puts"]) == parts
    assert all(u.startswith(f"{cors_s3_storage['endpoint']}/predictions/") and "X-Amz-Signature=" in u
               for u in seen["puts"])
    stored = Submission.objects.select_related("upload").get(pk=submission_id)
    body = storage.s3_client().get_object(Bucket=cors_s3_storage["bucket"], Key=stored.file_key)["Body"].read()
    assert body == file.read_bytes()
    assert stored.upload.part_count == parts
    # The site never saw the bytes: the worker's result supplied the checksum.
    assert stored.predictions_sha256 == hashlib.sha256(file.read_bytes()).hexdigest()
    assert stored.status == "finished"


def test_a_bucket_without_cors_for_the_site_makes_the_form_say_the_upload_failed(
        page, live_server, transactional_db, s3_storage, owner, sqa3d_split, sqa3d_files,  # noqa: F811
        small_parts):
    from leaderboard.lib import storage
    from leaderboard.submissions.models import Upload

    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    _sign_in(page, live_server, owner)
    page.goto(f"{live_server.url}/submissions/new/sqa3d/")
    page.fill("input[name=method_name]", "NoCorsNet")
    page.set_input_files("input[name=file]", str(sqa3d_files["predictions"]))
    page.click("button:has-text('Upload and score')")
    page.wait_for_selector("#upload-status:has-text('Upload failed')", timeout=30_000)
    assert page.inner_text("#upload-status") == "Upload failed: network error"
    assert page.url == f"{live_server.url}/submissions/new/sqa3d/"
    page.screenshot(path=ARTIFACTS / "upload-in-parts-s3-no-cors.png", full_page=True)
    assert any("blocked by CORS policy" in line for line in console), console
    # The upload was opened but no part reached the bucket.
    [upload] = Upload.objects.select_related("submission")
    assert upload.is_open and upload.submission.status == "uploading"
    assert storage.list_parts(upload.submission.file_key, upload.storage_upload_id) == []
