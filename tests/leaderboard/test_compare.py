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


def test_it_ignores_an_id_of_a_row_that_is_gone(client, split):  # noqa: F811
    a, b = add(split, "A", 0.5), add(split, "B", 0.6)
    gone = b.pk + 100
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?e={a.pk}&e={gone}&e={b.pk}").json()
    assert [e["method"] for e in api["entries"]] == ["A", "B"]
