"""The pages rendered from docs/ (/metrics/ and the format pages) and the API page, in a real browser at
1280 and 390 px: nothing is wider than the viewport, and the glossary tables wrap their cells inside
the page instead of running 2,000-2,900 px wide (issue 27). Screenshots go to test-artifacts/docs/."""

from __future__ import annotations

from typing import Any

import pytest

from tests.leaderboard.test_browser import ARTIFACTS, page  # noqa: F401  (fixture)
from tests.leaderboard.test_browser_widths import OVERFLOW, WIDTHS

pytestmark = [pytest.mark.browser, pytest.mark.live]
SHOTS = ARTIFACTS / "docs"
DOC_PAGES = {"metrics": "/metrics/", "sqa3d-format": "/benchmarks/sqa3d/format/",
             "openscan-format": "/benchmarks/openscan/format/", "mmscan-vg-format": "/benchmarks/mmscan-vg/format/"}

# Each table of the rendered doc: how wide it is against its column, and whether any cell runs past it.
TABLES = """() => [...document.querySelectorAll("article.doc table")].map((table) => {
  const column = table.closest("article").getBoundingClientRect();
  const cells = [...table.querySelectorAll("td, th")];
  return {width: table.getBoundingClientRect().width, column: column.width,
          cut: cells.filter((c) => c.getBoundingClientRect().right > column.right + 1).length,
          nowrap: cells.filter((c) => getComputedStyle(c).whiteSpace === "nowrap").length,
          first: table.querySelector("td") && table.querySelector("td").textContent.slice(0, 30)};
})"""


# Words of the tables' prose (not code, not links) that the layout breaks across two lines ("attribut|e";
# a break after a hyphen is a line break, not a broken word).
BROKEN_WORDS = r"""() => [...document.querySelectorAll("article.doc td, article.doc th")].flatMap((cell) => {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  const broken = [];
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    if (text.parentElement.closest("code, a")) continue;
    for (const m of text.data.matchAll(/[A-Za-z][\w@.]*/g)) {
      const r = document.createRange(); r.setStart(text, m.index); r.setEnd(text, m.index + m[0].length);
      if (new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size > 1) broken.push(m[0]);
    }
  }
  return broken;
})"""


@pytest.fixture
def docs_site(transactional_db: None) -> None:
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    load_bundled_benchmarks()


@pytest.mark.parametrize("name", list(DOC_PAGES))
def test_a_doc_page_fits_both_widths_with_its_tables_wrapped(page: Any, live_server: Any,  # noqa: F811
                                                             docs_site: None, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(live_server.url + DOC_PAGES[name])
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        measure = page.evaluate(OVERFLOW)
        page.screenshot(path=SHOTS / f"{name}-{label}.png", full_page=True)
        assert measure["hidden"] == [], (width, measure)
        assert measure["scrollWidth"] <= measure["innerWidth"], (width, measure)
        tables = page.evaluate(TABLES)
        assert tables, "the doc has tables"
        for table in tables:
            assert table["width"] <= table["column"] + 1 and table["cut"] == 0, (width, table)
            assert table["nowrap"] == 0, (width, table)
        assert page.evaluate(BROKEN_WORDS) == [], width


def test_the_gtop_k_definition_and_the_sem_pred_row_are_read_whole(page: Any, live_server: Any,  # noqa: F811
                                                                   docs_site: None) -> None:
    """The two cells the issue found cut at 1280 px: each lies inside the viewport, all its text shown."""
    for url, text in [("/benchmarks/mmscan-vg/format/", "H(d) = number of distinct ground-truth boxes"),
                      ("/benchmarks/openscan/format/", "In every scene of the aspect or in none")]:
        page.goto(live_server.url + url)
        for width, height in WIDTHS.values():
            page.set_viewport_size({"width": width, "height": height})
            cell = page.locator("article.doc td", has_text=text).first
            box = cell.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (url, width, box)
            assert cell.evaluate("(td) => td.scrollWidth <= td.clientWidth"), (url, width)


def test_the_api_page_on_a_phone_shows_what_each_endpoint_does(page: Any, live_server: Any,  # noqa: F811
                                                               docs_site: None) -> None:
    """At 390 px every endpoint's description is in view beside its method and path, without tall empty
    rows (the table used to show only Method and Path, the rest scrolled away)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/api/")
    # The columns by position (method, path, what, parameters), as the page has always had them.
    rows = page.evaluate("""() => [...document.querySelectorAll("main table tbody tr")].map((tr) => {
      const what = tr.children[2].getBoundingClientRect(), path = tr.children[1].getBoundingClientRect();
      return {left: what.left, right: what.right, width: what.width, pathRight: path.right,
              text: tr.children[2].innerText};
    })""")
    assert len(rows) >= 20
    for row in rows:
        assert row["left"] >= 0 and row["right"] <= 390 and row["pathRight"] <= 390, row
        assert row["width"] > 250, row  # the description has the width of the screen, not of one word
    wrap = page.evaluate("() => { const w = document.querySelector('main table').closest('.table-wrap');"
                         " return w.scrollWidth <= w.clientWidth; }")
    assert wrap, "the endpoints do not scroll sideways"
    page.screenshot(path=SHOTS / "api-phone.png", full_page=True)
