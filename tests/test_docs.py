"""docs/ says the same for every track, and the repository's documentation points nowhere outside it."""

from __future__ import annotations

import re
import subprocess
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


# The README's commands and paths, as a fresh clone has them (issue 27).

TOP_LEVEL = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"data"}
# Files the README tells the reader to create.
CREATED = {"deploy/.env"}


def repository_paths(text: str) -> set[str]:
    """Each path in inline code or a code block that starts at a top-level folder of the repository
    (``leaderboard/...``, ``benchmarks/...``); ``<track>`` and what follows it are dropped."""
    paths = set()
    for token in re.findall(r"[\w.<>*-]+(?:/[\w.<>*-]*)+", text):
        if token.split("/")[0] in TOP_LEVEL:
            paths.add(token.split("<")[0].split("*")[0])
    return paths


def test_every_repository_path_in_the_readme_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = {p for p in repository_paths(readme) if not (ROOT / p).exists()} - CREATED
    assert missing == set()
    # Paper rows live in the benchmarks app, not in the speed benchmarks' folder.
    assert repository_paths("`benchmarks/paper_rows/<track>.json`") == {"benchmarks/paper_rows/"}
    assert not (ROOT / "benchmarks/paper_rows").exists()


def test_the_readmes_python_commands_run_the_venvs_python() -> None:
    """The system's python has none of the packages; only a shell with a venv activated may say `python`
    (from the line that activates one to the end of its section: "Score offline" makes one of its own)."""
    activated = False
    for number, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1):
        if line.startswith("#"):
            activated = False
        if "source .venv/bin/activate" in line or re.search(r"(?:^|\s)(?:\.|source) \S*bin/activate", line):
            activated = True
        if activated:
            continue
        bare = re.findall(r"(?<![\w/.-])python3? (?:manage\.py|-m )", line)
        assert not bare, f"README.md:{number}: {line.strip()}"


def test_scorer_versions_in_the_readme_and_docs_are_the_running_ones() -> None:
    from evaluation_workers.tracks import get_track

    running = {track: get_track(track).scorer_version for track in FORM_PHRASES}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for version in re.findall(r'"scorer_version": "([\d.]+)"', text):
            assert version in running.values(), (path.name, version)
        for track, version in re.findall(r"^#\d+ ([\w-]+)/\w+ .*: scorer ([\d.]+)$", text, flags=re.M):
            assert version == running[track], (path.name, track, version)


def test_the_env_file_the_readme_has_you_write_is_ignored_by_git() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "cp deploy/.env.example deploy/.env" in readme
    ignored = subprocess.run(["git", "check-ignore", "-q", "deploy/.env"], cwd=ROOT)
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0, "deploy/.env (passwords) would be committed"
    assert subprocess.run(["git", "check-ignore", "-q", "deploy/.env.example"], cwd=ROOT).returncode == 1
