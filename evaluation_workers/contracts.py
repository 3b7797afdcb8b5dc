"""What the site and the scoring workers say to each other (stdlib only).

The two processes meet only by these task names: the site sends
``SCORE_SUBMISSION`` to an eval queue; the worker answers with
``RECORD_PROGRESS`` and then ``RECORD_RESULT`` or ``RECORD_FAILURE`` on the
site queue. Payloads are JSON primitives. ``attempt`` counts enqueues of one
submission, so a late message from an earlier attempt is recognised and dropped.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

SCHEMA_VERSION = 1

SCORE_SUBMISSION = "evaluation.score_submission"
RECORD_PROGRESS = "submissions.record_progress"
RECORD_RESULT = "submissions.record_result"
RECORD_FAILURE = "submissions.record_failure"

FailureKind = Literal["invalid_input", "platform_error"]


class ScoreRequest(TypedDict):
    """Keyword arguments of ``SCORE_SUBMISSION``.

    ``predictions_key`` is relative to the worker's uploads root (or bucket);
    ``labels_key`` is relative to its labels root. Neither holds data.
    """

    schema: int
    submission_id: int
    attempt: int
    track: str
    predictions_key: str
    labels_key: str
    reply_queue: str


class ProgressReport(TypedDict):
    submission_id: int
    attempt: int
    fraction: float
    message: str


class ResultReport(TypedDict):
    submission_id: int
    attempt: int
    result: dict[str, Any]
    seconds: float
    device: str


class FailureReport(TypedDict):
    submission_id: int
    attempt: int
    kind: FailureKind
    message: str
