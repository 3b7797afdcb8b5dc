"""What the site says about a file of the wrong kind (the format pages themselves are ``docs.py``'s)."""

from __future__ import annotations


def refusal_hint(file_name: str) -> str:
    """The converter to name when a ``.pth``/``.pkl`` is refused (the scoring core's words); else ""."""
    from evaluation_workers.convert import refusal_hint as hint

    return hint(file_name)
