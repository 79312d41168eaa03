"""A lookup table of what is cheap to work out again, which can never grow past its size.

The gateway keeps verdicts and typed forms of what clients send again and again (their `_meta`, their
capabilities, their headers, their tokens) so that each request does not work them out afresh. Clients
send few such forms; many means someone is varying them, perhaps on purpose. So a full table is simply
emptied: no order to keep per lookup, as a least-recently-used one would, and a lookup stays a plain
dict's `get`.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedTable(dict[K, V]):
    """A dict that empties itself when a new entry would take it past `size` entries."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def keep(self, key: K, value: V) -> V:
        """Put `value` under `key` (emptying the table first if it is full), and give it back."""
        if len(self) >= self.size and key not in self:
            self.clear()
        self[key] = value
        return value
