"""The compare page and its API: which ids it takes."""

from __future__ import annotations

import pytest

from tests.leaderboard.test_rankings import add, split  # noqa: F401  (fixture)


@pytest.mark.parametrize("url", ["/benchmarks/sqa3d/compare/", "/api/v1/leaderboards/sqa3d/compare"])
@pytest.mark.parametrize("bad", ["9" * 20, "9" * 5000, "²", "-1", "0"])
def test_it_answers_404_to_an_id_no_row_can_have(client, split, url, bad):  # noqa: F811
    a = add(split, "A", 0.5)
    client.raise_request_exception = False
    response = client.get(f"{url}?e={a.pk}&e={bad}")
    assert response.status_code == 404
    assert "entry id" in response.content.decode()


@pytest.mark.parametrize("url", ["/benchmarks/sqa3d/compare/", "/api/v1/leaderboards/sqa3d/compare"])
def test_it_answers_404_to_any_id_that_is_not_a_row_of_this_board(client, split, url):  # noqa: F811
    """Issue 35: a compare link names rows of one board; one that is unknown (999999 fits in 64
    bits), gone, on another split or not visible to the viewer is a 404, never a page of fewer rows."""
    from datetime import timedelta

    from django.utils import timezone

    from leaderboard.benchmarks.models import Split

    a, b = add(split, "A", 0.5), add(split, "B", 0.6)
    paper = add(split, "Paper", 0.4, paper=True)
    mmscan = Split.objects.get(benchmark__track="mmscan-vg", name="val")
    elsewhere = add(mmscan, "Elsewhere", 0.3)
    client.raise_request_exception = False
    assert client.get(f"{url}?e={a.pk}&e={b.pk}").status_code == 200
    for other in (999999, b.pk + 100, elsewhere.pk):
        response = client.get(f"{url}?e={a.pk}&e={other}&e={b.pk}")
        assert response.status_code == 404, other
        assert f"{other} is not" in response.content.decode()
    # Scores on a split whose results are not visible yet: its scored rows are hidden from a visitor,
    # its paper rows are not (the board shows them).
    Split.objects.filter(pk=split.pk).update(results_visible_after=timezone.now() + timedelta(days=1))
    assert client.get(f"{url}?e={a.pk}&e={paper.pk}").status_code == 404
    assert client.get(f"{url}?e={paper.pk}").status_code == 200
    # Without e, the page is the picker.
    if url.startswith("/benchmarks/"):
        assert client.get(url).status_code == 200
