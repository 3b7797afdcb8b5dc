"""A submission that explains itself (issue 27): "My submissions" with status, primary score and failure
reason; a failure page that renders its message, links the format page and gives the validator command;
a queued submission's place in its queue and the workers serving it; messages never show raw backticks
and never become HTML."""

from __future__ import annotations

import io
import json
import re

import pytest

from evaluation_workers import contracts
from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import personal_team
from leaderboard.submissions import broker, lifecycle, services
from leaderboard.submissions.models import Submission

# A validator's words with code in backticks, and what nobody may turn into HTML.
HOSTILE = "Expected `answer` to be a string, but got `<b>3</b>` <script>alert(1)</script>"


def create(user, content: bytes, name: str = "p.json", method: str = "ExplainNet") -> Submission:
    return services.check_create_submission(user=user, track="sqa3d", split="test", method_name=method,
                                            file=io.BytesIO(content), file_name=name)


def failed(user, message: str = HOSTILE) -> Submission:
    submission = create(user, b"not json", method="BrokenNet")
    Submission.objects.filter(pk=submission.pk).update(status_detail=message)
    submission.refresh_from_db()
    return submission


def finished(user, sqa3d_files) -> tuple[Submission, dict]:
    submission = create(user, sqa3d_files["predictions"].read_bytes())
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    return submission, result


def rendered_message(page: str) -> None:
    """The hostile message as pages must show it: code as <code>, everything escaped, no raw backtick."""
    assert "<code>answer</code>" in page and "<code>&lt;b&gt;3&lt;/b&gt;</code>" in page, page
    assert "<script>alert" not in page and "<b>3</b>" not in page
    assert "`answer`" not in page and "`&lt;b&gt;" not in page


def test_my_submissions_shows_status_primary_score_and_failure_reason(client, owner, sqa3d_split, sqa3d_files,
                                                                      sent_tasks):
    done, result = finished(owner, sqa3d_files)
    bad = failed(owner)
    client.force_login(owner)
    page = client.get("/submissions/").content.decode()
    header = page.split("<thead>")[1].split("</thead>")[0]
    for column in ("<th>Status</th>", '<th class="num">Primary score</th>', "<th>Failure reason</th>"):
        assert column in header, column
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r'<tr class="submission".*?/submissions/(\d+)/.*?</tr>',
                                                            page, re.S)}
    assert f"{result['metrics']['EM'] * 100:.1f}" in rows[done.pk] and ">EM<" in rows[done.pk]
    assert 'class="status finished"' in rows[done.pk]
    assert 'class="status failed"' in rows[bad.pk] and "invalid input" in rows[bad.pk]
    rendered_message(rows[bad.pk])


def test_a_long_reason_is_cut_at_a_word_without_an_open_code_span(client, owner, sqa3d_split, sent_tasks):
    failed(owner, "Expected " + "`pred_scores` and " * 20 + "more")
    client.force_login(owner)
    row = client.get("/submissions/").content.decode().split('data-label="Failure reason"')[1].split("</td>")[0]
    assert "…" in row and "`" not in row and row.count("<code>") == row.count("</code>") > 0


def test_the_failure_page_renders_the_message_links_the_format_and_gives_the_validator(client, owner,
                                                                                      sqa3d_split, sent_tasks):
    bad = failed(owner)
    client.force_login(owner)
    page = client.get(f"/submissions/{bad.pk}/").content.decode()
    rendered_message(page.split('id="detail"')[1].split("</p>")[0])
    help_box = page.split('id="failure-help"')[1].split("</section>")[0]
    assert 'href="/benchmarks/sqa3d/format/"' in help_box
    commands = [re.sub(r"<[^>]+>", "", c) for c in help_box.split("</pre>")[0].split('<span class="cmd">')[1:]]
    assert commands == ["lb validate --track sqa3d --split test p.json",
                        "python -m evaluation_workers validate --track sqa3d --manifest sqa3d-test-manifest.json "
                        "--predictions p.json"]
    assert 'href="/api/v1/tracks/sqa3d/test/manifest"' in help_box


def test_a_platform_failure_says_it_is_not_the_files_fault(client, owner, sqa3d_split, sent_tasks):
    submission = create(owner, b"not json")
    Submission.objects.filter(pk=submission.pk).update(failure_kind="platform_error", quota="refunded")
    client.force_login(owner)
    help_box = client.get(f"/submissions/{submission.pk}/").content.decode().split('id="failure-help"')[1]
    assert "not your file's" in help_box.split("</section>")[0] and "lb validate" not in help_box.split("</section>")[0]


def test_the_team_history_renders_messages_and_keeps_metric_names_whole(client, owner, sqa3d_split, sent_tasks):
    failed(owner)
    client.force_login(owner)
    page = client.get(f"/submissions/teams/{personal_team(owner).slug}/").content.decode()
    rendered_message(page.split("<tbody>")[1])


def test_a_publish_refusal_shows_its_command_as_code(client, owner, sqa3d_split, sqa3d_files, sent_tasks):
    done, _ = finished(owner, sqa3d_files)
    client.force_login(owner)
    page = client.post(f"/submissions/{done.pk}/publish/", {"publish": "1"}, follow=True).content.decode()
    assert "with <code>lb method set</code>)" in page and "`lb method set`" not in page


@pytest.fixture
def announced(redis_url):
    """A scoring worker announcing itself as ``evaluation_workers.worker.presence`` does, on SQA3D's and
    OpenScan's queues (one worker may score several benchmarks)."""
    from evaluation_workers.worker import presence

    info = presence.describe("eval@test-host", [lifecycle.queue_for(track, bulk=bulk) for bulk in (False, True)
                                                for track in ("sqa3d", "openscan")])
    broker.client().set(contracts.worker_key(info["name"]), json.dumps(info), ex=60)
    yield info
    broker.client().delete(contracts.worker_key(info["name"]))


def test_a_queued_submission_shows_its_place_over_every_queue_of_its_workers(client, owner, outsider, sqa3d_split,
                                                                             sqa3d_files, sent_tasks, announced):
    """Issue 35: the place counts every submission ahead of it for the workers that serve its queue,
    whatever their benchmark, and says so in words: no internal queue name on a page or in the JSON;
    "My submissions" shows it too."""
    from leaderboard.benchmarks.models import Split

    data = sqa3d_files["predictions"].read_bytes()
    others = [create(outsider, data, method=f"SecretNet{i}") for i in range(2)]
    mine = create(owner, data)
    rescored = create(owner, data, method="RescoredNet")
    assert mine.status == "queued" and all(o.status == "queued" for o in others)
    # The first waits for OpenScan, which the same worker scores: ahead all the same. The last is a
    # re-scoring (a bulk queue): the worker takes every new submission first.
    openscan = Split.objects.get(benchmark__track="openscan", name="val")
    Submission.objects.filter(pk=others[0].pk).update(split=openscan, queue=lifecycle.queue_for("openscan"))
    Submission.objects.filter(pk=rescored.pk).update(queue=lifecycle.queue_for("sqa3d", bulk=True))
    client.force_login(owner)
    page = client.get(f"/submissions/{mine.pk}/").content.decode()
    place = page.split('id="queue-place"')[1].split("</div>")[0]
    text = ("3rd in line to be scored: 2 submissions are ahead of it for the scoring workers that serve SQA3D "
            "(on OpenScan and SQA3D).")
    assert text in place
    assert f"Served by 1 scoring worker: eval@test-host ({announced['device']})." in place
    assert "SecretNet" not in page and "charlie" not in page, "only a number of the others"
    assert mine.queue not in page and "eval-cpu" not in page, "no internal queue name"
    assert re.search(r'<progress id="progress"[^>]* hidden>', page), "no empty bar while it waits"
    status = client.get(f"/submissions/{mine.pk}/status.json").json()["queue_place"]
    assert (status["position"], status["ahead"], status["text"]) == (3, 2, text)
    assert status["workers"] == [{"name": "eval@test-host", "device": announced["device"]}]
    assert "eval-cpu" not in json.dumps(status)
    listed = client.get("/submissions/").content.decode()
    row = re.search(rf'<tr class="submission"[^>]*><td data-label="#"><a href="/submissions/{mine.pk}/".*?</tr>',
                    listed, re.S).group(0)
    assert "3rd in line to be scored (2 submissions ahead)" in row and "eval-cpu" not in listed
    # The re-scoring waits behind every new submission.
    assert client.get(f"/submissions/{rescored.pk}/status.json").json()["queue_place"]["position"] == 4
    client.force_login(outsider)
    lifecycle.record_progress(submission_id=others[0].pk, attempt=1, fraction=0.5)  # the first one runs
    assert client.get(f"/submissions/{others[1].pk}/status.json").json()["queue_place"]["position"] == 1
    assert "Next in line to be scored" in client.get(f"/submissions/{others[1].pk}/").content.decode()


def test_a_queue_no_worker_serves_says_so(client, owner, sqa3d_split, sqa3d_files, sent_tasks):
    mine = create(owner, sqa3d_files["predictions"].read_bytes())
    client.force_login(owner)
    place = client.get(f"/submissions/{mine.pk}/").content.decode().split('id="queue-place"')[1].split("</div>")[0]
    assert "Next in line to be scored" in place and "No scoring worker serves SQA3D right now" in place


def test_a_running_submission_shows_its_progress_and_no_place(client, owner, sqa3d_split, sqa3d_files, sent_tasks):
    mine = create(owner, sqa3d_files["predictions"].read_bytes())
    lifecycle.record_progress(submission_id=mine.pk, attempt=1, fraction=0.25, message="Scoring `What` questions")
    client.force_login(owner)
    page = client.get(f"/submissions/{mine.pk}/").content.decode()
    assert '<progress id="progress" max="1" value="0.25">' in page
    assert re.search(r'id="queue-place"[^>]* hidden>', page)
    assert "Scoring <code>What</code> questions" in page
    assert client.get(f"/submissions/{mine.pk}/status.json").json()["queue_place"] is None
