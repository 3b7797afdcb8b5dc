"""P-values shown together, adjusted for multiplicity: Holm's step-down method.

A page that shows m paired tests at once (the compare page's pairs, a board's
adjacent rows) would call some difference significant far more often than the
level says when there is none. Holm's method (Holm 1979, "A simple
sequentially rejective multiple test procedure") keeps the chance of any
false "significant" among the m at the level, whatever the tests' dependence.
With the raw p-values sorted, p_(1) <= ... <= p_(m), the adjusted ones are

    p~_(i) = max over j <= i of min(1, (m - j + 1) p_(j)),

and a difference is significant when its adjusted p-value is below ``LEVEL``.
A test not computed yet counts as p = 1: the others' adjusted values are then
never smaller than they will be once it is known (they only fall as it comes).
"""

from __future__ import annotations

from collections.abc import Sequence

LEVEL = 0.05


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given (equal p-values get equal adjusted ones)."""
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: p_values[k])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
