"""The byte budget for bodies nobody has vouched for yet, as bookkeeping (the served App's
behaviour under held bodies is in test_edges)."""

from __future__ import annotations

import pytest

from app.ingress.budget import LARGE_BODY, BodyBudget, MiB


def test_a_large_body_fills_only_its_share_and_small_ones_still_fit_beside_it():
    budget = BodyBudget(total=32 * MiB, large_share=25 * MiB)
    large = budget.hold(24 * MiB)
    assert large is not None
    assert budget.hold(24 * MiB) is None  # a second one does not fit the large share
    assert budget.hold(2 * MiB) is None
    small = [budget.hold(LARGE_BODY) for _ in range(8)]
    assert all(hold is not None for hold in small)
    assert budget.hold(LARGE_BODY) is None  # the total is spent
    large.release()
    assert budget.hold(25 * MiB) is None  # the small ones still hold 8 MiB of 32
    for hold in small:
        assert hold is not None
        hold.release()
    assert budget.held == budget.held_large == 0
    assert budget.hold(24 * MiB) is not None


def test_a_body_without_a_length_grows_its_hold_into_the_large_share_as_it_arrives():
    budget = BodyBudget(total=8 * MiB, large_share=3 * MiB)
    hold = budget.hold(0)
    assert hold is not None
    assert hold.grow(LARGE_BODY)
    assert budget.held_large == 0
    assert hold.grow(2 * MiB) and budget.held_large == 2 * MiB
    assert not hold.grow(4 * MiB)  # past the large share: the read stops here
    assert hold.size == 2 * MiB and budget.held == 2 * MiB
    hold.release()
    hold.release()  # giving back twice gives back once
    assert budget.held == budget.held_large == 0


def test_a_budget_is_a_positive_number_of_bytes():
    with pytest.raises(ValueError):
        BodyBudget(total=0, large_share=1)
