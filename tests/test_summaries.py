"""Server lists shown at connect time stay short however many servers there are."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from mcp_manifold._core.summaries import bounded_list


def test_short_lists_are_shown_whole() -> None:
    assert bounded_list(["git (12)", "time (2)"]) == "git (12), time (2)"
    assert bounded_list([]) == ""


def test_long_lists_name_what_fits_and_count_the_rest() -> None:
    parts = [f"server{i:03d} ({i})" for i in range(300)]
    text = bounded_list(parts, budget=200)
    assert len(text) <= 200
    shown = text.split(", ")[:-1]
    assert shown == parts[: len(shown)]
    assert text.endswith(f"and {300 - len(shown)} more")


@given(st.lists(st.text(min_size=1, max_size=30), max_size=400), st.integers(min_value=40, max_value=2000))
def test_never_over_budget_when_the_first_part_fits(parts: list[str], budget: int) -> None:
    # "Fits" includes the count of the rest: the first part is always shown, with or without room.
    assume(not parts or len(parts[0]) + len(f", and {len(parts)} more") <= budget)
    text = bounded_list(parts, budget=budget)
    assert len(text) <= budget
    if parts:
        assert text.startswith(parts[0])
