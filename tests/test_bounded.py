"""`BoundedTable` (`_core/bounded.py`): a lookup table that never grows past its size."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mcp_manifold._core.bounded import BoundedTable


def test_a_full_table_empties_before_a_new_key_and_keeps_the_new_one() -> None:
    table: BoundedTable[str, int] = BoundedTable(2)
    assert table.keep("a", 1) == 1
    table.keep("b", 2)
    table.keep("c", 3)
    assert table == {"c": 3}


def test_a_key_it_already_holds_is_replaced_without_emptying_it() -> None:
    table: BoundedTable[str, int] = BoundedTable(2)
    table.keep("a", 1)
    table.keep("b", 2)
    table.keep("b", 5)
    assert table == {"a": 1, "b": 5}


@given(st.integers(min_value=1, max_value=20), st.lists(st.tuples(st.integers(0, 40), st.integers())))
def test_it_never_holds_more_than_its_size_and_holds_what_was_kept_last(size: int, puts: list[tuple[int, int]]) -> None:
    table: BoundedTable[int, int] = BoundedTable(size)
    for key, value in puts:
        table.keep(key, value)
        assert len(table) <= size
        assert table[key] == value
