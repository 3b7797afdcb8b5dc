"""The per-track format page: every accepted form, samples that validate against the split's manifest,
the converters, the size limits and the glossary; linked from the leaderboard and the submit form."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import escape

from evaluation_workers.convert import EXAMPLES
from evaluation_workers.synthetic import mmscan_vg, openscan
from evaluation_workers.synthetic.samples import FORMS
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.base import size_text
from leaderboard.benchmarks.selectors import upload_limit
from tests.leaderboard.test_links import internal_paths

ROOT = Path(__file__).resolve().parents[2]


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
    # One unit for sizes on every page (issue 35): the form's and the refusals' MiB, never "4.0 GB".
    limits = page.split('id="limits"')[1].split("</section>")[0]
    assert size_text(upload_limit(splits[track])) in limits and not re.search(r"\d\s*[GMK]B\b", limits)
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
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    load_bundled_benchmarks()
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

    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.submissions.services import FileRefused, check_create_submission

    load_bundled_benchmarks()
    labels, predictions = mmscan_vg.write_demo(tmp_path / "mmscan", "val")
    predictions.unlink()  # the labels folder holds labels only
    do_load_labels(Split.objects.get(benchmark__track="mmscan-vg", name="val"), labels.parent)
    pickle_bytes = SimpleUploadedFile("submission.pkl", b"\x80\x02cos\nsystem\n.")  # would run code if unpickled
    with pytest.raises(FileRefused) as refused:
        check_create_submission(user=owner, track="mmscan-vg", split="val", method_name="M",
                                file=pickle_bytes, file_name="submission.pkl")
    assert "submission.pkl: expected a file ending in .json or .json.gz or .npz." in str(refused.value)
    assert "lb convert --track mmscan-vg --from embodiedscan-pkl" in str(refused.value)


# The docs as site pages (issue 27): /metrics/ and the format pages, rendered from docs/*.md.

DOC_PAGES = ["/metrics/", *(f"/benchmarks/{track}/format/" for track in FORMS)]
@pytest.fixture
def doc_pages(client: Any, db: None) -> dict[str, str]:
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    load_bundled_benchmarks()
    pages = {}
    for url in DOC_PAGES:
        response = client.get(url)
        assert response.status_code == 200, url
        pages[url] = response.content.decode()
    return pages


def test_no_doc_page_names_a_path_of_this_repository(doc_pages: dict[str, str]) -> None:
    for url, html in doc_pages.items():
        assert internal_paths(html) == [], url
    # The rule itself can fail: a path of ours in the text is caught, one in a link to another site is not.
    assert internal_paths('<p>see <code>tests/hostile/x.py</code></p>') == ["tests/hostile/x.py"]
    assert internal_paths('<a href="https://github.com/ScanNet/ScanNet"><code>evaluate.py</code></a>') == []
    assert internal_paths("<code>.venv/bin/python manage.py load_labels</code>") == []  # a command, not a path


def test_links_between_docs_lead_to_the_pages_that_show_them(doc_pages: dict[str, str]) -> None:
    from leaderboard.benchmarks.docs import site_href

    for url, html in doc_pages.items():
        assert not re.search(r'href="[^"]*\.md[#"]', html), url
    assert 'href="/metrics/#sqa3d"' in doc_pages["/benchmarks/sqa3d/format/"]
    for track in FORMS:
        assert f'href="/benchmarks/{track}/format/"' in doc_pages["/metrics/"]
    assert site_href("sqa3d-format", "metrics.md#sqa3d") == "/metrics/#sqa3d"
    assert site_href("metrics", "openscan-format.md") == "/benchmarks/openscan/format/"
    assert site_href("metrics", "https://github.com/ScanNet/ScanNet") == "https://github.com/ScanNet/ScanNet"
    with pytest.raises(ValueError, match="docs/metrics.md links '../README.md'"):
        site_href("metrics", "../README.md")


def test_the_metrics_page_has_a_section_per_track_that_the_board_and_format_page_link(
        client: Any, doc_pages: dict[str, str]) -> None:
    metrics = doc_pages["/metrics/"]
    for track in FORMS:
        assert f'<h2 id="{track}">' in metrics, track
        anchor = f'href="{reverse("benchmarks:metrics")}#{track}"'
        assert anchor in doc_pages[f"/benchmarks/{track}/format/"], track
        assert anchor in client.get(reverse("rankings:leaderboard", args=[track])).content.decode(), track
        assert anchor in client.get(reverse("benchmarks:home")).content.decode(), track


@pytest.mark.parametrize("track", list(FORMS))
def test_each_format_page_starts_with_the_file_to_write_and_an_example(doc_pages: dict[str, str],
                                                                       track: str) -> None:
    page = doc_pages[f"/benchmarks/{track}/format/"]
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", page)
    assert headings[0] == "Write this file", headings
    first = page[page.index(">Write this file</h2>"):page.index(f">{headings[1]}</h2>")]
    assert "<pre>" in first and f"lb validate --track {track}" in first
    # The edge cases come after it: the limits, the messages, the glossary.
    assert page.index(">Write this file</h2>") < page.index('id="limits"') < page.index('id="metrics-and-groups"')


@pytest.mark.parametrize("track", list(FORMS))
def test_the_number_of_forms_a_doc_announces_is_the_number_it_accepts(track: str) -> None:
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
    text = (ROOT / "docs" / f"{track}-format.md").read_text()
    announced = re.findall(r"\b(one|two|three|four|five) (?:JSON )?forms\b", text, flags=re.I)
    assert announced, "the doc says how many forms it accepts"
    assert {words[w.lower()] for w in announced} == {len(FORMS[track])}, announced


def _message_cells(html: str) -> list[str]:
    """The message column of every table under a "Messages" heading, as HTML."""
    if 'id="messages"' not in html:
        return []
    section = html[html.index('id="messages"'):]
    section = section[:section.index("</table>")]
    return re.findall(r"<tr>\s*<td>.*?</td>\s*<td>(.*?)</td>\s*</tr>", section, flags=re.S)


@pytest.mark.parametrize("track", ["sqa3d", "mmscan-vg"])
def test_every_documented_message_is_whole_code_even_with_backticks_inside(doc_pages: dict[str, str],
                                                                          track: str) -> None:
    cells = _message_cells(doc_pages[f"/benchmarks/{track}/format/"])
    assert len(cells) >= 10
    for cell in cells:
        outside = re.sub(r"<code>.*?</code>", "", cell, flags=re.S)
        assert outside.strip(" ;\n") == "", cell  # only the separators of several messages


@pytest.mark.parametrize(("track", "name", "content"), [
    ("sqa3d", "p.json", '[{"question_id": NaN, "answer": "x"}]'),
    ("sqa3d", "p.json", '[{"question_id": 11, "answer": 2}]'),
    ("mmscan-vg", "p.json", '[{"sample_id": "s__0", "pred_bboxes": [], "pred_scores": []}, '
                            '{"pred_bboxes": [], "pred_scores": []}]'),
])
def test_a_message_with_backticks_is_shown_as_the_validator_words_it(doc_pages: dict[str, str], tmp_path: Path,
                                                                     track: str, name: str, content: str) -> None:
    from evaluation_workers.errors import SubmissionError

    manifests = {"sqa3d": {"track": "sqa3d", "question_ids": [11], "count": 1, "scenes": ["s"]},
                 "mmscan-vg": {"track": "mmscan-vg", "sample_ids": ["s__0"], "samples": 1, "scored_samples": 1,
                               "groups": {}, "scenes": ["s"], "max_boxes_per_prompt": 1000}}
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(SubmissionError) as refused:
        get_track(track).validate(path, manifests[track])
    message = str(refused.value)
    assert "`" in message
    assert f"<code>{escape(message)}</code>" in _message_cells(doc_pages[f"/benchmarks/{track}/format/"])
