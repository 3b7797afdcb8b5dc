"""docs/ says the same for every track, and the repository's documentation points nowhere outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluation_workers.convert import EXAMPLES, FORMS
from evaluation_workers.tracks import get_track

ROOT = Path(__file__).resolve().parents[1]
# how each doc names each accepted form (the sample forms of evaluation_workers.synthetic.samples)
FORM_PHRASES = {
    "openscan": ["Official layout", "ScanNet's text layout", "Compact layout"],
    "mmscan-vg": ["JSON (`.json`", "gzip-compressed `.json.gz`", "Binary (`.npz`)"],
    "sqa3d": ["JSON list", "JSON object", "JSON Lines"],
}


@pytest.mark.parametrize("track", list(FORM_PHRASES))
def test_each_format_doc_names_every_form_suffix_converter_and_the_glossary(track: str) -> None:
    text = (ROOT / "docs" / f"{track}-format.md").read_text()
    for phrase in FORM_PHRASES[track]:
        assert phrase in text, phrase
    for suffix in get_track(track).upload_suffixes:
        assert f"`{suffix}`" in text or f"{suffix}`" in text, suffix
    for (t, form), line in EXAMPLES.items():
        if t == track:
            assert line in text and form in FORMS[track]
    assert "## Metrics and groups" in text
    for group in get_track(track).groups:
        assert group in text, group


def test_no_link_in_the_readme_or_docs_leaves_the_repository() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for target in re.findall(r"\]\(([^)#]+)", text):
            if re.match(r"https?://", target):
                continue
            assert (path.parent / target).exists(), f"{path.name}: dead link {target}"
        assert "../shared" not in text and "seeds/" not in text, path.name
