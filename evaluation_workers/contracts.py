"""What the site and the scoring workers say to each other (stdlib only).

The two processes meet only by these task names: the site sends
``SCORE_SUBMISSION`` to an eval queue; the worker answers with
``RECORD_PROGRESS`` (and ``RECORD_HEARTBEAT`` every few seconds while it
scores) and then ``RECORD_RESULT`` or ``RECORD_FAILURE`` on the site queue;
its main process sends ``RECORD_LOST`` when the process scoring an attempt
died (killed, out of memory). Payloads are JSON primitives. ``attempt``
counts enqueues of one submission, so a late message from an earlier attempt
is recognised and dropped; the site also notes the current attempt in the
broker under ``attempt_key``, so that a worker skips a stale message unscored.

Every message in either direction also carries ``signing.FIELD``, its HMAC
under a key the site and the workers share, and ``signing.NONCE``, new for each
message (``signing``): neither side runs a message without them, so the payloads
below never include them. Each payload names the state it belongs to (a
submission's attempt; a result's ``revision``; a paired test and both results'
revisions), and its receiver acts on it only while that state can take it: a
second delivery, or a message of an earlier attempt or revision, changes nothing
(``replays``).
"""

from __future__ import annotations

import os
from typing import Any, Literal, NotRequired, TypedDict

SCHEMA_VERSION = 1

SCORE_SUBMISSION = "evaluation.score_submission"
RECORD_PROGRESS = "submissions.record_progress"
RECORD_RESULT = "submissions.record_result"
RECORD_FAILURE = "submissions.record_failure"
RECORD_HEARTBEAT = "submissions.record_heartbeat"
RECORD_LOST = "submissions.record_lost"
# A header on every message either side sends: when it was sent (seconds since the epoch), so that
# the site's metrics tell how long the oldest message of each queue has waited. Not signed: it
# changes nothing but that figure.
SENT_AT_HEADER = "sent_at"

FailureKind = Literal["invalid_input", "platform_error"]


def _site_prefix() -> str:
    """What begins a site's keys of attempts in the broker: ``BROKER_KEY_PREFIX``, the same for the
    site and its workers ("lb"). Two sites on one Redis database (a staging and a production site,
    two test sessions) give theirs different prefixes: their submission ids overlap, and a claim of
    one site's submission 1 would otherwise make the other's workers drop its submission 1 as taken."""
    return os.environ.get("BROKER_KEY_PREFIX") or "lb"


def attempt_key(submission_id: int) -> str:
    """Broker key holding a submission's current attempt (0 once it is done or cancelled)."""
    return f"{_site_prefix()}:attempt:{submission_id}"


def running_key(submission_id: int, attempt: int) -> str:
    """Broker key of an attempt's claim: ``Claim`` as JSON, written by the worker that took it."""
    return f"{_site_prefix()}:running:{submission_id}:{attempt}"


def seen_key(nonce: str) -> str:
    """Broker key that says a receiver acted on the message with ``nonce`` (``replays``), until it expires."""
    return f"{_site_prefix()}:seen:{nonce}"


def refused_key() -> str:
    """Broker hash counting the messages receivers refused, by ``<task>|<reason>`` (``replays``): read by the
    site's ``/metrics`` (``leaderboard_refused_messages_total``)."""
    return f"{_site_prefix()}:refused-messages"


class Claim(TypedDict):
    """Who took an attempt (``node``, the Celery node name, and ``instance``, that start of it: see
    ``WorkerInfo``) and when (``since``, seconds since the epoch on the worker's clock; once it has
    reported, when it reported), and once it is done what it reported: ``report`` is the task name (``RECORD_RESULT`` or ``RECORD_FAILURE``)
    and ``kwargs`` its signed keyword arguments, the same message the site queue gets, so that the
    site's sweeper can record it when that message was lost with the site worker that took it."""

    node: str
    instance: str
    since: float
    report: NotRequired[str]
    kwargs: NotRequired[dict[str, Any]]


class ScoreRequest(TypedDict):
    """Keyword arguments of ``SCORE_SUBMISSION``.

    ``predictions_key`` is relative to the worker's uploads root (or bucket);
    ``labels_key`` is relative to its labels root. Neither holds data.
    ``predictions_sha256`` is the file's checksum when the site accepted it: the
    worker scores those bytes or reports a platform error, never a score or a
    format error of other bytes. Absent from an older site's requests, and when
    the site never read the file (parts joined by the object store).
    """

    schema: int
    submission_id: int
    attempt: int
    track: str
    predictions_key: str
    labels_key: str
    reply_queue: str
    predictions_sha256: NotRequired[str]


class ProgressReport(TypedDict):
    submission_id: int
    attempt: int
    fraction: float
    message: str


class HeartbeatReport(TypedDict):
    submission_id: int
    attempt: int
    worker: str


class LostReport(TypedDict):
    submission_id: int
    attempt: int
    reason: str


class ResultReport(TypedDict):
    """``result`` is the result JSON; labels with a public subset give the public
    subset's there and the private remainder's in ``more_results`` (each with its
    ``"partition"``)."""

    submission_id: int
    attempt: int
    result: dict[str, Any]
    seconds: float
    device: str
    worker: str
    more_results: NotRequired[list[dict[str, Any]]]


class FailureReport(TypedDict):
    submission_id: int
    attempt: int
    kind: FailureKind
    message: str


WORKER_KEY_PREFIX = "lb:worker:"


def worker_key(name: str) -> str:
    """Broker key a scoring worker rewrites (with an expiry) while it runs: ``presence.WorkerInfo`` as JSON."""
    return f"{WORKER_KEY_PREFIX}{name}"


class WorkerInfo(TypedDict):
    """What a scoring worker says about itself under ``worker_key`` (read by the site's health page,
    and by the sweeper: a claim of another ``instance`` of a node that announces itself now was taken
    by a start of the worker that is gone). ``instance`` is random per start (absent: an older worker)."""

    name: str
    host: str
    pid: int
    device: str
    queues: list[str]
    versions: dict[str, str]
    started_at: float
    seen_at: float
    instance: NotRequired[str]


# The site's sweeper (``leaderboard/submissions/lifecycle.do_sweep``): Celery beat sends it every few
# seconds; the site worker when it starts; a scoring worker when it starts (its earlier start's
# attempts are lost at once). No arguments.
SWEEP = "submissions.sweep"


# Paired significance tests (issue 13). The site asks for one per pair of results; a
# scoring worker loads both submissions' per-unit outcomes (worker-only storage, keyed by
# ``outcomes_key``) and answers, for every metric overall and per group at once, with the
# difference, the raw p-value and the paired interval only. Since issue 34 the p-value is a
# scene-level paired permutation test's (``PAIRED_TEST_NAME``), the interval the scene
# bootstrap's; a split of fewer scenes than its intervals' minimum gets no test.
PAIRED_TEST = "evaluation.paired_test"
PAIRED_TEST_NAME = "paired-permutation-by-scene"  # the test that decides (evaluation_workers.metrics.permutation)


def too_few_scenes(scenes: int, least: int) -> str:
    """Why a pair is not tested, in words: the worker's refusal and the site's own check read alike."""
    return f"too few scenes to test ({scenes} scene{'s' if scenes != 1 else ''}; at least {least})"
RECORD_PAIRED_TEST = "rankings.record_paired_test"


def outcomes_key(track: str, labels_sha256: str, predictions_sha256: str, scorer_version: str) -> str:
    """Where workers keep the per-unit outcomes of one result (in their store, ``outcomes``)."""
    return f"{track}/{labels_sha256}/{predictions_sha256}-v{scorer_version}.npz"


# Retention of the outcomes: per track, the site lists the keys of the results that still need
# theirs (a board row, intervals still to come) and a worker deletes the track's other outcomes
# written before ``written_before`` (seconds since the epoch; the site's list minus its grace).
PRUNE_OUTCOMES = "evaluation.prune_outcomes"


class PruneOutcomesRequest(TypedDict):
    schema: int
    track: str
    keep: list[str]
    written_before: float


class PairedTestRequest(TypedDict):
    """Keyword arguments of ``PAIRED_TEST``: the outcomes of A and B (every key is compared, A - B), and the
    revisions of the two results they are the outcomes of (``Result.revision``), which the answer repeats."""

    schema: int
    test_id: int
    revision_a: int
    revision_b: int
    track: str
    outcomes_a: str
    outcomes_b: str
    reply_queue: str


class PairedFinding(TypedDict):
    """One key's test (a metric overall, or ``<group>/<metric>``): ``test`` names the test that gave
    ``p_value`` (``PAIRED_TEST_NAME``); ``difference`` is A - B as scored, ``p_value`` two-sided and
    not adjusted for multiplicity, ``interval`` the paired 95 % bootstrap interval of A - B; each
    None where undefined (a group neither result has) or withheld (a group spanning fewer than
    ``min_scenes`` of the ``scenes``). ``permutations``: the swaps of scenes the p-value counts
    (all 2^S when ``exact``, else the random ones)."""

    test: str
    difference: float | None
    p_value: float | None
    interval: list[float] | None
    permutations: NotRequired[int | None]
    exact: NotRequired[bool | None]
    scenes: NotRequired[int]
    min_scenes: NotRequired[int]


class PairedTestReport(TypedDict):
    """What ``RECORD_PAIRED_TEST`` receives: aggregates only, never a unit's outcome.

    ``findings`` maps each score key to its ``PairedFinding`` (empty on an error);
    ``error`` is "" or a reason in words ("outcomes unavailable"). ``revision_a`` and ``revision_b``
    are the request's: the site drops an answer whose results have moved on since.
    """

    test_id: int
    revision_a: int
    revision_b: int
    findings: dict[str, PairedFinding]
    resamples: int
    error: str


# Intervals too costly to compute before the score is shown (a CPU worker on MMScan's
# full test split): the scoring worker reports the result without them; the site, once it
# has recorded that result, asks for them on the track's bulk queue, naming the result and
# its revision, and a worker reports them back.
COMPUTE_INTERVALS = "evaluation.compute_intervals"
RECORD_INTERVALS = "submissions.record_intervals"


class IntervalsRequest(TypedDict):
    """Keyword arguments of ``COMPUTE_INTERVALS``: the intervals of the result ``result_id`` at ``revision``
    (``Result.revision``), from the outcomes it was scored with."""

    schema: int
    submission_id: int
    result_id: int
    revision: int
    track: str
    scorer_version: str
    outcomes_key: str
    reply_queue: str


class IntervalsReport(TypedDict):
    """``intervals`` and ``bootstrap`` as in the result JSON (aggregates only); or, when they could
    not be computed, both empty and ``error`` saying why in words (never a unit's outcome), with
    ``retry`` true where asking again later may succeed (the outcomes store could not be read).
    ``result_id`` and ``revision`` are the request's: the site drops the answer once the result has
    moved on (re-scored, new labels, intervals recorded)."""

    submission_id: int
    result_id: int
    revision: int
    intervals: dict[str, Any]
    bootstrap: dict[str, Any]
    error: NotRequired[str]
    retry: NotRequired[bool]
