"""E-mail to the submitter when scoring ends (console backend by default).

Sent after the recording transaction commits, from the site worker. A mail
that cannot be sent is logged and never undoes the result. Only aggregate
scores go out, as on the submission page.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.urls import reverse

from leaderboard.submissions.models import Submission

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
               "url": settings.SITE_URL + reverse("submissions:detail", args=[submission.pk])}
    subject = render_to_string(f"emails/submission_{submission.status}_subject.txt", context).strip()
    body = render_to_string(f"emails/submission_{submission.status}.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email])
    except OSError:
        log.exception("Could not mail the outcome of submission %s", submission_id)
        return False
    return True
