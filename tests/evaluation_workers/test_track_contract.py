"""The contract every installed track keeps (docs/writing-a-track.md): the built-in tracks and every
plugin pass the same rules, from the track's own demo data to a scored result. The rules are the core's
(``evaluation_workers/tracks/contract.py``), which ``python -m evaluation_workers check-track NAME`` runs
without pytest; here each rule of each track is a test (``-k <track>`` runs one track's)."""

from __future__ import annotations

import pytest

from evaluation_workers.tracks import get_track, names
from evaluation_workers.tracks.contract import RULES, Broken, Demo, Rule, make_demo, run_rule


@pytest.fixture(scope="module", params=names())
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Demo | None, str]:
    """The track's demo labels, prepared as the site prepares them, and its demo predictions scored."""
    track = get_track(request.param)
    try:
        return track.name, make_demo(track, tmp_path_factory.mktemp(track.name)), ""
    except Broken as exc:
        return track.name, None, str(exc)


@pytest.mark.parametrize("rule", RULES, ids=[r.name.replace(" ", "-") for r in RULES])
def test_it_keeps_the_rule(demo: tuple[str, Demo | None, str], rule: Rule) -> None:
    name, data, why = demo
    finding = run_rule(rule, get_track(name), data, why)
    assert finding.status != "failed", f"{name}: {rule.name} ({rule.says}): {finding.detail}"
