"""The per-track format page: every accepted form, samples that validate against the split's manifest,
the converters, the size limits and the glossary; linked from the leaderboard and the submit form."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import escape

from evaluation_workers.convert import EXAMPLES
from evaluation_workers.synthetic import mmscan_vg, openscan
from evaluation_workers.synthetic.samples import FORMS
from evaluation_workers.tracks import get_track
from leaderboard.benchmarks.selectors import upload_limit


@pytest.fixture(scope="module")
def label_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("format_labels")
    written = openscan.generate(argparse.Namespace(
        out=base / "openscan", scenes=2, points=3000, instances=(5, 8), masks=10, aspects=["material", "type"],
        format="official", semantic=False, missing=0, seed=2))
    mm = mmscan_vg.generate(argparse.Namespace(
        out=base / "mmscan", samples=30, seed=0, min_preds=1, max_preds=3, max_gt=2, empty_fraction=0.0,
        tilted_fraction=0.1, gzip=False, format="json"))
    return {"openscan": Path(written["labels"]), "mmscan-vg": Path(mm["labels"])}


@pytest.fixture
def splits(sqa3d_split: Any, label_folders: dict[str, Path]) -> dict[str, Any]:
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    loaded = {"sqa3d": sqa3d_split}
    for track, folder in label_folders.items():
        split = Split.objects.select_related("benchmark").filter(benchmark__track=track).order_by("-is_default").first()
        do_load_labels(split, folder)
        loaded[track] = split
    return loaded


@pytest.mark.parametrize("track", list(FORMS))
def test_it_shows_every_form_its_limit_converters_and_glossary(client: Any, splits: dict[str, Any], track: str) -> None:
    response = client.get(reverse("benchmarks:format", args=[track]))
    assert response.status_code == 200
    page = response.content.decode()
    for form, (name, text) in FORMS[track].items():
        href = reverse("benchmarks:format_sample", args=[track, form]) + f"?split={splits[track].name}"
        assert href in page and name in page and escape(text) in page
    assert filesizeformat(upload_limit(splits[track])) in page
    for (t, _), line in EXAMPLES.items():
        if t == track:
            assert line in page
    assert "<h2 id=\"metrics-and-groups\">Metrics and groups</h2>" in page  # the docs' glossary, rendered


@pytest.mark.parametrize("track", list(FORMS))
def test_every_sample_passes_validation_against_the_splits_manifest(client: Any, splits: dict[str, Any],
                                                                   track: str, tmp_path: Path) -> None:
    split = splits[track]
    for form, (name, _) in FORMS[track].items():
        response = client.get(reverse("benchmarks:format_sample", args=[track, form]), {"split": split.name})
        assert response.status_code == 200
        assert f'filename="{track}_{split.name}_{name}"' in response["Content-Disposition"]
        path = tmp_path / name
        path.write_bytes(response.content)
        summary = get_track(track).validate(path, split.active_labels.manifest)
        assert summary.get("format", form if track != "mmscan-vg" else None) in (form, None)


def test_a_sample_of_an_unknown_form_or_of_a_split_without_labels_is_404(client: Any, db: None) -> None:
    from leaderboard.benchmarks.services import do_sync_benchmarks

    do_sync_benchmarks()
    assert client.get(reverse("benchmarks:format_sample", args=["sqa3d", "pickle"])).status_code == 404
    assert client.get(reverse("benchmarks:format_sample", args=["sqa3d", "list"])).status_code == 404
    assert client.get(reverse("benchmarks:format", args=["nope"])).status_code == 404


def test_the_leaderboard_and_the_submit_form_link_to_it(client: Any, owner: Any, sqa3d_split: Any) -> None:
    href = reverse("benchmarks:format", args=["sqa3d"])
    assert href in client.get(reverse("rankings:leaderboard", args=["sqa3d"])).content.decode()
    client.force_login(owner)
    assert href in client.get(reverse("submissions:submit", args=["sqa3d"])).content.decode()


def test_an_uploaded_pickle_is_refused_unread_with_the_converter_to_run(owner: Any, sqa3d_split: Any,
                                                                       tmp_path: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels, do_sync_benchmarks
    from leaderboard.submissions.services import FileRefused, check_create_submission

    do_sync_benchmarks()
    labels, predictions = mmscan_vg.write_demo(tmp_path / "mmscan", "val")
    predictions.unlink()  # the labels folder holds labels only
    do_load_labels(Split.objects.get(benchmark__track="mmscan-vg", name="val"), labels.parent)
    pickle_bytes = SimpleUploadedFile("submission.pkl", b"\x80\x02cos\nsystem\n.")  # would run code if unpickled
    with pytest.raises(FileRefused) as refused:
        check_create_submission(user=owner, track="mmscan-vg", split="val", method_name="M",
                                file=pickle_bytes, file_name="submission.pkl")
    assert "submission.pkl: expected a file ending in .json or .json.gz or .npz." in str(refused.value)
    assert "lb convert --track mmscan-vg --from embodiedscan-pkl" in str(refused.value)
