"""Planning a bundle's ``participation``, ``announcements`` and ``webhook`` (``bundle_apply.plan`` calls
``plan_participation``): each difference from the database is a change with the step that makes it,
shown by ``load_benchmark --dry-run`` and audited with the load.

The bundle is the declared state: a section it no longer has is undone (rules removed: anyone may
submit again; the webhook removed; an announcement it no longer lists ends its banner now). Bans
and invitations the bundle lists are its own; the desk's stay as they are.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from leaderboard.benchmarks.bundle_participation import AnnouncementSpec, ParticipationSpec, WebhookSpec
from leaderboard.benchmarks.bundles import BundleError
from leaderboard.benchmarks.models import Benchmark
from leaderboard.participation import announcements, dispatch, webhooks
from leaderboard.participation.models import Announcement, Rules, Terms, Webhook
from leaderboard.participation.selectors import recipients
from leaderboard.participation.services import do_refresh_rows_of
from leaderboard.participation.terms import short, version_of

RULE_FIELDS = ("registration", "verified_email", "allow_domains", "block_domains", "invited", "banned")


def _benchmark(track: str) -> Benchmark:
    return Benchmark.objects.get(track=track)


def _users_named(names: set[str]) -> list[Any]:
    """The accounts a bundle's usernames or addresses name."""
    if not names:
        return []
    return list(get_user_model().objects.filter(Q(username__in=names) | Q(email__in=names)))


def _refresh(track: str, names: set[str]) -> None:
    """The rows of the users whose bundle ban changed: hidden or shown again."""
    benchmark = _benchmark(track)
    for user in _users_named(names):
        do_refresh_rows_of(user, benchmark)


def _write_rules(track: str, spec: ParticipationSpec, old_banned: list[str]) -> None:
    benchmark = _benchmark(track)
    terms = None
    if spec.terms_text:
        terms, _ = Terms.objects.get_or_create(benchmark=benchmark, version=version_of(spec.terms_text),
                                               defaults={"text": spec.terms_text, "file_name": spec.terms_file})
    Rules.objects.update_or_create(benchmark=benchmark, defaults={"terms": terms, **_wanted(spec)})
    _refresh(track, set(old_banned) ^ set(spec.banned))


def _remove_rules(track: str) -> None:
    rules = Rules.objects.get(benchmark__track=track)
    banned = set(rules.banned)
    rules.delete()
    _refresh(track, banned)


def _wanted(spec: ParticipationSpec) -> dict[str, Any]:
    return {"registration": spec.registration, "verified_email": spec.verified_email,
            "allow_domains": list(spec.allow_domains), "block_domains": list(spec.block_domains),
            "invited": list(spec.invited), "banned": list(spec.banned)}


def _describe(spec: ParticipationSpec) -> str:
    parts = [f"registration {spec.registration}"]
    if spec.terms_text:
        parts.append(f"terms {short(version_of(spec.terms_text))} from {spec.terms_file}")
    if spec.verified_email:
        parts.append("verified e-mail addresses only")
    if spec.allow_domains:
        parts.append(f"addresses at {', '.join(spec.allow_domains)} only")
    if spec.block_domains:
        parts.append(f"no addresses at {', '.join(spec.block_domains)}")
    if spec.invited:
        parts.append(f"{len(spec.invited)} invited")
    if spec.banned:
        parts.append(f"banned: {', '.join(spec.banned)}")
    return "; ".join(parts)


def _hidden_by(benchmark: Benchmark | None, names: set[str]) -> str:
    """``2 published results: NetA, NetB`` that banning ``names`` would hide on ``benchmark``, or empty."""
    from leaderboard.submissions.models import Submission

    users = _users_named(names) if benchmark else []
    methods = sorted(set(Submission.objects.filter(split__benchmark=benchmark, created_by__in=users,
                                                   is_published=True).values_list("method__name", flat=True)))
    return f"{len(methods)} published result{'s' * (len(methods) != 1)}: {', '.join(methods)}" if methods else ""


def _plan_rules(plan: Any, benchmark: Benchmark | None, spec: ParticipationSpec | None) -> None:
    track = plan.bundle.track
    rules = Rules.objects.select_related("terms").filter(benchmark=benchmark).first() if benchmark else None
    if spec is None:
        if rules is not None:
            plan.change(f"participation of {track}: rules removed (no participation section): anyone signed in "
                        "may submit, as without rules", lambda ctx: _remove_rules(track))
        return
    old_banned = list(rules.banned) if rules else []
    step = lambda ctx: _write_rules(track, spec, old_banned)  # noqa: E731
    # A ban hides the rows of what the user published: refused without --allow-rescore, as other hidings.
    hidden = _hidden_by(benchmark, set(spec.banned) - set(old_banned))
    if rules is None:
        plan.change(f"participation of {track}: {_describe(spec)}", step, affected=hidden)
        return
    wanted = _wanted(spec)
    diff = {k: v for k, v in wanted.items() if getattr(rules, k) != v}
    for k, v in diff.items():
        plan.change(f"participation of {track}: {k} {getattr(rules, k)!r} -> {v!r}",
                    affected=hidden if k == "banned" else "")
    have = rules.terms.version if rules.terms else ""
    version = version_of(spec.terms_text) if spec.terms_text else ""
    if version != have:
        plan.change(f"participation of {track}: terms {short(have) or 'none'} -> {short(version) or 'none'}"
                    + (f" (from {spec.terms_file}): every participant accepts them again" if version else
                       ": nobody accepts terms any more"))
    if diff or version != have:
        plan.steps.append(step)


def _plan_announcements(plan: Any, benchmark: Benchmark | None, specs: tuple[AnnouncementSpec, ...]) -> None:
    b = plan.bundle
    have = {a.key: a for a in Announcement.objects.filter(benchmark=benchmark).exclude(key="")} if benchmark else {}
    mailing = [s for s in specs if s.email and (s.key not in have or (not have[s.key].email
                                                                      and have[s.key].mailed_at is None))]
    if mailing and (refused := announcements.mail_refusal(benchmark, len(mailing))):
        raise BundleError([f"{b.path.name}: announcements: {', '.join(s.key for s in mailing)} would be mailed, "
                           f"but {refused[0].lower()}{refused[1:]}"])
    reach = recipients(benchmark).count() if benchmark and mailing else 0
    for spec in specs:
        old = have.get(spec.key)
        mail = f", mailed to its {reach} participant{'s' * (reach != 1)}" if spec in mailing else ""
        if old is None:
            plan.change(f"announce {spec.key!r} on {b.track}: {spec.title!r}, shown until "
                        f"{spec.shows_until:%Y-%m-%d %H:%M} UTC{mail}",
                        lambda ctx, spec=spec: announcements.do_announce(
                            _benchmark(b.track), title=spec.title, body=spec.body, shows_until=spec.shows_until,
                            shows_from=spec.shows_from, email=spec.email, key=spec.key))
            continue
        fields = {"title": spec.title, "body": spec.body, "shows_until": spec.shows_until, "email": spec.email}
        if spec.shows_from is not None:
            fields["shows_from"] = spec.shows_from
        diff = {k: v for k, v in fields.items() if getattr(old, k) != v}
        if diff:
            plan.change(f"announcement {spec.key!r} of {b.track}: {', '.join(diff)} changed{mail}",
                        lambda ctx, old=old, diff=diff: announcements.do_change(old, **diff))
            if mail:
                plan.steps.append(lambda ctx, pk=old.pk: dispatch.send_after_commit(dispatch.MAIL_ANNOUNCEMENT,
                                                                                    announcement_id=pk))
    declared = {s.key for s in specs}
    now = timezone.now()
    for key, old in have.items():
        if key not in declared and old.shows_until > now:
            plan.change(f"announcement {key!r} of {b.track} is no longer in the bundle: its banner ends now",
                        lambda ctx, old=old: announcements.do_change(old, shows_until=timezone.now()))


def _plan_webhook(plan: Any, benchmark: Benchmark | None, spec: WebhookSpec | None) -> None:
    track = plan.bundle.track
    hook = Webhook.objects.filter(benchmark=benchmark).first() if benchmark else None
    if spec is None and hook is not None:
        plan.change(f"webhook of {track} removed (it posted to {hook.url})",
                    lambda ctx: webhooks.do_set_webhook(_benchmark(track), None))
    elif spec is not None and (hook is None or hook.url != spec.url):
        text = (f"webhook of {track}: post events to {spec.url} (its signing secret is on the desk's "
                "announcements page)" if hook is None else f"webhook of {track}: {hook.url} -> {spec.url}")
        plan.change(text, lambda ctx: webhooks.do_set_webhook(_benchmark(track), spec.url))


def plan_participation(plan: Any, benchmark: Benchmark | None) -> None:
    """Add the changes of the bundle's participation, announcements and webhook to ``plan``."""
    _plan_rules(plan, benchmark, plan.bundle.participation)
    _plan_announcements(plan, benchmark, plan.bundle.announcements)
    _plan_webhook(plan, benchmark, plan.bundle.webhook)
