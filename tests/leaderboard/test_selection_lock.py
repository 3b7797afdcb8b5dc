"""The final selection is locked (issue 25): from a split's freeze on (or, on a partitioned split
without dates, from the maintainers' reveal) publishing, withdrawing and republishing cannot change
which submissions represent a team, through the API, the pages and `lb publish`; a submission sent
before the freeze that finished scoring after it may still be published until the reveal; a
maintainer can change it on the team's behalf, audited.

The dates move instead of the clock (as in ``test_challenge_phases``); a submission's sending and
its first result are dated by ``entry`` where the test needs them before the freeze.
"""

from __future__ import annotations

import io
from datetime import UTC, timedelta
from typing import Any

import pytest
from django.utils import timezone
from django.utils.html import escape

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import LabelSet, Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Result, Submission
from leaderboard_cli.main import main
from tests.leaderboard.conftest import describe_method

HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _settings(settings) -> None:
    settings.PAGE_CACHE_SECONDS = 0  # the dates move, not the clock: a cached page would outlive them
    settings.QUOTA_IN_FLIGHT = settings.QUOTA_PER_DAY = 20


@pytest.fixture
def split(sqa3d_split, sent_tasks) -> Split:
    """sqa3d/test with a public subset: each submission has a public and a private result."""
    LabelSet.objects.filter(split=sqa3d_split, is_active=True).update(has_partition=True)
    return sqa3d_split


@pytest.fixture(scope="module")
def scored(sqa3d_files) -> dict[str, Any]:
    return get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)


def schedule(split: Split, **offsets: timedelta | None) -> Split:
    """Set the split's dates to now + each offset (None clears one)."""
    now = timezone.now()
    Split.objects.filter(pk=split.pk).update(**{k: now + v if v is not None else None for k, v in offsets.items()})
    split.refresh_from_db()
    return split


def _part(result: dict[str, Any], name: str, em: float) -> dict[str, Any]:
    return {**result, "partition": name, "metrics": {**result["metrics"], "EM": em}, "details": {"partition": name}}


def send(user, method: str, sqa3d_files, sent: timedelta | None = None) -> Submission:
    """A submission sent now (the split must accept it), dated ``sent`` from now if given."""
    submission = services.check_create_submission(
        user=user, track="sqa3d", split="test", method_name=method,
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    describe_method(submission.method)
    if sent is not None:
        Submission.objects.filter(pk=submission.pk).update(created_at=timezone.now() + sent)
    return submission


def finish(submission: Submission, scored: dict[str, Any], public: float, private: float,
           finished: timedelta | None = None) -> Submission:
    """Record its public and private results, dated ``finished`` from now if given."""
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=_part(scored, "public", public),
                            more_results=[_part(scored, "private", private)])
    if finished is not None:
        Result.objects.filter(submission=submission).update(created_at=timezone.now() + finished)
    return Submission.objects.get(pk=submission.pk)


def entry(user, method: str, sqa3d_files, scored, public: float, private: float) -> Submission:
    """A submission sent three hours ago and scored two hours ago."""
    return finish(send(user, method, sqa3d_files, sent=-3 * HOUR), scored, public, private, finished=-2 * HOUR)


def token(user) -> dict[str, str]:
    return {"Authorization": f"Token {do_create_token(user)}"}


def board(client) -> list[tuple[str, float]]:
    return [(r["method"], r["scores"]["EM"]) for r in client.get("/api/v1/leaderboards/sqa3d?split=test").json()["rows"]
            if not r.get("paper")]


def published(owner) -> set[int]:
    return set(Submission.objects.filter(team__members=owner, is_published=True).values_list("pk", flat=True))


def page_publish(client, submission: Submission, publish: bool = True) -> str:
    return client.post(f"/submissions/{submission.pk}/publish/", {"publish": "1" if publish else "0"},
                       follow=True).content.decode()


def test_it_refuses_swapping_in_a_better_private_result_of_the_same_method_after_the_reveal(
        client, owner, split, sqa3d_files, scored):
    """The probe: 0.60 public before the reveal, 0.50 private after it; republishing the method's
    0.70-private submission once it can be seen is refused through the API, the page and the withdraw."""
    schedule(split, freeze_at=HOUR, deadline=2 * HOUR)
    first = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    better = entry(owner, "QNet", sqa3d_files, scored, public=0.55, private=0.70)
    headers = token(owner)
    assert client.post(f"/api/v1/submissions/{first.pk}/publish", headers=headers).status_code == 200
    assert board(client) == [("QNet", 0.60)]

    split = schedule(split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    assert board(client) == [("QNet", 0.50)]  # its first reader reveals it
    refused = client.post(f"/api/v1/submissions/{better.pk}/publish", headers=headers)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "selection_locked"
    freeze = f"{split.freeze_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    assert f"The selection on sqa3d/test is final since the freeze, {freeze}" in error["message"]
    assert f"#{better.pk} (QNet) cannot be published" in error["message"]
    assert "Only a maintainer can change it now, on the team's behalf (audited)." in error["message"]

    client.force_login(owner)
    assert escape(error["message"]) in page_publish(client, better)  # the page says the API's words
    withdrawn = page_publish(client, first, publish=False)
    assert "is final since the freeze" in withdrawn and f"#{first.pk} (QNet) cannot be withdrawn" in withdrawn
    assert published(owner) == {first.pk}
    assert board(client) == [("QNet", 0.50)]


def test_it_refuses_publishing_another_method_of_the_team_after_the_freeze(client, owner, member, split, sqa3d_files,
                                                                           scored):
    schedule(split, freeze_at=HOUR, deadline=2 * HOUR)
    first = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    other = entry(owner, "RNet", sqa3d_files, scored, public=0.40, private=0.90)
    services.check_publish(owner, first)

    split = schedule(split, freeze_at=-HOUR, deadline=HOUR)  # frozen: private scores still hidden
    refused = client.post(f"/api/v1/submissions/{other.pk}/publish", headers=token(member))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "selection_locked"
    message = refused.json()["error"]["message"]
    assert f"#{other.pk} (RNet) cannot be published" in message
    # What is still allowed, and why this one is not it.
    assert ("Until the reveal, only a submission sent before the freeze that finished scoring after it may still "
            "be published") in message
    assert f"#{other.pk} finished scoring at" in message and "before the freeze" in message
    client.force_login(member)
    assert escape(message) in page_publish(client, other)
    assert "cannot be withdrawn" in page_publish(client, first, publish=False)

    schedule(split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    assert board(client) == [("QNet", 0.50)]  # the frozen selection's private score
    refused = client.post(f"/api/v1/submissions/{other.pk}/publish", headers=token(owner))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "selection_locked"
    assert "cannot be published" in page_publish(client, other)
    assert published(owner) == {first.pk}
    assert board(client) == [("QNet", 0.50)]


def test_a_submission_sent_before_the_freeze_that_finished_after_it_may_be_published_until_the_reveal(
        client, owner, split, sqa3d_files, scored):
    schedule(split, freeze_at=HOUR, deadline=2 * HOUR)
    first = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    services.check_publish(owner, first)
    late = send(owner, "QNet", sqa3d_files)
    later = send(owner, "RNet", sqa3d_files)
    after = send(owner, "SNet", sqa3d_files)

    schedule(split, freeze_at=-HOUR, deadline=HOUR)  # frozen
    Submission.objects.filter(pk__in=[late.pk, later.pk]).update(created_at=timezone.now() - 2 * HOUR)
    late = finish(late, scored, public=0.58, private=0.80)  # scored now, after the freeze
    client.force_login(owner)
    page = client.get(f"/submissions/{late.pk}/").content.decode()
    assert 'id="selection-note"' in page and "sent before the freeze and finished scoring after it" in page
    assert "may still be published until the reveal" in page
    banner = client.get("/benchmarks/sqa3d/").content.decode()
    assert "sent before the freeze that finished scoring after it may still be published until the reveal" in banner

    assert client.post(f"/api/v1/submissions/{late.pk}/publish", headers=token(owner)).status_code == 200
    assert published(owner) == {late.pk}  # it replaced its method's row
    assert board(client) == [("QNet", 0.60)]  # held until the reveal
    # Sent after the freeze (a maintainer reopened the split, or moved the freeze): not the exception.
    finish(after, scored, public=0.3, private=0.99)
    refused = client.post(f"/api/v1/submissions/{after.pk}/publish", headers=token(owner)).json()["error"]
    assert refused["code"] == "selection_locked"
    assert f"#{after.pk} was sent at" in refused["message"] and "after the freeze" in refused["message"]
    # The exception publishes; it does not withdraw.
    assert "cannot be withdrawn" in page_publish(client, late, publish=False)

    schedule(split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    assert board(client) == [("QNet", 0.80)]
    later = finish(later, scored, public=0.5, private=0.95)  # finished after the reveal: too late
    refused = client.post(f"/api/v1/submissions/{later.pk}/publish", headers=token(owner)).json()["error"]
    assert refused["code"] == "selection_locked" and "Once the board is revealed nothing more can be published" in refused["message"]
    assert published(owner) == {late.pk}


def test_the_lock_follows_the_phases_open_frozen_revealed(client, owner, split, sqa3d_files, scored):
    schedule(split, freeze_at=HOUR, deadline=2 * HOUR)
    a = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    b = entry(owner, "QNet", sqa3d_files, scored, public=0.55, private=0.70)
    assert phases.selection_locked_since(split) is None
    for submission, publish in ((a, True), (b, True), (b, False), (a, True)):  # open: any change
        services.check_publish(owner, submission, publish=publish)
    assert published(owner) == {a.pk}
    assert "is final since" not in client.get("/benchmarks/sqa3d/").content.decode()

    split = schedule(split, freeze_at=-HOUR, deadline=HOUR)
    assert phases.selection_locked_since(split) == split.freeze_at
    banner = client.get("/benchmarks/sqa3d/").content.decode()
    assert 'id="selection-lock"' in banner and escape("Each team's selection is final since the freeze") in banner
    with pytest.raises(services.SelectionLocked, match="cannot be withdrawn"):
        services.check_publish(owner, a, publish=False)
    with pytest.raises(services.SelectionLocked, match="cannot be published"):
        services.check_publish(owner, b)
    services.check_publish(owner, a)  # no change: publishing what is published stays allowed

    schedule(split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    with pytest.raises(services.SelectionLocked, match="cannot be published"):
        services.check_publish(owner, b)
    assert board(client) == [("QNet", 0.50)]
    assert published(owner) == {a.pk}


def test_a_partitioned_split_without_dates_locks_when_a_maintainer_reveals_it(client, owner, maintainer, split,
                                                                             sqa3d_files, scored):
    a = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    b = entry(owner, "QNet", sqa3d_files, scored, public=0.55, private=0.70)
    services.check_publish(owner, a)
    services.check_publish(owner, b)
    services.check_publish(owner, a)  # no dates, not revealed: the team may change its mind
    assert board(client) == [("QNet", 0.60)]

    client.force_login(maintainer)
    client.post("/moderation/tracks/sqa3d/", {"action": "reveal", "split": "test", "reason": "results day"})
    split.refresh_from_db()
    assert phases.selection_locked_since(split) == split.revealed_at
    with pytest.raises(services.SelectionLocked) as refused:
        services.check_publish(owner, b)
    assert (f"final since the maintainers revealed it, {split.revealed_at.astimezone(UTC):%Y-%m-%d %H:%M} "
            "UTC") in str(refused.value)
    client.logout()
    assert board(client) == [("QNet", 0.50)]
    assert escape("Each team's selection is final since the maintainers revealed it") in client.get(
        "/benchmarks/sqa3d/").content.decode()

    # A split without dates or a public subset has no challenge to lock, revealed or not.
    LabelSet.objects.filter(split=split, is_active=True).update(has_partition=False)
    split = Split.objects.get(pk=split.pk)
    assert phases.selection_locked_since(split) is None


def test_a_maintainer_can_change_the_selection_on_the_teams_behalf_audited(client, owner, maintainer, split,
                                                                           sqa3d_files, scored):
    schedule(split, freeze_at=HOUR, deadline=2 * HOUR)
    first = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    fixed = entry(owner, "QNet", sqa3d_files, scored, public=0.55, private=0.70)
    services.check_publish(owner, first)
    client.force_login(maintainer)
    page = client.post(f"/moderation/submissions/{fixed.pk}/publish/", {"on": "1", "reason": "too early"},
                       follow=True).content.decode()
    assert "is not locked" in page and published(owner) == {first.pk}  # before the lock it is the team's act

    schedule(split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    review = client.get(f"/moderation/submissions/{fixed.pk}/").content.decode()
    assert "Publish on the team's behalf" in review  # a literal of the template: not escaped
    page = client.post(f"/moderation/submissions/{fixed.pk}/publish/", {"on": "1"}, follow=True).content.decode()
    assert "A reason is required" in page and published(owner) == {first.pk}
    client.force_login(owner)  # the team cannot use the desk's override
    assert client.post(f"/moderation/submissions/{fixed.pk}/publish/", {"on": "1", "reason": "x"}).status_code == 403

    client.force_login(maintainer)
    reason = f"The upload of #{first.pk} was truncated by a storage fault of ours (ticket 41)."
    page = client.post(f"/moderation/submissions/{fixed.pk}/publish/", {"on": "1", "reason": reason},
                       follow=True).content.decode()
    assert escape("published on the team's behalf") in page
    assert published(owner) == {fixed.pk}
    assert board(client) == [("QNet", 0.70)]
    audit = AuditEntry.objects.get(action="publish_for_team")
    assert (audit.actor, audit.reason, audit.submission_id, audit.split) == (maintainer, reason, fixed.pk, "test")
    assert audit.details == {"team": owner.username, "method": "QNet", "was_published": [first.pk]}

    client.post(f"/moderation/submissions/{fixed.pk}/publish/", {"on": "0", "reason": "withdrawn at their request"})
    assert published(owner) == set() and board(client) == []
    assert AuditEntry.objects.get(action="withdraw_for_team").details["was_published"] == [fixed.pk]
    log = client.get("/moderation/audit/").content.decode()
    assert "Withdraw For Team" in log and "withdrawn at their request" in log and "Publish For Team" in log


def test_lb_publish_shows_the_same_refusal(live_server, owner, lb_config, split, sqa3d_files, scored, capsys):
    schedule(split, freeze_at=HOUR, deadline=2 * HOUR)
    first = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    better = entry(owner, "QNet", sqa3d_files, scored, public=0.55, private=0.70)
    services.check_publish(owner, first)
    schedule(split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    with pytest.raises(services.SelectionLocked) as refused:
        services.check_publish(owner, better)
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    capsys.readouterr()
    assert main(["publish", str(better.pk)]) == 1
    assert str(refused.value) in capsys.readouterr().err


def test_the_admin_form_cannot_change_what_is_published(client, owner, maintainer, split, sqa3d_files, scored):
    """Staff change a submission in /admin/ without touching its publication: that goes through the
    team's publish or the desk's audited publish for the team, which know the lock."""
    maintainer.is_superuser = True
    maintainer.save()
    submission = entry(owner, "QNet", sqa3d_files, scored, public=0.60, private=0.50)
    client.force_login(maintainer)
    page = client.get(f"/admin/submissions/submission/{submission.pk}/change/").content.decode()
    assert 'name="is_published"' not in page
    form = {"team": submission.team_id, "method": submission.method_id, "split": submission.split_id,
            "created_by": owner.pk, "file_name": submission.file_name, "file_size": submission.file_size,
            "is_published": "on", "results-TOTAL_FORMS": "0", "results-INITIAL_FORMS": "0"}
    client.post(f"/admin/submissions/submission/{submission.pk}/change/", form)
    assert published(owner) == set()
