"""BibTeX of a row reported in a paper: the method's own paper, and the source its numbers were
copied from (a benchmark's paper, a README); a method without a paper of its own says so."""

from __future__ import annotations

import re
from typing import Any

_ESCAPES = {"&": r"\&", "%": r"\%", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}"}


def _text(value: Any) -> str:
    return re.sub(r"[&%#_{}]", lambda m: _ESCAPES[m.group(0)], str(value))


def _entry(kind: str, key: str, fields: dict[str, Any]) -> str:
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items() if value not in ("", None))
    return f"@{kind}{{{key},\n{body}\n}}\n"


def _key(*words: Any) -> str:
    return "".join(ch for ch in "".join(str(w) for w in words).lower() if ch.isalnum()) or "entry"


def paper_row_bibtex(entry: Any) -> str:
    """The method's paper (``@inproceedings``, or a comment saying why it has none), then the source
    of the row's numbers (``@misc``), for the paper row ``entry``."""
    parts = []
    paper = entry.method_paper or {}
    if paper.get("authors"):
        surname = paper["authors"].split()[0]
        title_word = (paper.get("title") or entry.name).split()[0]
        # "Chen et al." as cited: BibTeX writes "and others" for "et al.".
        author = re.sub(r"\s+et al\.?$", " and others", paper["authors"])
        parts.append(_entry("inproceedings", _key(surname, paper["year"], title_word), {
            "title": _text(paper.get("title") or entry.name), "author": _text(author),
            "booktitle": _text(paper["venue"]), "year": paper["year"], "url": paper["url"]}))
    elif paper.get("none"):
        parts.append(f"% {entry.name}: no paper of its own ({paper['none']}).\n")
    else:
        parts.append(f"% {entry.name}: the benchmark's maintainers give no paper of the method.\n")
    split = entry.split
    parts.append(_entry("misc", _key("source", entry.name, split.benchmark.track), {
        "title": _text(f"The numbers of {entry.name} on {split.benchmark.title} {split.name}"),
        "howpublished": f"\\url{{{entry.paper_url}}}" if entry.paper_url else "",
        "note": _text(f"{entry.paper_note}{f'; {entry.venue}' if entry.venue else ''}; "
                      f"published {entry.published_at:%Y-%m-%d}"),
        "year": entry.published_at.year}))
    return "\n".join(parts)
