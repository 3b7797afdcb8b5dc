"""The pages a benchmark's hosts write (its bundle's ``pages``): overview, rules, dates, prizes,
organisers and citation, each a Markdown file beside the bundle (``bundle_files``' rule, at most
``MAX_PAGE_BYTES``), shown as tabs of the benchmark's page.

A bundle may come from a maintainer outside the host's team, so what it writes is never trusted
as HTML: the Markdown is rendered, then cleaned by nh3 (the Ammonia sanitiser; bleach is
deprecated) to an allowlist of tags and attributes, links to http(s) and mailto only, with
``rel="noopener noreferrer nofollow"``. A script, a style, an event handler or a ``javascript:``
link never reaches a page; loading the bundle says what the sanitiser removed (``removed``), so a
host learns that part of a page is not shown.
"""

from __future__ import annotations

import functools
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

# (key, tab title), in the order the tabs show them.
PAGES = (("overview", "Overview"), ("rules", "Rules"), ("dates", "Dates"), ("prizes", "Prizes"),
         ("organisers", "Organisers"), ("citation", "Citation"))
TITLES = dict(PAGES)
MAX_PAGE_BYTES = 256 * 1024
URL_SCHEMES = {"http", "https", "mailto"}
TAGS = set(nh3.ALLOWED_TAGS) - {"area", "map"}
ATTRIBUTES = {**{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
              "code": {"class"}}  # a fenced block's language
URL_ATTRIBUTES = {("a", "href"), ("img", "src"), ("q", "cite"), ("blockquote", "cite"), ("del", "cite"),
                  ("ins", "cite")}
# Removed with what they hold (the text of a script is no text of the page).
DROPPED_WITH_CONTENT = {"script", "style"}


def _html(source: str) -> str:
    return markdown.markdown(source, extensions=["tables", "fenced_code", "sane_lists"], output_format="html")


@functools.lru_cache(maxsize=64)
def render(source: str) -> SafeString:
    """A host's Markdown page as sanitised HTML."""
    cleaned = nh3.clean(_html(source), tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                        link_rel="noopener noreferrer nofollow", clean_content_tags=DROPPED_WITH_CONTENT)
    # A wide table scrolls in its own box on a phone, as the site's tables do (markup added after cleaning).
    wrapped = cleaned.replace("<table>", '<div class="table-wrap"><table>').replace("</table>", "</table></div>")
    return mark_safe(wrapped)  # noqa: S308 -- nh3's output (only the allowlist above), and our own wrapper


class _Removed(HTMLParser):
    """Collects what the sanitiser's allowlist does not let through."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def _note(self, what: str) -> None:
        if what not in self.found:
            self.found.append(what)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS:
            self._note(f"<{tag}>" + (" and what it holds" if tag in DROPPED_WITH_CONTENT else ""))
            return
        for name, value in attrs:
            if name not in ATTRIBUTES.get(tag, set()):
                self._note(f"the {name} attribute of <{tag}>")
            elif (tag, name) in URL_ATTRIBUTES and value:
                scheme = urlsplit(value.strip()).scheme.lower()
                if scheme and scheme not in URL_SCHEMES:
                    self._note(f"a {scheme}: link")


def removed(source: str) -> list[str]:
    """What ``render`` leaves out of the page ``source`` (``<script> and what it holds``, ``the
    onclick attribute of <a>``, ``a javascript: link``), in order of appearance; empty when nothing."""
    parser = _Removed()
    parser.feed(_html(source))
    parser.close()
    return parser.found


def tabs(benchmark: Any) -> list[tuple[str, str]]:
    """The host pages ``benchmark`` has, as (key, title) in tab order."""
    return [(key, title) for key, title in PAGES if key in (benchmark.pages or {})]
