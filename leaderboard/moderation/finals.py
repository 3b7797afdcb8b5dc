"""The finals' export of a phase (a split) for its maintainers: every selected submission (each
team's published ones: the rows of its final board) with its predictions file and its results, to
check the winners and write the report. EvalAI's ``download_all_submissions``, Codabench's
``download_many``.

A zip, streamed as it is written (``stream_zip``: the files are never gathered in memory or on disk;
members are stored, not compressed again, with ZIP64 sizes): ``index.csv`` and ``manifest.json``
list each submission (team, method, file, its sha256, status flags, the primary score of each result),
and ``submissions/<id>-<team>-<method>/`` holds its ``results.json`` (every result of it, the private
remainder's included: maintainers see those) and, with local storage, its file. With S3 storage the
files stay in the bucket: the manifest gives each a presigned GET link valid for
``FINALS_URL_EXPIRY`` seconds. Taking the export is recorded in the audit log
(``services.check_export_finals``). Hidden labels are never part of it: results hold aggregate
scores only.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from leaderboard.benchmarks.models import Split
from leaderboard.lib import storage
from leaderboard.submissions.models import Submission

INDEX_COLUMNS = ["submission_id", "team", "method", "file_name", "file_size", "predictions_sha256", "status",
                 "hidden", "disqualified", "verified", "flagged", "created_at", "folder", "file_in_zip", "file_url"]


class _Sink(io.RawIOBase):
    """What ``zipfile`` writes, kept until the stream takes it (not seekable: members get data descriptors)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        return data


def stream_zip(members: Iterable[tuple[str, Iterable[bytes]]], when: datetime) -> Iterator[bytes]:
    """A zip of ``members`` (name, chunks), yielded as it is written."""
    sink = _Sink()
    stamp = when.timetuple()[:6]
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, chunks in members:
            info = zipfile.ZipInfo(name, date_time=stamp)
            with archive.open(info, "w", force_zip64=True) as out:
                for chunk in chunks:
                    out.write(chunk)
                    if sum(map(len, sink.chunks)) >= 1 << 20:
                        yield sink.take()
            yield sink.take()
    yield sink.take()


def selected(split: Split) -> list[Submission]:
    """The teams' selection on ``split``: every published submission, by team and method."""
    return list(Submission.objects.filter(split=split, is_published=True)
                .select_related("team", "method", "split__benchmark").prefetch_related("results")
                .order_by("team__name", "method__name", "pk"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60] or "x"


@dataclass
class Finals:
    """What one export holds: the split, its selection and, per submission, where its file is."""

    split: Split
    submissions: list[Submission]
    taken_at: datetime

    def folder(self, submission: Submission) -> str:
        return f"submissions/{submission.pk}-{_slug(submission.team.slug)}-{_slug(submission.method.name)}"

    def has_file(self, submission: Submission) -> bool:
        return bool(submission.file_key) and submission.file_deleted_at is None

    def file_url(self, submission: Submission) -> str:
        """A presigned GET link of the file (S3 storage), or "" (local storage: the file is in the zip)."""
        if not storage.is_s3() or not self.has_file(submission):
            return ""
        return str(storage.s3_client(public=True).generate_presigned_url(
            "get_object", Params={"Bucket": settings.S3_BUCKET, "Key": submission.file_key,
                                  "ResponseContentDisposition": f'attachment; filename="{submission.file_name}"'},
            ExpiresIn=settings.FINALS_URL_EXPIRY))

    def entry(self, submission: Submission) -> dict[str, Any]:
        primary = self.split.benchmark.spec.primary_metric
        in_zip = not storage.is_s3() and self.has_file(submission)
        return {"submission_id": submission.pk, "team": submission.team.name, "method": submission.method.name,
                "file_name": submission.file_name, "file_size": submission.file_size,
                "predictions_sha256": submission.predictions_sha256, "status": submission.status,
                "hidden": submission.is_hidden, "disqualified": submission.is_disqualified,
                "verified": submission.is_verified, "flagged": submission.is_flagged,
                "created_at": submission.created_at.isoformat(), "folder": self.folder(submission),
                "file_in_zip": f"{self.folder(submission)}/{submission.file_name}" if in_zip else "",
                "file_url": self.file_url(submission),
                "scores": {r.partition or "all": {"scorer_version": r.scorer_version,
                                                  primary: r.metrics.get(primary)}
                           for r in submission.results.all()}}

    def members(self) -> Iterator[tuple[str, Iterable[bytes]]]:
        entries = [self.entry(s) for s in self.submissions]
        index = io.StringIO()
        writer = csv.writer(index)
        writer.writerow(INDEX_COLUMNS)
        for e in entries:
            writer.writerow([e[c] for c in INDEX_COLUMNS])
        yield "index.csv", [index.getvalue().encode()]
        yield "manifest.json", [json.dumps({
            "track": self.split.benchmark.track, "split": self.split.name, "taken_at": self.taken_at.isoformat(),
            "storage": settings.STORAGE_BACKEND, "count": len(entries), "submissions": entries},
            indent=1, ensure_ascii=False).encode()]
        for submission, e in zip(self.submissions, entries):
            results = [r.as_json() for r in sorted(submission.results.all(), key=lambda r: (r.created_at, r.pk))]
            yield f"{e['folder']}/results.json", [json.dumps(results, indent=1).encode()]
            if e["file_in_zip"]:
                yield e["file_in_zip"], _read(submission.file_key)

    def stream(self) -> Iterator[bytes]:
        return stream_zip(self.members(), self.taken_at)

    @property
    def file_name(self) -> str:
        return f"{self.split.benchmark.track}-{self.split.name}-finals-{self.taken_at:%Y%m%d-%H%M}.zip"


def _read(key: str) -> Iterator[bytes]:
    with open(storage.path_for(key), "rb") as f:
        yield from storage.read_chunks(f)


def finals_of(split: Split) -> Finals:
    return Finals(split=split, submissions=selected(split), taken_at=timezone.now())
