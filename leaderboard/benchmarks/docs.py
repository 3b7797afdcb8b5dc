"""``docs/*.md`` rendered as the site's pages: ``/metrics/`` (``docs/metrics.md``) and each track's
format page (``Track.format_doc``: ``docs/<track>-format.md`` for the built-in tracks, a file of
its package for a plugin), rendered once per process.

The same files are the repository's documentation, so the pages and ``docs/`` cannot drift. Their
links between each other (``metrics.md#sqa3d``) become links to the pages that show them; a link
to any other file of the repository fails loudly, since no visitor could follow it. The docs are
ours (committed, reviewed), so their HTML is trusted; nothing a user sends reaches it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import markdown
from django.conf import settings
from django.urls import reverse
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

DOCS = settings.BASE_DIR / "docs"
FORMAT_DOC = re.compile(r"(?P<track>[a-z0-9-]+)-format\.md")


def doc_path(name: str) -> Path:
    """``docs/<name>.md``: ``metrics``, or ``<track>-format``."""
    return DOCS / f"{name}.md"


def site_href(doc: str, href: str) -> str:
    """The site's address for a link written in ``docs/<doc>.md``; absolute and in-page links stay."""
    if re.match(r"[a-z][a-z0-9+.-]*:|/|#", href):
        return href
    target, _, fragment = href.partition("#")
    if target == "metrics.md":
        url = reverse("benchmarks:metrics")
    elif match := FORMAT_DOC.fullmatch(target):
        url = reverse("benchmarks:format", args=[match["track"]])
    else:
        raise ValueError(f"docs/{doc}.md links {href!r}, a file of the repository that no page of the site shows")
    return url + (f"#{fragment}" if fragment else "")


class _SiteLinks(Treeprocessor):
    def __init__(self, md: markdown.Markdown, doc: str) -> None:
        super().__init__(md)
        self.doc = doc

    def run(self, root: etree.Element) -> None:
        for link in root.iter("a"):
            link.set("href", site_href(self.doc, link.get("href", "")))


class SiteLinks(Extension):
    """Rewrites the links between docs to the pages of the site that show them."""

    def __init__(self, doc: str) -> None:
        super().__init__()
        self.doc = doc

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 -- Markdown's API
        md.treeprocessors.register(_SiteLinks(md, self.doc), "site_links", 5)


@dataclass(frozen=True)
class Doc:
    title: str  # the first heading's text; the page's own <h1>
    intro: str  # HTML before the second section: the lead and the first section ("Write this file")
    body: str  # HTML of the rest
    sections: tuple[tuple[str, str], ...]  # (id, heading) of each second-level section


@lru_cache(maxsize=16)
def render(name: str, path: Path | None = None) -> Doc:
    """``docs/<name>.md`` (or the Markdown file ``path``, a track's format page) as HTML, its first
    heading taken out as the title."""
    text = (path or doc_path(name)).read_text(encoding="utf-8")
    md = markdown.Markdown(extensions=["tables", "fenced_code", "toc", SiteLinks(name)], output_format="html")
    html = md.convert(text)
    title_match = re.match(r"\s*<h1[^>]*>(.*?)</h1>\s*", html, flags=re.S)
    title = re.sub(r"<[^>]+>", "", title_match[1]) if title_match else name
    html = html[title_match.end():] if title_match else html
    sections = tuple((token["id"], token["name"]) for token in md.toc_tokens[0]["children"]) \
        if md.toc_tokens and md.toc_tokens[0]["level"] == 1 else ()
    starts = [m.start() for m in re.finditer(r"<h2[ >]", html)]
    split = starts[1] if len(starts) > 1 else len(html)
    return Doc(title=title, intro=html[:split], body=html[split:], sections=sections)
