"""The hosts' pages (issue 40): a bundle's `pages` are Markdown files beside it, read by the same
rule as its other files, rendered and sanitised by nh3 (no script, event handler or javascript:
link reaches a page; loading says what was removed), and shown as tabs of the benchmark's page."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.benchmarks.bundles import BundleError, read_bundle
from leaderboard.benchmarks.models import Benchmark
from tests.leaderboard.metric_tracks import write_bundle

OVERVIEW = """# The challenge

Localise the object. See the [devkit](https://example.org/devkit) or write to [us](mailto:hosts@example.org).

| phase | split |
|-------|-------|
| development | val |
"""
RULES = """Be fair. <script>document.cookie</script>
<a href="javascript:alert(1)" onclick="steal()">a trap</a> ![logo](https://example.org/logo.png)
<img src="https://example.org/x.png" onerror="alert(2)"><iframe src="https://example.org"></iframe>
"""
PAGES = "pages: {overview: overview.md, rules: texts/rules.md}\n"


@pytest.fixture
def folder(tmp_path, error_track, settings):
    settings.PAGE_CACHE_SECONDS = 0
    (tmp_path / "texts").mkdir()
    (tmp_path / "overview.md").write_text(OVERVIEW)
    (tmp_path / "texts" / "rules.md").write_text(RULES)
    return tmp_path


def test_pages_are_sanitised_and_shown_as_tabs(client, folder, capsys, db):
    path = write_bundle(folder, board=PAGES)
    call_command("load_benchmark", str(path), "--dry-run")
    out = capsys.readouterr().out
    assert "add page overview (7 lines)" in out and "add page rules" in out
    assert ("pages.rules: the sanitiser removes <script> and what it holds, a javascript: link, the onclick "
            "attribute of <a>, the onerror attribute of <img>, <iframe>; the page shows the rest") in out
    assert not Benchmark.objects.filter(track="example-error").exists()  # a dry run writes nothing
    load_bundle(path, allow_rescore=True)

    board = client.get("/benchmarks/example-error/").content.decode()
    assert 'href="/benchmarks/example-error/pages/overview/" data-page="overview">Overview</a>' in board
    assert 'data-page="rules">Rules</a>' in board and "Prizes" not in board
    overview = client.get("/benchmarks/example-error/pages/overview/").content.decode()
    assert "<table>" in overview and '<a href="https://example.org/devkit" rel="noopener noreferrer nofollow">' \
                                      in overview and 'href="mailto:hosts@example.org"' in overview
    assert 'aria-current="page" data-page="overview"' in overview
    rules = client.get("/benchmarks/example-error/pages/rules/").content.decode()
    page = rules[rules.index('<article class="host-page"'):rules.index("</article>")]
    assert "Be fair." in page and "a trap" in page and '<img alt="logo" src="https://example.org/logo.png">' in page
    for refused in ("<script", "document.cookie", "javascript:", "onclick", "onerror", "<iframe"):
        assert refused not in page, refused
    assert client.get("/benchmarks/example-error/pages/prizes/").status_code == 404


def test_a_changed_page_shows_its_diff_and_a_dropped_one_goes(folder, capsys, db):
    path = write_bundle(folder, board=PAGES)
    load_bundle(path, allow_rescore=True)
    (folder / "overview.md").write_text(OVERVIEW.replace("Localise the object.", "Localise every object."))
    write_bundle(folder, board="pages: {overview: overview.md}\n")
    call_command("load_benchmark", str(path))
    out = capsys.readouterr().out
    assert "benchmark example-error: page overview changed:" in out
    assert "-Localise the object." in out.replace(" " * 6, "") and "remove page rules" in out
    assert list(Benchmark.objects.get(track="example-error").pages) == ["overview"]


def test_a_page_is_read_by_the_bundles_file_rule(folder, db, settings):
    (folder.parent / "outside.md").write_text("# not the bundle's")
    with pytest.raises(BundleError, match=r"example-error\.yaml:\d+: pages\.rules: .*outside\.md.* is outside the "
                                          r"bundle's folder"):
        read_bundle(write_bundle(folder, board="pages: {rules: ../outside.md}\n"))
    (folder / "big.md").write_bytes(b"x" * (256 * 1024 + 1))
    with pytest.raises(BundleError, match=r"pages\.prizes: .*big\.md: expected at most 256 KiB"):
        read_bundle(write_bundle(folder, board="pages: {prizes: big.md}\n"))
    with pytest.raises(BundleError, match=r"pages\.faq: unknown key 'faq'; expected one of: overview, rules, dates, "
                                          r"prizes, organisers, citation"):
        read_bundle(write_bundle(folder, board="pages: {faq: overview.md}\n"))
    with pytest.raises(CommandError, match=r"pages\.dates: .*missing\.md does not exist"):
        call_command("load_benchmark", str(write_bundle(folder, board="pages: {dates: missing.md}\n")))
