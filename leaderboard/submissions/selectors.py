"""Reads of submissions for pages and the API."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from leaderboard.submissions.models import Method, Submission


def list_submissions_for(user: AbstractBaseUser) -> QuerySet[Submission]:
    return (Submission.objects.filter(team__members=user)
            .select_related("method", "split__benchmark", "team").order_by("-created_at"))


def submission_as_json(submission: Submission) -> dict[str, Any]:
    """What the owner may know of a submission: status and aggregate scores only."""
    result = submission.latest_result
    return {
        "id": submission.pk,
        "track": submission.split.benchmark.track,
        "split": submission.split.name,
        "method": submission.method.name,
        "team": submission.team.name,
        "file_name": submission.file_name,
        "file_size": submission.file_size,
        "predictions_sha256": submission.predictions_sha256,
        "status": submission.status,
        "quota": submission.quota,
        "progress": round(submission.progress, 4),
        "message": submission.status_detail if not submission.is_done else "",
        "error": ({"kind": submission.failure_kind, "message": submission.status_detail}
                  if submission.status == Submission.Status.FAILED else None),
        "is_published": submission.is_published,
        "created_at": submission.created_at.isoformat(),
        "finished_at": submission.finished_at.isoformat() if submission.finished_at else None,
        "result": _result_as_json(result, submission) if result else None,
    }


def _result_as_json(result: Any, submission: Submission) -> dict[str, Any]:
    """The result, with its per-class details as the split's labels allow (a submitter must not
    learn from them which hidden classes exist, or how large they are: rankings.drilldown)."""
    from leaderboard.rankings.drilldown import public_details

    body = result.as_json()
    body["details"] = public_details(body["details"], submission.split)
    return body


def method_as_json(method: Method) -> dict[str, Any]:
    return {"id": method.pk, "name": method.name, "team": method.team.slug, "description": method.description,
            "authors": method.authors, "paper_url": method.paper_url, "code_url": method.code_url,
            "uses_extra_data": method.uses_extra_data, "details": method.details,
            "anonymous": method.is_anonymous,
            "revealed_at": method.revealed_at.isoformat() if method.revealed_at else None,
            "missing_for_publishing": [str(m) for m in method.missing_metadata]}
