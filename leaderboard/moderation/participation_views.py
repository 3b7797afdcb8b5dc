"""The desk's pages on who takes part: a track's participants (requests, invitations, bans, the CSV),
its announcements and webhook, and the bans from every benchmark (staff)."""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.timezone import make_aware

from leaderboard.benchmarks.models import Benchmark
from leaderboard.lib.csv_cells import safe_cell
from leaderboard.moderation import participation_actions as actions
from leaderboard.moderation.models import AuditEntry
from leaderboard.moderation.services import check_maintainer
from leaderboard.moderation.views import _done, maintainer_required
from leaderboard.participation.models import Ban, Participant, Webhook
from leaderboard.participation.roster import participant_rows
from leaderboard.participation.selectors import active_bans, recipients, rules_of
from leaderboard.participation.terms import short


def _benchmark(request: HttpRequest, track: str) -> Benchmark:
    benchmark = get_object_or_404(Benchmark, track=track)
    check_maintainer(request.user, benchmark)
    return benchmark


@maintainer_required
def participants(request: HttpRequest, track: str) -> HttpResponse:
    """Requests to approve or deny, invitations, bans on this track, and everyone who takes part."""
    benchmark = _benchmark(request, track)
    if request.method == "POST":
        what, reason = request.POST.get("action", ""), request.POST.get("reason", "")
        if what in {"approve", "deny"}:
            participant = get_object_or_404(Participant.objects.select_related("user", "benchmark"),
                                            pk=request.POST.get("participant"), benchmark=benchmark)
            _done(request, lambda: actions.check_decide(request.user, participant, what == "approve", reason),
                  f"{participant.user.get_username()} is {'approved' if what == 'approve' else 'denied'} on "
                  f"{benchmark.title}.")
        elif what == "invite":
            username = request.POST.get("username", "")
            _done(request, lambda: actions.check_invite(request.user, benchmark, username),
                  f"{username} is invited to {benchmark.title}: they may take part once they accept the terms.")
        elif what == "ban":
            username = request.POST.get("username", "")
            _done(request, lambda: actions.check_ban(request.user, username, benchmark, reason),
                  f"{username} is banned from {benchmark.title}: their uploads are refused and their rows hidden.")
        elif what == "unban":
            ban = get_object_or_404(Ban.objects.select_related("user", "benchmark"), pk=request.POST.get("ban"),
                                    benchmark=benchmark)
            _done(request, lambda: actions.check_lift_ban(request.user, ban, reason),
                  f"The ban of {ban.user.get_username()} is lifted: their published rows are back.")
        return redirect("moderation:participants", track=track)
    rules = rules_of(benchmark)
    rows = participant_rows(benchmark)
    return render(request, "moderation/participants.html", {
        "benchmark": benchmark, "rules": rules, "rows": rows,
        "short_version": short(rules.terms.version) if rules and rules.terms else "",
        "pending": [r for r in rows if r.state == "pending"],
        "bans": active_bans(benchmark), "audit": AuditEntry.objects.filter(track=track, action__in=[
            AuditEntry.Action.APPROVE, AuditEntry.Action.DENY, AuditEntry.Action.INVITE, AuditEntry.Action.BAN,
            AuditEntry.Action.UNBAN, AuditEntry.Action.EXPORT_PARTICIPANTS])[:50]})


CSV_COLUMNS = ["username", "email", "email_verified", "teams", "registration_state", "terms_version",
               "terms_accepted_at", "requested_at", "decided_at", "banned", "submissions_counted"]


@maintainer_required
def participants_csv(request: HttpRequest, track: str) -> HttpResponse:
    """Every participant (accepted the terms, asked, invited, or submitted), audited."""
    benchmark = _benchmark(request, track)
    rows = participant_rows(benchmark)
    actions.check_export_participants(request.user, benchmark, len(rows))
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{track}-participants.csv"'
    response["Cache-Control"] = "private, no-store"
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    iso = lambda m: m.isoformat() if m else ""  # noqa: E731
    for row in rows:
        p = row.participant
        writer.writerow([safe_cell(v) for v in (
            row.user.get_username(), row.user.email, row.email_verified, row.teams, row.state,
            p.terms_version if p else "", iso(p.terms_accepted_at if p else None),
            iso(p.requested_at if p else None), iso(p.decided_at if p else None), row.banned, row.submissions)])
    return response


def _until(raw: str) -> datetime | None:
    when = parse_datetime(raw.strip()) if raw.strip() else None
    return make_aware(when, UTC) if when and when.tzinfo is None else when


@maintainer_required
def outreach(request: HttpRequest, track: str) -> HttpResponse:
    """Announcements (write one: a banner for a set time, mailed if asked) and the webhook (its secret,
    its recent deliveries, a test event)."""
    benchmark = _benchmark(request, track)
    webhook = Webhook.objects.filter(benchmark=benchmark).first()
    if request.method == "POST":
        what = request.POST.get("action", "")
        if what == "announce":
            raw = request.POST.get("shows_until", "")
            until = _until(raw)
            if until is None:
                messages.error(request, f"Expected when the banner ends, as a date and time like 2026-12-31T23:59 "
                                        f"(UTC), but got {raw!r}.")
            else:
                email = request.POST.get("email") == "1"
                _done(request, lambda: actions.check_announce(
                    request.user, benchmark, title=request.POST.get("title", ""), body=request.POST.get("body", ""),
                    shows_until=until, email=email),
                    "Announced: the banner shows until " + f"{until:%Y-%m-%d %H:%M} UTC"
                    + ("; the participants are being mailed." if email else "."))
        elif what in {"rotate", "ping"} and webhook is not None:
            if what == "rotate":
                _done(request, lambda: actions.check_rotate_webhook_secret(request.user, webhook),
                      "The webhook has a new secret: update your receiver.")
            else:
                _done(request, lambda: actions.check_ping_webhook(request.user, webhook),
                      f"A ping event is on its way to {webhook.url}.")
        return redirect("moderation:outreach", track=track)
    return render(request, "moderation/outreach.html", {
        "benchmark": benchmark, "announcements": benchmark.announcements.all()[:50], "webhook": webhook,
        "deliveries": webhook.deliveries.all()[:30] if webhook else [], "reach": recipients(benchmark).count(),
        "default_until": timezone.now() + timedelta(days=7)})


@maintainer_required
def bans(request: HttpRequest) -> HttpResponse:
    """Bans from every benchmark (staff only): ban a user everywhere, or lift such a ban."""
    if not request.user.is_staff:
        raise PermissionDenied("Only staff ban users from every benchmark; a track's maintainers ban from their "
                               "track on its participants page.")
    if request.method == "POST":
        reason = request.POST.get("reason", "")
        if request.POST.get("action") == "ban":
            username = request.POST.get("username", "")
            _done(request, lambda: actions.check_ban(request.user, username, None, reason),
                  f"{username} is banned from every benchmark: their uploads are refused and their rows hidden.")
        elif request.POST.get("action") == "unban":
            ban = get_object_or_404(Ban.objects.select_related("user"), pk=request.POST.get("ban"),
                                    benchmark__isnull=True)
            _done(request, lambda: actions.check_lift_ban(request.user, ban, reason),
                  f"The ban of {ban.user.get_username()} from every benchmark is lifted.")
        return redirect("moderation:bans")
    return render(request, "moderation/bans.html", {
        "bans": active_bans(None), "audit": AuditEntry.objects.filter(
            track="", action__in=[AuditEntry.Action.BAN, AuditEntry.Action.UNBAN])[:50]})
