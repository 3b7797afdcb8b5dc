"""A benchmark's terms of use: their version, and their Markdown as HTML that runs nothing.

The version is the sha256 of the text as the bundle's file holds it, so that any change to the
file asks every participant to accept again. The HTML keeps Markdown's structure (headings,
lists, links, emphasis, tables) but no raw HTML, and links only to http(s), mailto and the site.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as etree
from functools import lru_cache

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

SAFE_SCHEMES = ("http://", "https://", "mailto:", "/", "#")


def version_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short(version: str) -> str:
    """What pages and messages show of a version: its first 12 hex digits."""
    return version[:12]


class _SafeLinks(Treeprocessor):
    def run(self, root: etree.Element) -> None:
        for element in root.iter():
            for attribute in ("href", "src"):
                value = element.get(attribute)
                if value is not None and not value.strip().lower().startswith(SAFE_SCHEMES):
                    element.set(attribute, "#")


class _NoRawHtml(Extension):
    """Raw HTML in the text is shown as text; links keep safe schemes only."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 -- Markdown's API
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        md.treeprocessors.register(_SafeLinks(md), "safe_links", 1)


@lru_cache(maxsize=32)
def render(text: str) -> str:
    """The terms as HTML (cached per text)."""
    return markdown.markdown(text, extensions=["tables", _NoRawHtml()], output_format="html")
