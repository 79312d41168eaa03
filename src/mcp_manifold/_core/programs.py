"""What a code-mode program reports to the call path when it ends: one record for audit, metrics, traces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ProgramReport:
    outcome: Literal["ok", "error", "cancelled"]
    error: str | None  # why it failed: its uncaught error, or the limit it reached
    calls: int  # tool calls it made (each has its own record)
    answer_size: int  # characters of the answer it gave the client
