"""Every table of a board lines up: each row has as many cells as its table's header has columns, in the
ranked table and in the sections listed apart (rows on another protocol or labels, references), where
the method fields a bundle declares are columns too."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.benchmarks.bundles import BUNDLES_DIR


class _Tables(HTMLParser):
    """The width of each ``table.leaderboard``'s first header row and of each of its body rows (colspans counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._part = ""
        self._row: list[int] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attr = dict(attrs)
        if tag == "table" and "leaderboard" in (attr.get("class") or "").split():
            self.tables.append({"id": attr.get("class"), "head": None, "rows": []})
        elif self.tables and tag in ("thead", "tbody"):
            self._part = tag
        elif self.tables and tag == "tr":
            self._row = []
        elif self._row is not None and tag in ("td", "th"):
            self._row.append(int(attr.get("colspan") or 1))

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._row is not None and self.tables:
            table = self.tables[-1]
            if self._part == "thead" and table["head"] is None:
                table["head"] = sum(self._row)
            elif self._part == "tbody":
                table["rows"].append(sum(self._row))
            self._row = None


@pytest.mark.django_db
def test_every_row_of_every_board_table_has_its_headers_columns(client):
    """MMScan's demo bundle: method fields as columns, paper rows listed apart on synthetic labels."""
    load_bundle(BUNDLES_DIR / "mmscan-vg.yaml", synthetic=True, paper_rows=True, allow_rescore=True, audit=False)
    page = client.get("/benchmarks/mmscan-vg/?split=val")
    assert page.status_code == 200
    tables = _Tables()
    tables.feed(page.content.decode())
    apart = [t for t in tables.tables if "apart" in t["id"]]
    assert apart and apart[0]["rows"], "the demo's paper rows are listed apart"
    for table in tables.tables:
        widths = {w for w in table["rows"] if w > 1}  # a one-cell row spans the table (an empty board's note)
        assert widths <= {table["head"]}, f"{table['id']}: header {table['head']} columns, rows {sorted(widths)}"
