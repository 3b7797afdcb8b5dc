"""Which rows a board ranks together: like with like.

A board ranks only numbers produced the way this service produces them: the scored
rows, and the rows reported in papers under the service's protocol (``Track.protocols[0]``;
a paper row that names none counts as the service's). The other rows reported in papers
are listed apart, each with its protocol, never ranked with them:

- rows of another protocol (SQA3D's 706-way answer classification beside this service's
  open-answer EM), unless the view asks for every protocol ranked together (``protocol=all``,
  the board's *Protocol* control, honoured by the API and the exports);
- on a split whose labels are synthetic (``Split.labels_synthetic``), every paper row: its
  numbers are the real split's, the scored rows' are not, so no control ranks them together.

References (human performance, oracles) are apart for their own reason (``selectors.reference_entries``).
"""

from __future__ import annotations

from django.db.models import Q

from leaderboard.benchmarks.models import Split

ALL_PROTOCOLS = "all"  # the ``protocol`` value that ranks every protocol together
SYNTHETIC_LABELS = "synthetic_labels"
OTHER_PROTOCOLS = "other_protocols"


def apart_reason(split: Split, protocol: str) -> str:
    """Why some paper rows of the view are listed apart: ``synthetic_labels``, ``other_protocols``
    (the default view of a track with several protocols), or "" (none is)."""
    if split.labels_synthetic:
        return SYNTHETIC_LABELS
    if not protocol and len(split.benchmark.spec.protocols) > 1:
        return OTHER_PROTOCOLS
    return ""


def apart_rows(split: Split, protocol: str) -> Q | None:
    """The rows of a view (``protocol``: its ``protocol`` parameter) that are listed apart rather than
    ranked (references aside), or None when every row is ranked."""
    reason = apart_reason(split, protocol)
    if reason == SYNTHETIC_LABELS:
        return Q(is_paper=True)
    if reason == OTHER_PROTOCOLS:
        ours = split.benchmark.spec.protocols[0].key
        return Q(is_paper=True) & ~Q(protocol="") & ~Q(protocol=ours)
    return None


def is_other_protocol(split: Split, protocol: str) -> bool:
    """Whether a row of ``protocol`` on ``split`` was produced under another protocol than this service's."""
    protocols = split.benchmark.spec.protocols
    return len(protocols) > 1 and bool(protocol) and protocol != protocols[0].key
