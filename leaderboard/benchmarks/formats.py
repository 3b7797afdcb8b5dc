"""The per-track format pages' content: ``docs/<track>-format.md``, rendered once per process.

The same file is the repository's documentation, so the page and ``docs/``
cannot drift. The docs are ours (committed, reviewed), so their HTML is
trusted; nothing a user sends reaches it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import markdown
from django.conf import settings

DOCS = settings.BASE_DIR / "docs"


def doc_path(track: str) -> Path:
    return DOCS / f"{track}-format.md"


@lru_cache(maxsize=8)
def format_html(track: str) -> str:
    """The track's format notes as HTML; links to other docs pages point to the repository's files."""
    text = doc_path(track).read_text(encoding="utf-8")
    html = markdown.markdown(text, extensions=["tables", "fenced_code", "toc"], output_format="html")
    # Wide tables scroll inside their own box, as every table of the site does.
    html = html.replace("<table>", '<div class="table-wrap"><table>').replace("</table>", "</table></div>")
    # the first heading is the page's own title
    return re.sub(r"^<h1[^>]*>.*?</h1>\s*", "", html, count=1, flags=re.S)


def refusal_hint(file_name: str) -> str:
    """The converter to name when a ``.pth``/``.pkl`` is refused (the scoring core's words); else ""."""
    from evaluation_workers.convert import refusal_hint as hint

    return hint(file_name)
