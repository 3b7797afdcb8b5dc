"""The fixture plugin's "example-error" track (tests/fixtures/track_plugin): a localisation error in
cm, lower is better, beside a hit rate (a fraction, higher is better), as an installed track of this
process. The site's tests of metric specs and challenges rank it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from evaluation_workers import tracks

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "fixtures" / "track_plugin"
TRUTH = [0.0, 0.1, 0.2, 0.3]  # positions in metres; the first two items are "near", the rest "far"


def installed_error_track(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``example-error`` installed in this process (its entry point beside the others): the body of
    the ``error_track`` fixture (conftest.py)."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    found = dict(tracks._entry_points())
    found["example-error"] = EntryPoint("example-error", "example_track.error:TRACK", tracks.ENTRY_POINT_GROUP)
    monkeypatch.setattr(tracks, "_entry_points", lambda: found)
    tracks._load.cache_clear()
    yield tracks.get_track("example-error")
    tracks._load.cache_clear()


BUNDLE = """\
track: example-error
title: Example error
splits:
- name: test
  labels: {{source: labels.json}}
{extra}
paper_rows:
- split: test
  source: A paper
  paper: {{url: 'https://example.org/paper', venue: Example 2024, published: '2024-01-10'}}
  rows:
  - method: PaperNet
    note: Table 1
    scores: {{error: {paper_error}, near/error: 2.0}}
{paper_fields}"""


def write_bundle(folder: Path, *, paper_error: float = 4.0, extra: str = "", board: str = "",
                 paper_fields: str = "") -> Path:
    """An example-error bundle in ``folder`` (its labels beside it); ``extra`` adds keys to its split,
    ``board`` top-level YAML at the end, ``paper_fields`` the paper row's ``fields`` (flow YAML)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "labels.json").write_text(str(TRUTH))
    path = folder / "example-error.yaml"
    row_fields = f"    fields: {paper_fields}\n" if paper_fields else ""
    path.write_text(BUNDLE.format(extra=extra, paper_error=paper_error, paper_fields=row_fields) + board)
    return path


def submit_scored(user: Any, positions: list[float], method: str, folder: Path, split: str = "test",
                  publish: bool = True) -> Any:
    """A submission of ``positions`` scored by the track in this process (its real ``score``) and,
    by default, published."""
    from leaderboard.benchmarks.models import Split
    from leaderboard.submissions import lifecycle, services
    from tests.leaderboard.conftest import describe_method

    predictions = folder / f"{method}.json"
    predictions.write_text(str(positions))
    submission = services.check_create_submission(
        user=user, track="example-error", split=split, method_name=method,
        file=io.BytesIO(predictions.read_bytes()), file_name="p.json")
    labels = Split.objects.get(benchmark__track="example-error", name=split).active_labels
    from django.conf import settings

    result = tracks.get_track("example-error").score(Path(settings.LABELS_DIR) / labels.storage_key, predictions)
    lifecycle.record_result(submission_id=submission.pk, attempt=submission.attempt or 1, result=result)
    describe_method(submission.method)
    if publish:
        services.check_publish(user, submission)
    submission.refresh_from_db()
    return submission
