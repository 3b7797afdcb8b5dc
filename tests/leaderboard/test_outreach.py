"""Reaching participants (issue 39): announcements (a banner for a set time, mailed to the participants,
rate-limited, audited), the participants' CSV, and the signed webhook, received on the loopback address."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import textwrap
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard.benchmarks.models import Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.participation import announcements, webhooks
from leaderboard.participation.models import Announcement, Webhook, WebhookDelivery
from leaderboard.participation.selectors import current_announcements
from leaderboard.participation.terms import version_of
from tests.conftest import free_port
from tests.leaderboard import permission_world
from tests.leaderboard.conftest import publish, scored_submission
from tests.leaderboard.test_participation import TERMS, gated, load, participation, upload

fast_passwords = pytest.fixture(autouse=True)(permission_world.fast_passwords)


def _addresses(*users: Any) -> None:
    for user in users:
        user.email = f"{user.username}@example.org"
        user.save()


def _announce(client, title: str, email: bool, days: int = 7):
    until = (timezone.now() + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M")
    return client.post("/moderation/tracks/sqa3d/announcements/", {
        "action": "announce", "title": title, "body": "The deadline moves to 1 June.\nGood luck!",
        "shows_until": until, **({"email": "1"} if email else {})}, follow=True)


def test_an_announcement_shows_a_banner_for_a_set_time_and_mails_the_participants_once(
        client, owner, member, outsider, track_maintainer, sqa3d_split, sqa3d_files, sent_tasks, tmp_path,
        mailoutbox, settings, django_capture_on_commit_callbacks):
    _addresses(owner, member, outsider)
    assert upload(client, member, sqa3d_files).status_code == 201  # bob submitted (before the terms)
    load(gated(tmp_path, "terms: terms.md"))
    participation(client, owner, {"accept_terms": version_of(TERMS)})  # alice accepted the terms; charlie neither
    visitor = Client()
    assert "announcement" not in visitor.get("/benchmarks/sqa3d/").content.decode()  # cached now
    client.force_login(track_maintainer)
    assert "Also mail it to the 2 participants" in client.get("/moderation/tracks/sqa3d/announcements/") \
        .content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        done = _announce(client, "Deadline moved", email=True).content.decode()
    assert "Announced: the banner shows until" in done
    announcement = Announcement.objects.get()
    assert [t["kwargs"]["announcement_id"] for t in sent_tasks if t["name"] == "participation.mail_announcement"] \
        == [announcement.pk]
    assert announcements.do_mail(announcement.pk) == 2 and announcements.do_mail(announcement.pk) == 0
    assert sorted(m.to[0] for m in mailoutbox) == ["alice@example.org", "bob@example.org"]
    assert all(len(m.to) == 1 and not m.cc and not m.bcc for m in mailoutbox), "nobody sees another's address"
    assert mailoutbox[0].subject == "[3D Scene Understanding Leaderboards] SQA3D: Deadline moved"
    assert "The deadline moves to 1 June." in mailoutbox[0].body and "accepted the terms of SQA3D" in \
        mailoutbox[0].body
    board = visitor.get("/benchmarks/sqa3d/").content.decode()
    assert f'id="announcement-{announcement.pk}"' in board and "moves to 1 June.<br>Good luck!" in board
    assert "Deadline moved" in client.get("/submissions/new/sqa3d/").content.decode()
    later = announcement.shows_until + timedelta(seconds=1)
    assert current_announcements(sqa3d_split.benchmark, now=later) == []
    # Rate-limited: mailed ones per day; a banner alone is not.
    settings.ANNOUNCEMENT_EMAILS_PER_DAY = 1
    refused = _announce(client, "Another", email=True).content.decode()
    assert ("1 announcement of SQA3D was mailed in the last 24 hours; at most 1 a day are "
            "(ANNOUNCEMENT_EMAILS_PER_DAY)") in refused
    _announce(client, "Banner only", email=False)
    assert list(Announcement.objects.order_by("id").values_list("title", "email")) == [
        ("Deadline moved", True), ("Banner only", False)]
    assert [e.target.split(": ", 1)[1] for e in AuditEntry.objects.filter(action="announce").order_by("id")] == [
        "Deadline moved", "Banner only"]


def test_a_bundles_announcements_are_made_once_changed_in_place_and_ended_when_dropped(
        db, owner, sqa3d_split, sent_tasks, tmp_path, settings, django_capture_on_commit_callbacks):
    _addresses(owner)
    entry = ("announcements:\n- key: labels-fixed\n  title: Labels fixed\n  body: Three questions had wrong "
             "answers.\n  until: 2099-01-01\n  email: true\n")
    path = gated(tmp_path, "registration: open", terms=None, extra=entry)
    assert "announce 'labels-fixed' on sqa3d: 'Labels fixed', shown until 2099-01-01 00:00 UTC, mailed to its 0 " \
           "participants" in load(path, "--dry-run")
    with django_capture_on_commit_callbacks(execute=True):
        load(path)
    assert [t["name"] for t in sent_tasks].count("participation.mail_announcement") == 1
    assert load(path) == "sqa3d: up to date; nothing changed.\n"
    path.write_text(path.read_text().replace("title: Labels fixed", "title: Labels fixed (again)"))
    with django_capture_on_commit_callbacks(execute=True):
        assert "announcement 'labels-fixed' of sqa3d: title changed" in load(path)
    assert Announcement.objects.get().title == "Labels fixed (again)"
    assert [t["name"] for t in sent_tasks].count("participation.mail_announcement") == 1, "not mailed again"
    settings.ANNOUNCEMENT_EMAILS_PER_DAY = 1
    path.write_text(path.read_text() + entry.replace("announcements:\n", "").replace("labels-fixed", "more"))
    with pytest.raises(Exception, match=r"announcements: more would be mailed, but 1 announcement of SQA3D was "
                                        r"mailed in the last 24 hours"):
        load(path)
    path.write_text(path.read_text().split("announcements:")[0])
    assert "announcement 'labels-fixed' of sqa3d is no longer in the bundle: its banner ends now" in load(path)
    assert current_announcements(sqa3d_split.benchmark) == []


def test_the_participants_csv_is_for_maintainers_and_audited(client, owner, member, outsider, track_maintainer,
                                                             sqa3d_split, sqa3d_files, sent_tasks, tmp_path):
    _addresses(owner, member)
    upload(client, owner, sqa3d_files)
    load(gated(tmp_path, "terms: terms.md\nregistration: approval"))
    participation(client, member, {"accept_terms": version_of(TERMS)})
    client.force_login(outsider)
    assert client.get("/moderation/tracks/sqa3d/participants.csv").status_code == 403
    client.force_login(track_maintainer)
    response = client.get("/moderation/tracks/sqa3d/participants.csv")
    assert response["Content-Disposition"] == 'attachment; filename="sqa3d-participants.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["username"], r["email"], r["teams"], r["registration_state"], r["terms_version"],
             r["submissions_counted"], r["banned"]) for r in rows] == [
        ("alice", "alice@example.org", "alice", "not_requested", "", "1", "False"),
        ("bob", "bob@example.org", "", "pending", version_of(TERMS), "0", "False")]
    assert rows[1]["terms_accepted_at"] and rows[1]["requested_at"]
    entry = AuditEntry.objects.get(action="export_participants")
    assert (entry.track, entry.actor_name, entry.details["rows"]) == ("sqa3d", "trackie", 2)


class Receiver:
    """A webhook receiver on 127.0.0.1: records each POST, answers the statuses queued in ``answers``
    (then 200)."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.answers: list[int] = []
        self.got = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 -- http.server's API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append({"headers": dict(self.headers), "body": body})
                status = outer.answers.pop(0) if outer.answers else 200
                self.send_response(status)
                self.end_headers()
                outer.got.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/leaderboard"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[str]:
        return [r["headers"]["X-Leaderboard-Event"] for r in self.received]


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


def signed_by(secret: str, request: dict[str, Any]) -> bool:
    """The receiver's check, written here from the documented scheme (not with the site's code)."""
    parts = dict(p.split("=", 1) for p in request["headers"]["X-Leaderboard-Signature"].split(","))
    expected = hmac.new(secret.encode(), parts["t"].encode() + b"." + request["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts["v1"]) and abs(time.time() - int(parts["t"])) < 60


def test_the_webhook_is_signed_retried_and_told_of_announcements_rows_and_phases(
        client, owner, track_maintainer, sqa3d_split, sqa3d_files, sent_tasks, tmp_path, receiver, settings,
        django_capture_on_commit_callbacks):
    load(gated(tmp_path, "registration: open", terms=None, extra=f"webhook:\n  url: {receiver.url}\n"))
    webhook = Webhook.objects.get()
    client.force_login(track_maintainer)
    page = client.get("/moderation/tracks/sqa3d/announcements/").content.decode()
    assert webhook.secret in page and receiver.url in page
    # An announcement: delivered at once, signed with the secret the desk shows.
    _announce(client, "Deadline moved", email=False)
    [delivery] = WebhookDelivery.objects.all()
    assert webhooks.do_deliver(delivery.pk) is None
    [request] = receiver.received
    assert signed_by(webhook.secret, request) and not signed_by("another secret", request)
    assert request["headers"]["X-Leaderboard-Delivery"] == str(delivery.pk)
    body = json.loads(request["body"])
    assert (body["event"], body["track"], body["title"], body["emailed"]) == ("announcement", "sqa3d",
                                                                             "Deadline moved", False)
    # A newly published row: the receiver fails twice, then takes it (same delivery id each time).
    receiver.answers = [503, 500]
    submission = scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "HookNet")
    publish(owner, submission, django_capture_on_commit_callbacks)
    row = WebhookDelivery.objects.get(event="row_published")
    due = WebhookDelivery.objects.filter(pk=row.pk)
    assert webhooks.do_deliver(row.pk) == settings.WEBHOOK_RETRY_SECONDS
    assert webhooks.do_deliver(row.pk) is None, "not due yet: nobody posts it twice at once"
    due.update(next_try_at=timezone.now())  # the back-off passes
    assert webhooks.do_deliver(row.pk) == 2 * settings.WEBHOOK_RETRY_SECONDS
    due.update(next_try_at=timezone.now())
    assert webhooks.do_deliver_due() == 1
    row.refresh_from_db()
    assert (row.attempts, row.last_status, row.next_try_at is None, row.delivered_at is not None) == (
        3, 200, True, True)
    tries = [r for r in receiver.received if r["headers"]["X-Leaderboard-Event"] == "row_published"]
    assert len(tries) == 3 and {r["headers"]["X-Leaderboard-Delivery"] for r in tries} == {str(row.pk)}
    published = json.loads(tries[-1]["body"])
    assert (published["method"], published["team"], published["split"]) == ("HookNet", "alice", "test")
    assert published["score"] == submission.latest_result.metrics["EM"]
    # A phase change, seen by Celery beat's round; the receiver refuses it until the attempts run out.
    Split.objects.filter(pk=sqa3d_split.pk).update(deadline=timezone.now() - timedelta(minutes=1))
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    receiver.answers = [500]
    assert webhooks.do_check_phases() == 1 and webhooks.do_check_phases() == 0
    phase = WebhookDelivery.objects.get(event="phase_changed")
    assert webhooks.do_deliver(phase.pk) is None
    phase.refresh_from_db()
    assert (phase.payload["from"], phase.payload["to"]) == ("open", "revealed")
    assert (phase.next_try_at, phase.delivered_at, phase.last_error) == (None, None, "answered HTTP 500")
    assert "given up: answered HTTP 500" in client.get("/moderation/tracks/sqa3d/announcements/").content.decode()
    # A new secret (audited): what follows is signed with it.
    client.post("/moderation/tracks/sqa3d/announcements/", {"action": "rotate"})
    client.post("/moderation/tracks/sqa3d/announcements/", {"action": "ping"})
    webhook.refresh_from_db()
    webhooks.do_deliver(WebhookDelivery.objects.get(event="ping").pk)
    assert receiver.events()[-1] == "ping" and signed_by(webhook.secret, receiver.received[-1])
    assert AuditEntry.objects.filter(action="webhook_secret", track="sqa3d").exists()


@pytest.mark.live
def test_the_site_worker_posts_an_event_and_retries_it_through_the_broker(transactional_db, settings, redis_url,
                                                                         queues, maintainer, sqa3d_split, receiver):
    """The real path: the announcement commits, its delivery goes to Redis as a signed site task, a site
    worker posts it, the receiver refuses once, the task sends itself again after the back-off."""
    from celery.contrib.testing.worker import start_worker

    from leaderboard.celery import app
    from leaderboard.moderation.participation_actions import check_announce

    settings.SITE_QUEUE = queues["site"]
    app.conf.CELERY_BROKER_URL = app.conf.broker_url = redis_url
    settings.WEBHOOK_RETRY_SECONDS = 0.5
    webhook = webhooks.do_set_webhook(sqa3d_split.benchmark, receiver.url)
    receiver.answers = [502]
    with start_worker(app, pool="solo", perform_ping_check=False, queues=[queues["site"]], shutdown_timeout=20):
        check_announce(maintainer, sqa3d_split.benchmark, title="Live", body="Through the broker.",
                       shows_until=timezone.now() + timedelta(days=1), email=False)
        deadline = time.monotonic() + 20
        while len(receiver.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert [r["headers"]["X-Leaderboard-Event"] for r in receiver.received] == ["announcement"] * 2
    assert all(signed_by(webhook.secret, r) for r in receiver.received)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.attempts, delivery.last_status, delivery.delivered_at is not None) == (2, 200, True)


def test_the_readmes_receiver_check_accepts_our_signature_and_nothing_else():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = readme.split("Check each request before trusting it:")[1].split("```python\n")[1].split("```")[0]
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(code), namespace)  # noqa: S102 -- the README's own snippet, run as a receiver would
    body, secret = b'{"event": "ping"}', webhooks.new_secret()
    header = webhooks.sign(secret, body, int(time.time()))
    assert namespace["verified"](secret, body, header)
    assert not namespace["verified"](secret, body + b" ", header)
    assert not namespace["verified"](webhooks.new_secret(), body, header)
    assert not namespace["verified"](secret, body, webhooks.sign(secret, body, int(time.time()) - 3600))
