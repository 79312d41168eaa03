"""How a result file can be read back in parts: the operations and what each answers."""

from __future__ import annotations

from dataclasses import dataclass

READ_OPS = ("stat", "head", "tail", "slice", "grep", "read")
DEFAULT_READ_LINES = 50


@dataclass(frozen=True)
class ReadAnswer:
    """Part of a result file read back: the text shown, and one line about what was shown."""

    body: str
    note: str
