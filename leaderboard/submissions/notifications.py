"""E-mail to the submitter when scoring ends (console backend by default), and to a
track's maintainers when a published row's re-score on new labels failed.

Sent after the recording transaction commits, from the site worker. A mail
that cannot be sent is logged and never undoes the result. Only aggregate
scores go out, as on the submission page.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse

from leaderboard.benchmarks.permissions import maintainer_group
from leaderboard.submissions.models import ResultState, Submission

log = logging.getLogger(__name__)


def send_outcome(submission_id: int) -> bool:
    """Mail the submitter that submission ``submission_id`` finished or failed; False if not sent."""
    submission = (Submission.objects.select_related("created_by", "method", "split__benchmark", "team")
                  .get(pk=submission_id))
    user = submission.created_by
    if user is None or not user.email or submission.status not in {"finished", "failed"}:
        return False
    result = submission.latest_result if submission.status == "finished" else None
    spec = submission.split.benchmark.spec
    context = {"SITE_NAME": settings.SITE_NAME, "submission": submission, "result": result, "spec": spec, "user": user,
               "primary": result.metrics.get(spec.primary_metric) if result else None,
               "row_state": _row_state(submission),
               "url": settings.SITE_URL + reverse("submissions:detail", args=[submission.pk])}
    subject = render_to_string(f"emails/submission_{submission.status}_subject.txt", context).strip()
    body = render_to_string(f"emails/submission_{submission.status}.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email])
    except OSError:
        log.exception("Could not mail the outcome of submission %s", submission_id)
        return False
    return True


def _row_state(submission: Submission) -> str:
    """The state of the leaderboard row ``submission`` is published as ("" when it has none)."""
    from leaderboard.rankings.models import LeaderboardEntry

    return LeaderboardEntry.objects.filter(submission=submission).values_list("state", flat=True).first() or ""


def send_rescore_failed(submission_id: int) -> int:
    """Mail the maintainers of the track (members of its ``maintainers:<track>`` group and staff, those
    with an address) that the re-score of published submission ``submission_id`` on the split's current
    labels failed, and why; returns how many were mailed (0: none has an address, or not sent)."""
    submission = Submission.objects.select_related("method", "split__benchmark", "team").get(pk=submission_id)
    if _row_state(submission) != ResultState.RESCORE_FAILED:
        return 0
    track = submission.split.benchmark.track
    addresses = sorted(set(get_user_model().objects.filter(Q(groups__name=maintainer_group(track)) | Q(is_staff=True),
                                                           is_active=True).exclude(email="")
                           .values_list("email", flat=True)))
    if not addresses:
        return 0
    context = {"SITE_NAME": settings.SITE_NAME, "submission": submission, "spec": submission.split.benchmark.spec,
               "url": settings.SITE_URL + reverse("moderation:submission", args=[submission.pk])}
    subject = render_to_string("emails/rescore_failed_subject.txt", context).strip()
    try:
        send_mail(subject, render_to_string("emails/rescore_failed.txt", context), settings.DEFAULT_FROM_EMAIL,
                  addresses)
    except OSError:
        log.exception("Could not mail the maintainers of %s about the failed re-score of submission %s", track,
                      submission_id)
        return 0
    return len(addresses)
