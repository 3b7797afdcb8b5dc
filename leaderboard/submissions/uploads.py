"""Files uploaded in parts: presigned S3 multipart, or parts PUT to the site.

``check_start_upload`` checks the quota and creates the submission (status
``uploading``) and the store's multipart upload; ``part_urls`` hands out a URL
per part (presigned by the store, or signed by the site for local storage);
``upload_parts`` says what has arrived, which is how a client resumes;
``check_complete_upload`` joins the parts and queues the submission.
``do_expire_uploads`` aborts uploads that never complete and refunds them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.db import transaction
from django.utils import timezone

from leaderboard.accounts.models import Team
from leaderboard.lib import storage
from leaderboard.submissions.lifecycle import (
    Kind,
    Quota,
    Status,
    do_abort_upload,
    do_fail,
    do_transition,
)
from leaderboard.submissions.models import Submission, Upload
from leaderboard.submissions.services import (
    FileRefused,
    StorageUnavailable,
    SubmissionRejected,
    clean_file_name,
    do_create_counted,
    do_submit,
    resolve_request,
    size_message,
    storage_key,
    upload_limit,
)

# S3 allows at most 10,000 parts per upload; larger files get larger parts.
MAX_PARTS = 10_000
_SIGNER_SALT = "leaderboard.upload-part"


class UploadConflict(SubmissionRejected):
    """The upload is not in a state that allows this (missing parts, already completed)."""

    status = 409


def check_start_upload(*, user: AbstractBaseUser, track: str, split: str, method_name: str, file_name: str,
                       size: int, team: Team | str | None = None) -> Upload:
    """Create a submission whose file will arrive in parts; counts against the quota from now."""
    split_obj, team_obj, method_name = resolve_request(user=user, track=track, split=split,
                                                       method_name=method_name, team=team)
    spec, name, limit = split_obj.benchmark.spec, clean_file_name(file_name), upload_limit(split_obj)
    # Refused before a byte is sent, so nothing is created and nothing counts.
    if (refused := spec.name_refusal(name)) is not None:
        raise FileRefused(refused)
    if not isinstance(size, int) or size <= 0:
        raise SubmissionRejected(f"{name}: expected the file's size in bytes (a positive integer).")
    if (refused := spec.size_refusal(name, size, limit)) is not None:
        raise FileRefused(refused)
    do_expire_uploads(team=team_obj)  # stale uploads of this team stop counting first
    submission = do_create_counted(user=user, team=team_obj, split=split_obj, method_name=method_name,
                                   file_name=name)
    part_size = settings.UPLOAD_PART_BYTES
    if size > part_size * MAX_PARTS:
        part_size = math.ceil(size / MAX_PARTS / 2**20) * 2**20
    key = storage_key(submission)
    submission.file_key = key
    submission.save(update_fields=["file_key"])
    return Upload.objects.create(
        submission=submission, storage_upload_id=storage.start_multipart(key), declared_size=size,
        part_size=part_size, part_count=max(1, math.ceil(size / part_size)),
        expires_at=timezone.now() + timedelta(hours=settings.UPLOAD_EXPIRY_HOURS))


def _check_open(upload: Upload) -> None:
    if upload.completed_at is not None:
        raise UploadConflict(f"Upload of #{upload.submission_id} is already complete.")
    if not upload.is_open or upload.submission.status != Status.UPLOADING:
        raise UploadConflict(f"Upload of #{upload.submission_id} was abandoned or cancelled; start a new one.")


def _check_numbers(upload: Upload, numbers: Iterable[int]) -> list[int]:
    numbers = sorted(set(numbers))
    bad = [n for n in numbers if not isinstance(n, int) or not 1 <= n <= upload.part_count]
    if bad or not numbers:
        raise SubmissionRejected(f"Expected part numbers from 1 to {upload.part_count}, got {bad or 'none'}.")
    return numbers


def part_urls(upload: Upload, numbers: Iterable[int], local_url: Callable[[int, str], str]) -> list[dict]:
    """One PUT URL per part number, valid ``UPLOAD_URL_EXPIRY`` seconds.

    ``local_url(number, signature)`` builds the site's own part URL when storage is local.
    """
    _check_open(upload)
    numbers = _check_numbers(upload, numbers)
    key, expiry = upload.submission.file_key, settings.UPLOAD_URL_EXPIRY
    if storage.is_s3():
        return [{"part_number": n, "url": storage.presigned_part_url(key, upload.storage_upload_id, n, expiry)}
                for n in numbers]
    signer = signing.TimestampSigner(salt=_SIGNER_SALT)
    return [{"part_number": n, "url": local_url(n, signer.sign(_signed_value(upload, n)).split(":", 1)[1])}
            for n in numbers]


def _signed_value(upload: Upload, number: int) -> str:
    # The upload's random id is part of what is signed (it never leaves the site), so a
    # signature fits one upload only: not another one, nor one that reuses the submission id.
    return f"{upload.submission_id}.{number}.{upload.storage_upload_id}"


def check_part_signature(upload: Upload, number: int, signature: str) -> bool:
    signer = signing.TimestampSigner(salt=_SIGNER_SALT)
    try:
        signer.unsign(f"{_signed_value(upload, number)}:{signature}", max_age=settings.UPLOAD_URL_EXPIRY)
    except signing.BadSignature:
        return False
    return True


def part_limit(upload: Upload, number: int) -> int:
    """The size part ``number`` must have (the last one holds the rest)."""
    if number < upload.part_count:
        return upload.part_size
    return upload.declared_size - upload.part_size * (upload.part_count - 1)


def do_write_part(upload: Upload, number: int, chunks: Iterable[bytes]) -> storage.Part:
    """Store one part PUT to the site (local storage)."""
    _check_open(upload)
    _check_numbers(upload, [number])
    try:
        return storage.write_part(upload.storage_upload_id, number, chunks, part_limit(upload, number))
    except storage.TooLarge:
        raise SubmissionRejected(f"Part {number} is larger than {part_limit(upload, number):,} bytes.") from None


def upload_parts(upload: Upload) -> list[storage.Part]:
    return storage.list_parts(upload.submission.file_key, upload.storage_upload_id) if upload.is_open else []


def check_complete_upload(upload: Upload) -> Submission:
    """Join the parts into the submission's file and queue it (or fail it with the reason)."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=upload.submission_id)
        upload = Upload.objects.select_related("submission__split__benchmark", "submission__team").get(
            pk=upload.pk)
        _check_open(upload)
        parts = upload_parts(upload)
        have = {p.number for p in parts}
        missing = [n for n in range(1, upload.part_count + 1) if n not in have]
        if missing:
            shown = ", ".join(map(str, missing[:20])) + (" …" if len(missing) > 20 else "")
            raise UploadConflict(f"Parts missing: {shown} (of {upload.part_count}); upload them and complete again.")
        wrong = [p.number for p in parts if p.size != part_limit(upload, p.number)]
        if wrong:
            raise UploadConflict(f"Parts of the wrong size: {', '.join(map(str, wrong[:20]))}; the file was "
                                 f"declared as {upload.declared_size:,} bytes in parts of {upload.part_size:,}.")
        limit = upload_limit(submission.split)
        upload.completed_at = timezone.now()
        upload.save(update_fields=["completed_at"])
        try:
            size, sha = storage.complete_multipart(submission.file_key, upload.storage_upload_id, parts, limit)
        except storage.TooLarge:
            return do_fail(submission, Kind.INVALID_INPUT, size_message(submission, limit)) or submission
        except storage.StorageError as exc:
            raise StorageUnavailable("the parts were not joined; the upload stays open: complete it again "
                                     "later.") from exc
        submission.file_size, submission.predictions_sha256 = size, sha
        submission.save(update_fields=["file_size", "predictions_sha256"])
    return do_submit(submission)


def do_expire_uploads(now: datetime | None = None, team: Team | None = None) -> int:
    """Abort uploads past their expiry; their submissions are cancelled and refunded."""
    now = now or timezone.now()
    stale = Upload.objects.filter(completed_at__isnull=True, aborted_at__isnull=True, expires_at__lt=now)
    if team is not None:
        stale = stale.filter(submission__team=team)
    count = 0
    for upload in stale.select_related("submission"):
        with transaction.atomic():
            cancelled = do_transition(
                upload.submission_id, Status.CANCELLED, quota=Quota.REFUNDED,
                status_detail=f"The upload did not complete within {settings.UPLOAD_EXPIRY_HOURS} hours; "
                              f"it does not count against the quota.")
            if cancelled is None:
                continue
            do_abort_upload(upload)
            count += 1
    return count
