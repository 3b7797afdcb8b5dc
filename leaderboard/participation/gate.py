"""Whether a user may submit to a benchmark, and if not, why and what to do: one answer for the upload
form, the API (HTTP 403 with ``error.code``), ``lb submit`` and ``GET /api/v1/benchmarks/<track>/participation``.

The checks, in order (the first that fails is the answer):

1. ``banned``: a maintainer banned the user from the benchmark (or staff from every benchmark), or
   the bundle's ``participation.banned`` names them.
2. ``email_domain_not_allowed``: the address is at a blocked domain, or ``email_domains.allow`` is set
   and the address (or its absence) is at none of them.
3. ``email_not_verified``: ``verified_email`` is on, or ``email_domains.allow`` is set (an address
   nobody verified proves no domain), and the account's address is not verified.
4. ``terms_not_accepted``: the current terms (by version) are not accepted; ``terms_url`` and
   ``terms_version`` come with it. New terms ask again.
5. ``participation_denied`` / ``participation_pending``: a maintainer denied the request; or under
   ``registration: approval`` the request waits (or was never made); under ``invite`` the user is
   not invited.

A benchmark without a ``participation`` section only has the first check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.urls import reverse

from leaderboard.accounts import emails
from leaderboard.benchmarks.models import Benchmark
from leaderboard.participation.models import Participant, Registration, Rules
from leaderboard.participation.selectors import (
    active_ban,
    banned_by_bundle,
    participant_of,
    rules_of,
)
from leaderboard.participation.terms import short


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    fields: dict[str, str] = field(default_factory=dict)  # terms_url and terms_version, for terms_not_accepted


def site_url(name: str, *args: Any) -> str:
    return settings.SITE_URL + reverse(name, args=args)


def terms_url(benchmark: Benchmark) -> str:
    return site_url("participation:terms", benchmark.track)


def _covers(domain: str, rules: list[str]) -> bool:
    return any(domain == d or domain.endswith("." + d) for d in rules)


def _domain(user: Any) -> str:
    return emails.normalized(getattr(user, "email", "")).rpartition("@")[2]


def is_invited(user: Any, rules: Rules, participant: Participant | None) -> bool:
    """Invited on the desk, or named by the bundle: by username, or by an address the account verified (an
    address anybody may type into an account invites nobody)."""
    if participant and participant.invited:
        return True
    names = {user.get_username()} | ({emails.normalized(user.email)} if emails.is_verified(user) else set())
    return bool(names & set(rules.invited))


def state_of(user: Any, rules: Rules | None, participant: Participant | None) -> str:
    """The user's registration state: ``approved`` (may take part, as far as registration goes),
    ``pending``, ``not_requested``, ``denied`` or ``not_invited``."""
    state = participant.state if participant else Participant.State.NONE
    if state == Participant.State.DENIED:
        return "denied"
    if rules is None or rules.registration == Registration.OPEN or state == Participant.State.APPROVED:
        return "approved"
    if rules.registration == Registration.INVITE:
        return "approved" if is_invited(user, rules, participant) else "not_invited"
    return "pending" if state == Participant.State.PENDING else "not_requested"


def _email_refusal(user: Any, benchmark: Benchmark, rules: Rules) -> Refusal | None:
    title, page = benchmark.title, site_url("accounts:email")
    domain = _domain(user)
    if domain and _covers(domain, rules.block_domains):
        return Refusal("email_domain_not_allowed",
                       f"{title} does not accept addresses at {domain}. Use another address (change it at {page}, "
                       "then open the link mailed to it).")
    if rules.allow_domains and not (domain and _covers(domain, rules.allow_domains)):
        where = ", ".join(rules.allow_domains)
        yours = f"yours is at {domain}" if domain else "your account has none"
        return Refusal("email_domain_not_allowed",
                       f"{title} accepts addresses at {where} (or their subdomains) only, verified; {yours}. Set "
                       f"one at {page}, then open the link mailed to it.")
    if (rules.verified_email or rules.allow_domains) and not emails.is_verified(user):
        what = (f"Your address {user.email} is not verified yet: open the link mailed to it, or have it mailed "
                f"again at {page}." if user.email else f"Your account has no address: add one at {page}, then open "
                                                       "the link mailed to it.")
        return Refusal("email_not_verified", f"{title} accepts submissions from verified e-mail addresses only. "
                                             + what)
    return None


def _terms_refusal(benchmark: Benchmark, rules: Rules, participant: Participant | None) -> Refusal | None:
    terms = rules.terms
    if terms is None or (participant and participant.terms_version == terms.version):
        return None
    url = terms_url(benchmark)
    how = f"read them at {url} and accept them there, or with `lb participate {benchmark.track}`"
    if participant and participant.terms_accepted_at:
        text = (f"The terms of use of {benchmark.title} changed since you accepted them on "
                f"{participant.terms_accepted_at:%Y-%m-%d} (now version {short(terms.version)}): {how}.")
    else:
        text = f"Accept the terms of use of {benchmark.title} (version {short(terms.version)}) before submitting: {how}."
    if rules.registration == Registration.APPROVAL and not (participant and participant.state):
        text += " Accepting them asks its maintainers to let you take part."
    return Refusal("terms_not_accepted", text, {"terms_url": url, "terms_version": terms.version})


def _registration_refusal(user: Any, benchmark: Benchmark, rules: Rules | None,
                          participant: Participant | None) -> Refusal | None:
    state, title = state_of(user, rules, participant), benchmark.title
    if state == "denied":
        because = f": {participant.reason}" if participant and participant.reason else ""
        return Refusal("participation_denied", f"The maintainers of {title} denied your request to take part"
                                               f"{because}. Ask them if you think this is a mistake.")
    if state == "not_invited":
        return Refusal("participation_denied", f"{title} takes part by invitation only, and you are not invited: "
                                               "ask its maintainers for an invitation.")
    if state == "pending":
        when = f" (sent {participant.requested_at:%Y-%m-%d})" if participant and participant.requested_at else ""
        return Refusal("participation_pending", f"Your request to take part in {title}{when} waits for its "
                                                "maintainers' approval; you may submit once they approve it.")
    if state == "not_requested":
        return Refusal("participation_pending", f"The maintainers of {title} approve each participant: ask to "
                                                f"take part at {terms_url(benchmark)} or with `lb participate "
                                                f"{benchmark.track}`, then wait for their approval.")
    return None


def refusal(user: Any, benchmark: Benchmark) -> Refusal | None:
    """Why ``user`` may not submit to ``benchmark`` now, or None (the order is the module's)."""
    rules = rules_of(benchmark)
    ban = active_ban(user, benchmark)
    if ban is not None or banned_by_bundle(user, rules):
        where = "every benchmark of this site" if ban is not None and ban.benchmark_id is None else benchmark.title
        because = f": {ban.reason}" if ban is not None and ban.reason else ""
        return Refusal("banned", f"You are banned from {where}{because}. Your uploads are refused and your rows "
                                 "are hidden; write to its maintainers if you think this is a mistake.")
    if rules is None:
        return None
    participant = participant_of(user, benchmark)
    return (_email_refusal(user, benchmark, rules) or _terms_refusal(benchmark, rules, participant)
            or _registration_refusal(user, benchmark, rules, participant))


def state_json(user: Any, benchmark: Benchmark) -> dict[str, Any]:
    """``GET /api/v1/benchmarks/<track>/participation``: the caller's state and what the benchmark asks."""
    rules = rules_of(benchmark)
    participant = participant_of(user, benchmark)
    terms = rules.terms if rules else None
    refused = refusal(user, benchmark)
    return {
        "track": benchmark.track,
        "registration": rules.registration if rules else Registration.OPEN.value,
        "terms_version": terms.version if terms else None,
        "terms_url": terms_url(benchmark) if terms or (rules and rules.registration != Registration.OPEN) else None,
        "terms_accepted": bool(terms and participant and participant.terms_version == terms.version),
        "accepted_version": participant.terms_version if participant and participant.terms_version else None,
        "accepted_at": participant.terms_accepted_at.isoformat() if participant and participant.terms_accepted_at
        else None,
        "state": state_of(user, rules, participant),
        "verified_email_required": bool(rules and (rules.verified_email or rules.allow_domains)),
        "email_domains": list(rules.allow_domains) if rules else [],
        "email_verified": emails.is_verified(user),
        "banned": bool(refused and refused.code == "banned"),
        "may_submit": refused is None,
        "refusal": None if refused is None else {"code": refused.code, "message": refused.message, **refused.fields},
    }
